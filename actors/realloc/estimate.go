package realloc

import (
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
)

// Cluster describes one batch cluster of the platform, by index.
type Cluster struct {
	Name     string
	Capacity int
	// Speed scales every job's lengths on the cluster (1.2: 20 % faster).
	Speed float64
}

// TypeOf returns the moldable job type named name ("t1" to "t4").
func TypeOf(name string) (rp.JobType, error) {
	for _, t := range rp.Types() {
		if t.Name == name {
			return t, nil
		}
	}
	return rp.JobType{}, fmt.Errorf("unknown job type %q", name)
}

// TraceOf is the trace shape of a grid job.
func TraceOf(j *msg.GridJob) rp.TraceJob {
	return rp.TraceJob{Procs: int(j.GetTraceProcs()), Walltime: time.Duration(j.GetTraceWalltimeNs()), Runtime: time.Duration(j.GetTraceRuntimeNs())}
}

// SizeOn sizes job for cluster c whose queue pol planned as plan: the
// processor count of earliest estimated completion (realloc.Size over
// plan.Completion), with its walltime and runtime on c.
func SizeOn(plan batch.Plan, c Cluster, job *msg.GridJob) (rp.Sized, error) {
	t, err := TypeOf(job.GetJobType())
	if err != nil {
		return rp.Sized{}, fmt.Errorf("job %s: %w", job.GetId(), err)
	}
	sz, err := rp.Size(TraceOf(job), t, c.Capacity, c.Speed, plan.Completion)
	if err != nil {
		return rp.Sized{}, fmt.Errorf("job %s on %s: %w", job.GetId(), c.Name, err)
	}
	return sz, nil
}

// Copies is the agent's view of every cluster's queue during one
// reallocation: copies of the clusters' states, on which the pure
// algorithms submit and cancel (rp.Estimator). A job's estimate on the
// cluster where it waits is the end of its reservation there; elsewhere it
// is the completion of the job sized for that cluster (SizeOn). Plans are
// recomputed only for a cluster whose copy changed.
type Copies struct {
	pol      batch.Policy
	now      time.Duration
	clusters []Cluster
	run      [][]batch.Running
	queue    [][]batch.Queued
	jobs     map[string]*msg.GridJob
	plans    []*batch.Plan
	// Chosen is the shape of every job submitted on the copies, by ID: what
	// the agent submits for real.
	Chosen map[string]rp.Sized
}

var _ rp.Estimator = (*Copies)(nil)

// NewCopies returns the copies of states (one per cluster, in cluster
// order) at instant now; jobs are the grid jobs the algorithms may move.
func NewCopies(pol batch.Policy, now time.Duration, clusters []Cluster, states []*msg.BatchState, jobs map[string]*msg.GridJob) *Copies {
	c := &Copies{pol: pol, now: now, clusters: clusters, jobs: jobs, plans: make([]*batch.Plan, len(clusters)),
		run: make([][]batch.Running, len(clusters)), queue: make([][]batch.Queued, len(clusters)), Chosen: map[string]rp.Sized{}}
	for i, s := range states {
		c.run[i], c.queue[i] = snapshot(s)
	}
	return c
}

// Clusters implements rp.Estimator.
func (c *Copies) Clusters() int { return len(c.clusters) }

func (c *Copies) plan(i int) (*batch.Plan, error) {
	if c.plans[i] == nil {
		p, err := c.pol.Schedule(c.now, c.clusters[i].Capacity, c.run[i], c.queue[i])
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.clusters[i].Name, err)
		}
		c.plans[i] = &p
	}
	return c.plans[i], nil
}

func (c *Copies) size(j rp.Job, i int) (rp.Sized, bool) {
	g, ok := c.jobs[j.ID]
	if !ok {
		return rp.Sized{}, false
	}
	p, err := c.plan(i)
	if err != nil {
		return rp.Sized{}, false
	}
	sz, err := SizeOn(*p, c.clusters[i], g)
	return sz, err == nil
}

// Estimate implements rp.Estimator.
func (c *Copies) Estimate(j rp.Job, i int) (time.Duration, bool) {
	for k, q := range c.queue[i] {
		if q.ID == j.ID {
			p, err := c.plan(i)
			if err != nil {
				return 0, false
			}
			return p.Reservations[k].End, true
		}
	}
	sz, ok := c.size(j, i)
	return sz.Completion, ok
}

// Submit implements rp.Estimator: the job, sized for cluster i, joins the
// tail of its queue.
func (c *Copies) Submit(j rp.Job, i int) error {
	sz, ok := c.size(j, i)
	if !ok {
		return fmt.Errorf("job %s cannot run on cluster %s", j.ID, c.clusters[i].Name)
	}
	c.queue[i] = append(c.queue[i], batch.Queued{ID: j.ID, Procs: sz.Procs, Walltime: sz.Walltime})
	c.plans[i] = nil
	c.Chosen[j.ID] = sz
	return nil
}

// Cancel implements rp.Estimator.
func (c *Copies) Cancel(j rp.Job, i int) error {
	for k, q := range c.queue[i] {
		if q.ID == j.ID {
			c.queue[i] = append(c.queue[i][:k:k], c.queue[i][k+1:]...)
			c.plans[i] = nil
			return nil
		}
	}
	return fmt.Errorf("job %s does not wait on cluster %s", j.ID, c.clusters[i].Name)
}

// snapshot converts a BatchState into the planner's inputs.
func snapshot(s *msg.BatchState) ([]batch.Running, []batch.Queued) {
	run := make([]batch.Running, len(s.GetRunning()))
	for i, r := range s.GetRunning() {
		run[i] = batch.Running{ID: r.GetId(), Procs: int(r.GetProcs()), Start: time.Duration(r.GetStartNs()), Walltime: time.Duration(r.GetWalltimeNs())}
	}
	q := make([]batch.Queued, len(s.GetQueue()))
	for i, w := range s.GetQueue() {
		q[i] = batch.Queued{ID: w.GetId(), Procs: int(w.GetProcs()), Walltime: time.Duration(w.GetWalltimeNs()), Held: w.GetHeld(), Reserved: time.Duration(w.GetReservedNs())}
	}
	return run, q
}
