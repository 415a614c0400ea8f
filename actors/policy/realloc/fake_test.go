package realloc

import (
	"fmt"
	"time"
)

// fakeGrid is a fake Estimator: each cluster runs its queue in order from a
// base instant, one job at a time, and a job takes dur[job][cluster]. A
// queued job completes at base + the durations up to and including its own;
// a job submitted to c would complete at the end of c's queue plus its
// duration. Cancelling a job moves the jobs behind it forward.
type fakeGrid struct {
	base   []time.Duration
	dur    map[string][]time.Duration // missing or negative: cannot run there
	queues [][]string
	log    []string
}

func newFakeGrid(base []time.Duration) *fakeGrid {
	return &fakeGrid{base: base, dur: map[string][]time.Duration{}, queues: make([][]string, len(base))}
}

// add queues job on cluster c with its durations per cluster.
func (g *fakeGrid) add(c int, id string, dur ...time.Duration) Job {
	g.dur[id] = dur
	g.queues[c] = append(g.queues[c], id)
	return Job{ID: id, Cluster: c}
}

func (g *fakeGrid) Clusters() int { return len(g.base) }

func (g *fakeGrid) Estimate(j Job, c int) (time.Duration, bool) {
	d := g.dur[j.ID]
	if c >= len(d) || d[c] < 0 {
		return 0, false
	}
	t := g.base[c]
	for _, id := range g.queues[c] {
		t += g.dur[id][c]
		if id == j.ID {
			return t, true
		}
	}
	return t + d[c], true
}

func (g *fakeGrid) Submit(j Job, c int) error {
	g.log = append(g.log, fmt.Sprintf("submit %s %d", j.ID, c))
	g.queues[c] = append(g.queues[c], j.ID)
	return nil
}

func (g *fakeGrid) Cancel(j Job, c int) error {
	g.log = append(g.log, fmt.Sprintf("cancel %s %d", j.ID, c))
	for i, id := range g.queues[c] {
		if id == j.ID {
			g.queues[c] = append(g.queues[c][:i], g.queues[c][i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("job %q is not queued on cluster %d", j.ID, c)
}
