package launch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/launch/wiring"
)

// runBatch runs a batch grid (plan.Batch) in this process: the roles of
// wiring.StartBatch on the scaled clock, every submission a wall timer at
// its scenario time divided by the time scale. Every job runs as
// compute-only processes on node actors of its cluster, one a processor
// (abatch.OnNodes).
func (r *inprocRun) runBatch(ctx context.Context) (wiring.Outcome, error) {
	fmt.Fprintf(r.opts.Progress, "batch grid: %d clusters, %d node actors; replaying %d trace jobs (time scale %g)\n",
		len(r.plan.Batch.Clusters), r.plan.TotalNodes(), len(r.plan.Jobs), r.plan.TimeScale)
	r.clk.Restart()
	var mu sync.Mutex
	var timers []*time.Timer
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range timers {
			t.Stop()
		}
	}
	defer stop()
	spawn := func(p *actor.Props, name string) (*actor.PID, error) {
		pid, err := r.system.Root.SpawnNamed(p, name)
		if err == nil {
			r.stops = append(r.stops, pid)
		}
		return pid, err
	}
	at := func(t time.Duration, f func()) {
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, time.AfterFunc(r.clk.ToWall(t-r.clk.Now()), f))
	}
	if err := wiring.StartBatch(r.env, r.plan, wiring.BatchHost{Spawn: spawn, At: at}); err != nil {
		return wiring.Outcome{}, err
	}
	return r.results.Await(ctx, r.clk, r.opts, stop), nil
}
