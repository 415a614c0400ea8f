package membership

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkFailureDetection measures, with DefaultConfig timings on
// loopback, the time from an abrupt stop of one of 5 members to the Fail
// event at another member (reported as detect-ms), and from Leave to the
// Leave event (leave-ms).
func BenchmarkFailureDetection(b *testing.B) {
	var detect, leave time.Duration
	for i := 0; i < b.N; i++ {
		ps := make([]*Memberlist, 5)
		for j := range ps {
			cfg := DefaultConfig(Member{Name: fmt.Sprintf("b%d", j), Role: RoleNode})
			cfg.BindAddr, cfg.BindPort = "127.0.0.1", 0
			p, err := NewMemberlist(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ps[j] = p
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := ps[0].Join(ctx, nil); err != nil {
			b.Fatal(err)
		}
		for _, p := range ps[1:] {
			if err := p.Join(ctx, []string{ps[0].GossipAddr()}); err != nil {
				b.Fatal(err)
			}
		}
		for len(ps[0].Members()) < len(ps) || len(ps[4].Members()) < len(ps) {
			select {
			case <-ctx.Done():
				b.Fatal("members did not converge")
			case <-time.After(10 * time.Millisecond):
			}
		}
		await := func(kind EventKind, name string) time.Time {
			for {
				select {
				case e := <-ps[0].Events():
					if e.Kind == kind && e.Member.Name == name {
						return time.Now()
					}
				case <-ctx.Done():
					b.Fatalf("no %v of %s", kind, name)
				}
			}
		}
		start := time.Now()
		_ = ps[4].Close()
		detect += await(Fail, "b4").Sub(start)
		start = time.Now()
		if err := ps[3].Leave(ctx); err != nil {
			b.Fatal(err)
		}
		leave += await(Leave, "b3").Sub(start)
		for _, p := range ps {
			_ = p.Close()
		}
		cancel()
	}
	b.ReportMetric(float64(detect.Milliseconds())/float64(b.N), "detect-ms")
	b.ReportMetric(float64(leave.Milliseconds())/float64(b.N), "leave-ms")
}
