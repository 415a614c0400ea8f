package comm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
)

func benchMesh(b *testing.B, n int) []*Comm {
	b.Helper()
	cs, err := ConnectLocal(context.Background(), make([]Options, n))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func(c *Comm) { defer wg.Done(); _ = c.Close() }(c)
		}
		wg.Wait()
	})
	return cs
}

// runSPMD runs f(rank, iterations) on every rank and reports the host's
// message rate.
func runSPMD(b *testing.B, cs []*Comm, f func(c *Comm, iters int) error) {
	b.Helper()
	ctx := context.Background()
	_ = ctx
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	start := time.Now()
	b.ResetTimer()
	for i, c := range cs {
		wg.Add(1)
		go func(i int, c *Comm) {
			defer wg.Done()
			errs[i] = f(c, b.N)
		}(i, c)
	}
	wg.Wait()
	b.StopTimer()
	el := time.Since(start)
	var msgs int64
	for i, c := range cs {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		msgs += c.Stats().MsgsSent
	}
	b.ReportMetric(float64(msgs)/el.Seconds(), "msgs/s")
}

// BenchmarkPingPong: round trip of 8-byte messages between two ranks.
func BenchmarkPingPong(b *testing.B) {
	cs := benchMesh(b, 2)
	ctx := context.Background()
	msg := make([]byte, 8)
	runSPMD(b, cs, func(c *Comm, n int) error {
		for i := 0; i < n; i++ {
			if c.Rank() == 0 {
				if _, err := c.Sendrecv(ctx, 1, 0, msg, 1, 0); err != nil {
					return err
				}
			} else {
				if _, err := c.Recv(ctx, 0, 0); err != nil {
					return err
				}
				if err := c.Send(ctx, 0, 0, msg); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// BenchmarkNeighbourExchange: every rank exchanges 8 bytes with both ring
// neighbours per step (the wave pattern) with no computation: the host's
// ceiling on message rate and per-step overhead.
// neighbourExchange is a rank's loop of 8-byte exchanges with both ring
// neighbours.
func neighbourExchange(ctx context.Context) func(c *Comm, iters int) error {
	return func(c *Comm, iters int) error {
		msg := make([]byte, 8)
		r, sz := c.Rank(), c.Size()
		l, rt := (r-1+sz)%sz, (r+1)%sz
		for i := 0; i < iters; i++ {
			if err := c.Send(ctx, l, 0, msg); err != nil {
				return err
			}
			if err := c.Send(ctx, rt, 0, msg); err != nil {
				return err
			}
			if _, err := c.Recv(ctx, l, 0); err != nil {
				return err
			}
			if _, err := c.Recv(ctx, rt, 0); err != nil {
				return err
			}
		}
		return nil
	}
}

func BenchmarkNeighbourExchange(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			cs := benchMesh(b, n)
			ctx := context.Background()
			runSPMD(b, cs, neighbourExchange(ctx))
		})
	}
}

// BenchmarkAllgather: allgather on 32 ranks.
func BenchmarkAllgather(b *testing.B) {
	for _, alg := range []string{"ring", "bruck"} {
		for _, size := range []int{2 << 10, 10 << 10} {
			b.Run(fmt.Sprintf("%s/ranks=32/bytes=%d", alg, size), func(b *testing.B) {
				cs := benchMesh(b, 32)
				ctx := context.Background()
				runSPMD(b, cs, func(c *Comm, iters int) error {
					msg := make([]byte, size)
					for i := 0; i < iters; i++ {
						var err error
						if alg == "ring" {
							_, err = c.AllgatherRing(ctx, msg)
						} else {
							_, err = c.AllgatherBruck(ctx, msg)
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkNeighbourExchangeShaped is BenchmarkNeighbourExchange through
// the userspace shaper on a Myri-10G cluster link (0.03 ms, 560 MB/s).
func BenchmarkNeighbourExchangeShaped(b *testing.B) {
	for _, inline := range []bool{true, false} {
		for _, d := range []float64{1, 4} {
			b.Run(fmt.Sprintf("ranks=32/inline=%v/d=%g", inline, d), func(b *testing.B) {
				opts := make([]Options, 32)
				for i := range opts {
					u := netem.NewUserspace(netem.EgressPlan{Node: fmt.Sprint(i), Cluster: "a",
						To: map[string]netem.Link{"a": {Latency: 30 * time.Microsecond, Bandwidth: 560e6}}}, nil, d)
					if !inline {
						u.InlineSpin = -1
					}
					opts[i] = Options{Cluster: "a", Egress: u}
				}
				cs, err := ConnectLocal(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					for _, c := range cs {
						c.Abort(nil)
					}
				}()
				ctx := context.Background()
				runSPMD(b, cs, neighbourExchange(ctx))
			})
		}
	}
}

// BenchmarkMonitorCost is the neighbour exchange of 8 ranks (8-byte
// messages, the most frames per second a job sends) and 2 ms-apart
// computations, without and with the fidelity monitor (a probe per rank
// and stamped frames): the difference per message is the monitor's cost.
func BenchmarkMonitorCost(b *testing.B) {
	for _, monitored := range []bool{false, true} {
		b.Run(fmt.Sprintf("monitor=%v", monitored), func(b *testing.B) {
			opts := make([]Options, 8)
			for i := range opts {
				if monitored {
					opts[i] = Options{Probe: fidelity.NewProbe(), Targets: map[string]netem.Link{"": {Latency: time.Microsecond}}}
				}
			}
			cs, err := ConnectLocal(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				for _, c := range cs {
					go func(c *Comm) { _ = c.Close() }(c)
				}
			})
			ctx := context.Background()
			runSPMD(b, cs, neighbourExchange(ctx))
			var frames int64
			for _, o := range opts {
				s := o.Probe.Snapshot()
				for _, l := range s.Links {
					frames += l.Frames
				}
			}
			if monitored && frames == 0 {
				b.Fatal("the monitor recorded no frame")
			}
		})
	}
}

// BenchmarkStartup64 measures the start-up of a 64-rank job: listen,
// connect, one ring exchange, close. Full-mesh start-up opened 2,016
// connections per job; lazy connections open only those the ring uses.
func BenchmarkStartup64(b *testing.B) {
	const n = 64
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		cs, err := ConnectLocal(ctx, make([]Options, n))
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for r, c := range cs {
			wg.Add(1)
			go func(r int, c *Comm) {
				defer wg.Done()
				got, err := c.Sendrecv(ctx, (r+1)%n, 1, []byte{byte(r)}, (r+n-1)%n, 1)
				if err == nil && int(got[0]) != (r+n-1)%n {
					err = fmt.Errorf("rank %d got %d", r, got[0])
				}
				if cerr := c.Close(); err == nil {
					err = cerr
				}
				errs[r] = err
			}(r, c)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
