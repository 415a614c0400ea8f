package apps

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A batch process waits its runtime on its node divided by the time scale,
// whatever the node's speed (the runtime is already the cluster's), in
// one wait, and sends nothing.
func TestComputeWaitsItsRuntime(t *testing.T) {
	var mu sync.Mutex
	var waits []time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}
	app, err := Lookup(ComputeName)
	if err != nil {
		t.Fatal(err)
	}
	spec := []RankSpec{{Cluster: "a", Speed: 1.4, Processors: 1}, {Cluster: "a", Speed: 1.4, Processors: 1}}
	rep, err := RunLocalReport(ctxT(t), app, spec, nil, Params{TimeScale: 10, Args: map[string]float64{"runtime_s": 70}}, WithSleep(sleep))
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 2 {
		t.Fatalf("%d waits, want one a process: %v", len(waits), waits)
	}
	for _, d := range waits {
		if d < 7*time.Second-time.Microsecond || d > 7*time.Second+time.Microsecond {
			t.Errorf("a process waited %v, want 7s (70 s at time scale 10)", d)
		}
	}
	if rep.Result.Value != 70 || rep.Bytes() != 0 || rep.Messages() != 0 {
		t.Errorf("result %+v, %d bytes and %d messages sent; want value 70 and nothing sent", rep.Result, rep.Bytes(), rep.Messages())
	}
	if slices.Contains(Names(), ComputeName) {
		t.Errorf("Names() %v lists %s, which no workload may name", Names(), ComputeName)
	}
	if _, err := NominalArgs(app, 4, map[string]float64{"runtime_s": 5}); err != nil {
		t.Error(err)
	}
}

// A process whose context ends (its rank aborted at the job's walltime)
// returns an error, not a result.
func TestComputeAborted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	sleep := func(ctx context.Context, _ time.Duration) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := RunLocal(ctx, Compute{}, []RankSpec{{Cluster: "a"}}, nil, Params{}, WithSleep(sleep))
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("an aborted process reported a result")
	}
}

// A process left no runtime (its job waited for nodes that long) computes
// nothing; a negative runtime is refused.
func TestComputeNothingLeft(t *testing.T) {
	waited := false
	sleep := func(context.Context, time.Duration) error { waited = true; return nil }
	if _, _, err := RunLocal(ctxT(t), Compute{}, []RankSpec{{Cluster: "a"}}, nil, Params{Args: map[string]float64{"runtime_s": 0}}, WithSleep(sleep)); err != nil || waited {
		t.Errorf("runtime 0: error %v, waited %v; want neither", err, waited)
	}
	if _, _, err := RunLocal(ctxT(t), Compute{}, []RankSpec{{Cluster: "a"}}, nil, Params{Args: map[string]float64{"runtime_s": -1}}, WithSleep(sleep)); err == nil || !strings.Contains(err.Error(), "runtime_s") {
		t.Errorf("runtime -1: %v, want an error naming runtime_s", err)
	}
}
