package comm

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkGrow2to46 measures one grow of a job from 2 to 46 ranks with a
// 64 KiB array (an FT job's first grow on das3-malleable-pwa at time scale
// 120): the current ranks' Resize and the new ranks' Join, from the call to
// the last rank's new block, on plain loopback connections. The wall time
// is the host's whole cost of a resize pause whose ideal cost is a few
// round trips of latency; at time scale k it counts k times in scenario
// time.
func BenchmarkGrow2to46(b *testing.B) {
	const oldN, n, total = 2, 46, 64 << 10
	ctx := context.Background()
	var pause time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cs, err := ConnectLocal(ctx, make([]Options, oldN))
		if err != nil {
			b.Fatal(err)
		}
		eps := make([]*Endpoint, n-oldN)
		peers := cs[0].Peers()
		for j := range eps {
			eps[j], err = Listen(ctx, Options{JobID: "local", Rank: oldN + j}, "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			peers = append(peers, Peer{Rank: oldN + j, Addr: eps[j].Addr()})
		}
		data := [][]byte{make([]byte, total/2), make([]byte, total/2)}
		all := make([]*Comm, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		b.StartTimer()
		start := time.Now()
		for r := range n {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				if r < oldN {
					_, _, errs[r] = cs[r].Resize(ctx, peers, r, data[r])
					all[r] = cs[r]
					return
				}
				all[r], _, _, errs[r] = eps[r-oldN].Join(ctx, peers, oldN)
			}(r)
		}
		wg.Wait()
		pause += time.Since(start)
		b.StopTimer()
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: %v", r, err)
			}
		}
		var cw sync.WaitGroup
		for _, c := range all {
			cw.Add(1)
			go func(c *Comm) { defer cw.Done(); _ = c.Close() }(c)
		}
		cw.Wait()
		for _, e := range eps {
			_ = e.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(pause.Microseconds())/float64(b.N)/1e3, "ms/grow")
}
