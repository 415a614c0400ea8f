package realloc

import (
	"fmt"
	"math"
	"time"
)

// JobType is a moldable job type of SPEC §5.
type JobType struct {
	// Name is "t1" to "t4".
	Name string
	// P is the parallel fraction of Amdahl's law.
	P float64
	// Limit is the processor count beyond which the speedup stops growing.
	Limit int
	// Share is the fraction of moldable jobs of this type.
	Share float64
}

// Speedup is Amdahl's speedup on n processors, 1 / ((1-P) + P/n), with n
// capped at Limit: more processors than Limit bring nothing more.
func (t JobType) Speedup(n int) float64 { return Amdahl(t.P, min(n, t.Limit)) }

// Amdahl returns 1 / ((1-p) + p/n).
func Amdahl(p float64, n int) float64 { return 1 / ((1 - p) + p/float64(n)) }

// Types returns the job types of SPEC §5, in order: t1 (P 0.8, limit 32,
// 50 %), t2 (0.9, 96, 30 %), t3 (0.99, 256, 15 %), t4 (0.999, 650, 5 %).
func Types() []JobType {
	return []JobType{
		{Name: "t1", P: 0.8, Limit: 32, Share: 0.50},
		{Name: "t2", P: 0.9, Limit: 96, Share: 0.30},
		{Name: "t3", P: 0.99, Limit: 256, Share: 0.15},
		{Name: "t4", P: 0.999, Limit: 650, Share: 0.05},
	}
}

// mix is the SplitMix64 finaliser: a bijection of uint64 whose outputs look
// uniform even for consecutive inputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// JobSeed derives the seed of one job from the run's seed and the job's
// number (its SWF job number, say), so that a job's draws do not depend on
// which other jobs are replayed.
func JobSeed(runSeed, job uint64) uint64 { return mix(mix(runSeed) ^ job) }

// DrawType draws a job's type from its seed, with the shares of Types: the
// seed is mixed into a uniform u in [0, 1) and the first type whose
// cumulative share exceeds u is taken (t1 for u < 0.5, t2 below 0.8, t3
// below 0.95, t4 otherwise). The same seed always gives the same type.
func DrawType(seed uint64) JobType {
	u := float64(mix(seed)>>11) / (1 << 53)
	ts := Types()
	acc := 0.0
	for _, t := range ts {
		acc += t.Share
		if u < acc {
			return t
		}
	}
	return ts[len(ts)-1]
}

// TraceJob is a job as a trace gives it.
type TraceJob struct {
	// Procs is the trace's processor count, at least 1; 1 marks a
	// sequential job, which stays sequential.
	Procs int
	// Walltime is the trace's requested time, more than 0.
	Walltime time.Duration
	// Runtime is the trace's actual run time, more than 0 (it may exceed
	// Walltime; the cluster kills the job at its walltime).
	Runtime time.Duration
}

// Shape returns the walltime and runtime of job on n processors of a cluster
// of the given speed, for type t:
//
//	w1 = w_trace * speedup(n_trace)    (the walltime on one processor)
//	w  = w1 / speedup(n) / speed
//	r  = w * r_trace / w_trace         (the trace's runtime/walltime ratio)
//
// speedup is JobType.Speedup (capped at the type's limit, for n_trace too);
// speed 1.2 is a cluster 20 % faster than the reference, so every length
// divides by it. A sequential trace job (Procs 1) keeps n = 1 and w =
// w_trace / speed whatever its type. Walltimes round up to whole seconds (a
// job never gets less time than the model gives), runtimes to the nearest
// second and at least 1 s, as in the Standard Workload Format.
func Shape(job TraceJob, t JobType, speed float64, n int) (walltime, runtime time.Duration, err error) {
	if err := checkTrace(job); err != nil {
		return 0, 0, err
	}
	if !(speed > 0) || math.IsInf(speed, 0) {
		return 0, 0, fmt.Errorf("speed %v is not a positive number", speed)
	}
	if n < 1 {
		return 0, 0, fmt.Errorf("procs %d is less than 1", n)
	}
	w := job.Walltime.Seconds() / speed
	if job.Procs > 1 {
		w = job.Walltime.Seconds() * t.Speedup(job.Procs) / t.Speedup(n) / speed
	} else if n != 1 {
		return 0, 0, fmt.Errorf("procs %d for a sequential job", n)
	}
	r := w * job.Runtime.Seconds() / job.Walltime.Seconds()
	walltime = time.Duration(math.Ceil(w-1e-9)) * time.Second
	runtime = time.Duration(max(1, math.Round(r))) * time.Second
	return max(walltime, time.Second), runtime, nil
}

