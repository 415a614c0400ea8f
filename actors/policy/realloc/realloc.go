package realloc

import (
	"fmt"
	"sort"
	"time"
)

// Estimate is one server's answer for one job: the completion time the job
// would get on its cluster, or OK false when the cluster cannot run it.
type Estimate struct {
	Completion time.Duration
	OK         bool
}

// MinCompletion is the agent's MCT mapping: the index of the server with the
// minimum estimated completion time, ties to the lowest index; ok is false
// when no server can run the job.
func MinCompletion(estimates []Estimate) (best int, ok bool) {
	best = -1
	for i, e := range estimates {
		if e.OK && (best < 0 || e.Completion < estimates[best].Completion) {
			best = i
		}
	}
	return best, best >= 0
}

// Job is a job waiting in a batch queue that the middleware may move.
type Job struct {
	// ID names the job; IDs are unique among the waiting jobs.
	ID string
	// Submit is the job's submission to the middleware; submission order is
	// by Submit, then by position in the slice given.
	Submit time.Duration
	// Cluster is the index of the cluster where the job waits.
	Cluster int
}

// Estimator is the caller's view of the batch queues during one
// reallocation. Regular and AllCancellation ask it for estimates and tell
// it every submit and cancel they decide, in order, so later estimates see
// earlier moves; the caller applies the returned moves to the real servers
// afterwards (or as they are decided). A server actor implements it over
// copies of the clusters' queues and batch.Plan.Completion; a test
// implements it over a fake.
type Estimator interface {
	// Clusters is the number of clusters, indexed from 0.
	Clusters() int
	// Estimate returns the job's estimated completion on cluster c: its
	// current estimate if it waits on c, otherwise the one it would get if
	// it were submitted to c now (sized for c). ok is false when c cannot
	// run the job.
	Estimate(job Job, c int) (completion time.Duration, ok bool)
	// Submit queues the job on cluster c.
	Submit(job Job, c int) error
	// Cancel removes the job from the queue of cluster c.
	Cancel(job Job, c int) error
}

// Move is one decision of a reallocation: the job leaves cluster From (where
// its estimated completion was Old) for cluster To (New).
type Move struct {
	Job      string
	From, To int
	Old, New time.Duration
}

// Reallocated says whether the move changes the job's cluster; a job that
// all-cancellation resubmits to the cluster it left is not reallocated.
func (m Move) Reallocated() bool { return m.From != m.To }

// Heuristic orders the waiting jobs of a reallocation (SPEC §5).
type Heuristic interface {
	// Name is the key of the heuristic in Heuristics.
	Name() string
	// Scored returns how many of the n oldest waiting jobs are taken by
	// smallest estimated completion time, one at a time and re-estimated
	// after every move; the other jobs follow in submission order.
	Scored(n int) int
}

// MCT takes the waiting jobs in submission order (the heuristic of the
// agent's mapping applied job by job).
type MCT struct{}

// Name is "mct".
func (MCT) Name() string { return "mct" }

// Scored is 0: every job in submission order.
func (MCT) Scored(int) int { return 0 }

// MinMin repeatedly takes, among the Oldest oldest waiting jobs, the one with
// the smallest estimated completion time (its minimum over the clusters);
// the remaining jobs follow in submission order. Oldest 0 means 20, the
// window of SPEC §5, which bounds the quadratic number of estimates. The
// window is fixed when the reallocation starts: a job leaving it does not
// let the 21st oldest in. Ties go to the older job.
type MinMin struct{ Oldest int }

// Name is "minmin".
func (MinMin) Name() string { return "minmin" }

// Scored is min(Oldest, n), Oldest 0 counting as 20.
func (h MinMin) Scored(n int) int {
	if h.Oldest <= 0 {
		return min(20, n)
	}
	return min(h.Oldest, n)
}

// DefaultThreshold is the least improvement of the estimated completion time
// for which the regular algorithm moves a job (SPEC §5).
const DefaultThreshold = 60 * time.Second

// Options tunes an algorithm.
type Options struct {
	// Threshold is the least improvement for a regular move; 0 means
	// DefaultThreshold, a negative value is an error. AllCancellation
	// ignores it.
	Threshold time.Duration
}

// Algorithm is a reallocation algorithm: it decides the moves of one
// reallocation over the waiting jobs, telling est about each, and returns
// them in the order decided.
type Algorithm func(waiting []Job, est Estimator, h Heuristic, opt Options) ([]Move, error)

// Regular is the regular reallocation of SPEC §5: the heuristic picks a
// waiting job; the job's best other cluster is the one of least estimated
// completion (ties to the lowest index); if that beats the job's current
// estimate by at least the threshold (60 s by default: 60 s moves, 59 s does
// not), the job is submitted there and cancelled where it was (est.Submit,
// then est.Cancel). Every job is considered once, moved or not.
//
// Choices where SPEC §5 is silent: MinMin's score of a job is its least
// estimate over every cluster, its current one included; a job's own
// cluster is never a candidate for a move; a job whose current estimate is
// missing is an error (the estimator does not know where the job waits).
func Regular(waiting []Job, est Estimator, h Heuristic, opt Options) ([]Move, error) {
	jobs, thr, err := prepare(waiting, est, h, opt)
	if err != nil {
		return nil, err
	}
	var moves []Move
	score := func(j Job) (time.Duration, bool, error) {
		cur, ok := est.Estimate(j, j.Cluster)
		if !ok {
			return 0, false, fmt.Errorf("job %q: no estimate on its own cluster %d", j.ID, j.Cluster)
		}
		if c, ok := bestOther(est, j, -1); ok {
			cur = min(cur, c.completion)
		}
		return cur, true, nil
	}
	act := func(j Job) error {
		cur, ok := est.Estimate(j, j.Cluster)
		if !ok {
			return fmt.Errorf("job %q: no estimate on its own cluster %d", j.ID, j.Cluster)
		}
		best, ok := bestOther(est, j, j.Cluster)
		if !ok || cur-best.completion < thr {
			return nil
		}
		to := best.cluster
		if err := est.Submit(j, to); err != nil {
			return fmt.Errorf("job %q: submit to cluster %d: %w", j.ID, to, err)
		}
		if err := est.Cancel(j, j.Cluster); err != nil {
			return fmt.Errorf("job %q: cancel on cluster %d: %w", j.ID, j.Cluster, err)
		}
		moves = append(moves, Move{Job: j.ID, From: j.Cluster, To: to, Old: cur, New: best.completion})
		return nil
	}
	if err := drive(jobs, h, score, act); err != nil {
		return nil, err
	}
	return moves, nil
}

