package comm

import (
	"context"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
)

// A link that delivers twice as late as its target, and a computation whose
// waits take twice as long as asked, must both be caught by the ranks'
// probes; frames carry their stamps over every connection.
func TestProbeCatchesLateLinkAndSlowCompute(t *testing.T) {
	target := netem.Link{Latency: 2 * time.Millisecond, Bandwidth: 1e9}
	actual := netem.Link{Latency: 4 * time.Millisecond, Bandwidth: 1e9}
	probes := []*fidelity.Probe{fidelity.NewProbe(), fidelity.NewProbe()}
	clusters := []string{"a", "b"}
	slowSleep := func(ctx context.Context, d time.Duration) error { return timerSleep(ctx, 2*d) }
	cs := mesh(t, 2, func(i int, o *Options) {
		o.Cluster = clusters[i]
		o.Probe = probes[i]
		o.Targets = map[string]netem.Link{"a": target, "b": target}
		plan := netem.EgressPlan{Node: clusters[i], Cluster: clusters[i], To: map[string]netem.Link{"a": actual, "b": actual}}
		eg := netem.NewUserspace(plan, nil, 1)
		t.Cleanup(func() { _ = eg.Close() })
		o.Egress = eg
		o.Sleep = slowSleep
	})
	ctx := testCtx(t)
	const rounds = 20
	done := make(chan error, 1)
	go func() {
		for i := 0; i < rounds; i++ {
			b, err := cs[1].Recv(ctx, 0, 0)
			if err != nil {
				done <- err
				return
			}
			if err := cs[1].Send(ctx, 0, 1, b); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < rounds; i++ {
		if err := cs[0].Send(ctx, 1, 0, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := cs[0].Recv(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := cs[0].Compute(ctx, 2*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s0, s1 := probes[0].Snapshot(), probes[1].Snapshot()
	if l := s1.Links["a>b"]; l == nil || l.Frames != rounds {
		t.Fatalf("rank 1 recorded %+v frames from a, want %d", s1.Links, rounds)
	}
	if l := s0.Links["b>a"]; l == nil || l.Frames != rounds {
		t.Fatalf("rank 0 recorded %+v frames from b, want %d", s0.Links, rounds)
	}
	// 4 ms instead of 2 ms: every frame at least 90 % late.
	if p50 := s1.LinkLate().Quantile(0.5); p50 < 0.9 {
		t.Fatalf("late link: p50 %.2f of the target late, want >= 0.9", p50)
	}
	if s0.ComputeCalls != rounds {
		t.Fatalf("compute calls %d, want %d", s0.ComputeCalls, rounds)
	}
	f := fidelity.Judge(&s0, fidelity.DefaultThresholds())
	if f.Verdict != fidelity.Degraded || f.Compute.P99 < 0.9 || s0.Compensated <= 0 {
		t.Fatalf("slow compute judged %s, compute %+v", f.Verdict, f.Compute)
	}
}

// Without a probe, frames carry no stamps and nothing is recorded.
func TestNoProbeNoStamps(t *testing.T) {
	cs := mesh(t, 2, func(i int, o *Options) {
		o.Targets = map[string]netem.Link{"c0": {Latency: time.Millisecond}}
	})
	if cs[0].model != nil {
		t.Fatal("a rank without a probe built a link model")
	}
	ctx := testCtx(t)
	if err := cs[0].Send(ctx, 1, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[1].Recv(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
}
