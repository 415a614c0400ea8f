package apps

import (
	"context"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// TestOneOffCredit: at time scale 8 on two clusters (30 µs inside, 1 ms
// and 10 MB/s across), every rank of wave, prime and poisson computes the
// ideal cost of its job's one-off phase x (1 - 1/8) less with the
// scenario's matrix than without it; at time scale 1 it computes the same.
func TestOneOffCredit(t *testing.T) {
	in := netem.Link{Latency: 30 * time.Microsecond}
	across := netem.Link{Latency: time.Millisecond, Bandwidth: 1e7}
	m := netem.Matrix{Clusters: []string{"a", "b"}, Links: [][]netem.Link{{in, across}, {across, in}}}
	hop := func(bytes float64) time.Duration {
		return time.Millisecond + time.Duration(bytes/1e7*float64(time.Second))
	}
	// Four ranks, 0 and 1 on a, 2 and 3 on b. Allreduce of 8 bytes: a
	// round inside, a round across. Wave: the gather of 1024 points of 8
	// bytes from the far ranks, then the broadcast 0 -> 2 -> 3.
	allreduce := 30*time.Microsecond + hop(8)
	for _, tc := range []struct {
		app    App
		args   map[string]float64
		oneOff time.Duration
	}{
		{Wave{}, map[string]float64{"steps": 64}, hop(8*1024) + hop(8) + 30*time.Microsecond},
		{Prime{}, map[string]float64{"limit": 100, "work_s": 8, "chunks": 16}, allreduce},
		{Poisson{}, map[string]float64{"iters": 16, "real": 16}, allreduce},
	} {
		for _, k := range []float64{1, 8} {
			p := Params{TimeScale: k, Args: tc.args}
			compute := func(opts ...LocalOption) []time.Duration {
				opts = append(opts, WithSleep(func(context.Context, time.Duration) error { return nil }))
				rep, err := RunLocalReport(ctxT(t), tc.app, ranks(4, "a", "b"), nil, p, opts...)
				if err != nil {
					t.Fatalf("%s: %v", tc.app.Name(), err)
				}
				out := make([]time.Duration, len(rep.Stats))
				for i, s := range rep.Stats {
					out[i] = s.ComputeTime
				}
				return out
			}
			without, with := compute(), compute(WithLinks(m))
			want := time.Duration(float64(tc.oneOff) * (1 - 1/k))
			for r := range with {
				if got := without[r] - with[r]; got < want-time.Microsecond || got > want+time.Microsecond {
					t.Errorf("%s at time scale %v, rank %d: computes %v less with the matrix, want %v (the one-off phase %v x (1 - 1/k))",
						tc.app.Name(), k, r, got, want, tc.oneOff)
				}
			}
		}
	}
}

func TestCreditTake(t *testing.T) {
	// 3 ms over 4 calls: 0.75 ms off each of them.
	cr := &Credit{s: spread{left: 3 * time.Millisecond, per: 750 * time.Microsecond}}
	for i := range 4 {
		if got := cr.Take(2 * time.Millisecond); got != 1250*time.Microsecond {
			t.Errorf("take %d: %v, want 1.25ms", i, got)
		}
	}
	if got := cr.Take(2 * time.Millisecond); got != 2*time.Millisecond || cr.Left() != 0 {
		t.Errorf("after the credit: %v (left %v), want 2ms and nothing left", got, cr.Left())
	}
	// Computation shorter than the credit: every call goes, the rest stays.
	short := &Credit{s: spread{left: 5 * time.Millisecond, per: 2500 * time.Microsecond}}
	for range 2 {
		if got := short.Take(time.Millisecond); got != 0 {
			t.Errorf("a call shorter than its share: %v left of it, want 0", got)
		}
	}
	if short.Left() != 3*time.Millisecond {
		t.Errorf("a computation shorter than the credit: left %v, want 3ms", short.Left())
	}
}