// AllCancellation is the all-cancellation reallocation of SPEC §5: every
// waiting job is cancelled (in submission order), then the jobs are
// resubmitted one at a time, in the heuristic's order, each to the cluster
// of least estimated completion (ties to the lowest index). It returns one
// Move per waiting job, in resubmission order; Move.Reallocated tells the
// jobs that changed cluster, and Old is the estimate before the
// cancellation.
//
// Choices where SPEC §5 is silent: MinMin's score of a job is its least
// estimate over every cluster; a job that no cluster can run any more is an
// error (it was cancelled, so dropping it would lose it).
func AllCancellation(waiting []Job, est Estimator, h Heuristic, opt Options) ([]Move, error) {
	jobs, _, err := prepare(waiting, est, h, opt)
	if err != nil {
		return nil, err
	}
	old := make(map[string]time.Duration, len(jobs))
	for _, j := range jobs {
		c, ok := est.Estimate(j, j.Cluster)
		if !ok {
			return nil, fmt.Errorf("job %q: no estimate on its own cluster %d", j.ID, j.Cluster)
		}
		old[j.ID] = c
	}
	for _, j := range jobs {
		if err := est.Cancel(j, j.Cluster); err != nil {
			return nil, fmt.Errorf("job %q: cancel on cluster %d: %w", j.ID, j.Cluster, err)
		}
	}
	var moves []Move
	score := func(j Job) (time.Duration, bool, error) {
		c, ok := bestOther(est, j, -1)
		return c.completion, ok, nil
	}
	act := func(j Job) error {
		best, ok := bestOther(est, j, -1)
		if !ok {
			return fmt.Errorf("job %q: no cluster can run it", j.ID)
		}
		if err := est.Submit(j, best.cluster); err != nil {
			return fmt.Errorf("job %q: submit to cluster %d: %w", j.ID, best.cluster, err)
		}
		moves = append(moves, Move{Job: j.ID, From: j.Cluster, To: best.cluster, Old: old[j.ID], New: best.completion})
		return nil
	}
	if err := drive(jobs, h, score, act); err != nil {
		return nil, err
	}
	return moves, nil
}

// prepare checks the inputs and returns the jobs in submission order and the
// threshold.
func prepare(waiting []Job, est Estimator, h Heuristic, opt Options) ([]Job, time.Duration, error) {
	if est == nil {
		return nil, 0, fmt.Errorf("estimator is nil")
	}
	if h == nil {
		return nil, 0, fmt.Errorf("heuristic is nil")
	}
	thr := opt.Threshold
	if thr < 0 {
		return nil, 0, fmt.Errorf("threshold %v is negative", thr)
	}
	if thr == 0 {
		thr = DefaultThreshold
	}
	n := est.Clusters()
	seen := make(map[string]bool, len(waiting))
	for i, j := range waiting {
		if seen[j.ID] {
			return nil, 0, fmt.Errorf("waiting[%d]: duplicate job ID %q", i, j.ID)
		}
		seen[j.ID] = true
		if j.Cluster < 0 || j.Cluster >= n {
			return nil, 0, fmt.Errorf("waiting[%d] (job %q): cluster %d out of range [0, %d)", i, j.ID, j.Cluster, n)
		}
	}
	jobs := append([]Job(nil), waiting...)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	return jobs, thr, nil
}

type choice struct {
	cluster    int
	completion time.Duration
}

// bestOther returns the cluster of least estimate for j, skipping cluster
// skip (-1 skips none); ties go to the lowest index.
func bestOther(est Estimator, j Job, skip int) (choice, bool) {
	best := choice{cluster: -1}
	for c := range est.Clusters() {
		if c == skip {
			continue
		}
		if t, ok := est.Estimate(j, c); ok && (best.cluster < 0 || t < best.completion) {
			best = choice{c, t}
		}
	}
	return best, best.cluster >= 0
}

// drive hands the jobs (in submission order) to act in the heuristic's
// order: the Scored oldest by least score, re-scored after every act (ties
// and jobs without a score in submission order, scored jobs first), then
// the rest in submission order.
func drive(jobs []Job, h Heuristic, score func(Job) (time.Duration, bool, error), act func(Job) error) error {
	k := min(max(h.Scored(len(jobs)), 0), len(jobs))
	window := append([]Job(nil), jobs[:k]...)
	for len(window) > 0 {
		pick, found := 0, false
		var least time.Duration
		for i, j := range window {
			s, ok, err := score(j)
			if err != nil {
				return err
			}
			if ok && (!found || s < least) {
				pick, least, found = i, s, true
			}
		}
		if err := act(window[pick]); err != nil {
			return err
		}
		window = append(window[:pick], window[pick+1:]...)
	}
	for _, j := range jobs[k:] {
		if err := act(j); err != nil {
			return err
		}
	}
	return nil
}