func checkTrace(job TraceJob) error {
	if job.Procs < 1 {
		return fmt.Errorf("trace procs %d is less than 1", job.Procs)
	}
	if job.Walltime <= 0 {
		return fmt.Errorf("trace walltime %v is not positive", job.Walltime)
	}
	if job.Runtime <= 0 {
		return fmt.Errorf("trace runtime %v is not positive", job.Runtime)
	}
	return nil
}

// CompletionFunc estimates the completion time of a job of procs processors
// and the given walltime if it were submitted now to one cluster (a server
// calls its batch planner, e.g. batch.Plan.Completion).
type CompletionFunc func(procs int, walltime time.Duration) (time.Duration, error)

// Sized is the shape a server gives a moldable job on its cluster.
type Sized struct {
	Procs             int
	Walltime, Runtime time.Duration
	Completion        time.Duration // the estimate at Procs
	Estimates         int           // how many estimates the search asked for
}

// Size chooses the processor count of job on a cluster of capacity
// processors and the given speed, for type t, by binary search for the
// earliest estimated completion time over n in [1, min(t.Limit, capacity)]
// (SPEC §5: about log2 n estimates instead of n); sequential jobs stay on
// one processor. The walltime and runtime at the chosen n come from Shape.
//
// The search keeps [lo, hi] holding the answer and compares the completion
// at the middle m with the one at m+1: if m+1 is strictly earlier the answer
// is above m, otherwise at or below m. It asks for at most 2*ceil(log2 N)
// estimates (each n is estimated once). On a unimodal curve (strictly
// decreasing to its minimum, then never decreasing) it returns the smallest
// n of least completion, as a linear scan would.
//
// Choices where SPEC §5 is silent: the completion-time curve is not always
// unimodal (a shorter walltime may fit a hole in the schedule that a longer
// one misses, so the waiting time is not monotone in n, and plateaus
// occur). The search does not fall back to a linear scan: it returns a
// local minimum (the completion at the result is no later than at its
// neighbours n-1 and n+1, when they are in range), which may be later than
// the global minimum; ties go to fewer processors. The type's limit caps n:
// beyond it the speedup, hence the walltime, no longer changes, so a larger
// n can only wait longer.
func Size(job TraceJob, t JobType, capacity int, speed float64, est CompletionFunc) (Sized, error) {
	if capacity < 1 {
		return Sized{}, fmt.Errorf("capacity %d is less than 1", capacity)
	}
	if est == nil {
		return Sized{}, fmt.Errorf("estimator is nil")
	}
	if job.Procs > 1 && (t.Limit < 1 || !(t.P >= 0 && t.P <= 1)) {
		return Sized{}, fmt.Errorf("job type %q: P %v or limit %d out of range", t.Name, t.P, t.Limit)
	}
	n := 1
	if job.Procs > 1 {
		n = min(t.Limit, capacity)
	}
	type point struct {
		w, r, c time.Duration
	}
	memo := map[int]point{}
	var out Sized
	at := func(k int) (point, error) {
		if p, ok := memo[k]; ok {
			return p, nil
		}
		w, r, err := Shape(job, t, speed, k)
		if err != nil {
			return point{}, err
		}
		c, err := est(k, w)
		if err != nil {
			return point{}, fmt.Errorf("estimate on %d processors: %w", k, err)
		}
		out.Estimates++
		memo[k] = point{w, r, c}
		return memo[k], nil
	}
	lo, hi := 1, n
	for lo < hi {
		m := (lo + hi) / 2
		a, err := at(m)
		if err != nil {
			return Sized{}, err
		}
		b, err := at(m + 1)
		if err != nil {
			return Sized{}, err
		}
		if b.c < a.c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	p, err := at(lo)
	if err != nil {
		return Sized{}, err
	}
	out.Procs, out.Walltime, out.Runtime, out.Completion = lo, p.w, p.r, p.c
	return out, nil
}
