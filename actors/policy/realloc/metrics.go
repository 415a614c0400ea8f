package realloc

import (
	"fmt"
	"time"
)

// Record is one job of a run: its submission and completion instants.
type Record struct {
	ID                 string
	Submit, Completion time.Duration
}

// Metrics compares a run with reallocation to the same run without it (the
// reference), as SPEC §5 measures it.
type Metrics struct {
	// Jobs is the number of jobs compared.
	Jobs int
	// Impacted is the number of jobs whose completion changed by more than
	// the tolerance; ImpactedShare = Impacted / Jobs.
	Impacted      int
	ImpactedShare float64
	// Reallocations is the number of moves that changed a job's cluster
	// (Move.Reallocated) over the run; ReallocationsPerJob = Reallocations /
	// Jobs, which exceeds 1 when jobs move more than once on average.
	Reallocations       int
	ReallocationsPerJob float64
	// Earlier is the number of impacted jobs that complete earlier than in
	// the reference; EarlierShare = Earlier / Impacted (0 with no impacted
	// job).
	Earlier      int
	EarlierShare float64
	// RelativeResponse is the average response time (completion - submit)
	// of the impacted jobs in the run divided by their average response
	// time in the reference: below 1 the impacted jobs gained on average.
	// It is 1 when no job is impacted (nothing changed) and when the
	// impacted jobs' reference responses sum to 0 (a ratio without meaning).
	RelativeResponse float64
}

// Compare computes the Metrics of run against reference, two lists of the
// same jobs (in any order). reallocations is the number of moves that
// changed a job's cluster during the run (count Move.Reallocated over every
// reallocation); tolerance is the least change of completion that counts a
// job as impacted (0 on the simulation backend, where runs are exact; more
// on an emulated backend, whose timings jitter): a job is impacted when
// |completion - reference completion| > tolerance.
//
// Choices where SPEC §5 is silent: the relative response time is the ratio
// of the two averages (equivalently of the two sums) over the impacted
// jobs, not the average of per-job ratios, so short jobs do not dominate
// it; the denominator of the per-job figures is every job compared (pass
// only the middleware's jobs to leave local jobs out).
//
// It fails, naming the job, when a job is in one list only, appears twice,
// or has different submission instants in the two runs (they are not runs of
// the same workload), and when reallocations or tolerance is negative.
func Compare(reference, run []Record, reallocations int, tolerance time.Duration) (Metrics, error) {
	if reallocations < 0 {
		return Metrics{}, fmt.Errorf("reallocations %d is negative", reallocations)
	}
	if tolerance < 0 {
		return Metrics{}, fmt.Errorf("tolerance %v is negative", tolerance)
	}
	ref := make(map[string]Record, len(reference))
	for i, r := range reference {
		if _, dup := ref[r.ID]; dup {
			return Metrics{}, fmt.Errorf("reference[%d]: duplicate job ID %q", i, r.ID)
		}
		ref[r.ID] = r
	}
	m := Metrics{Jobs: len(run), Reallocations: reallocations}
	seen := make(map[string]bool, len(run))
	var sumRun, sumRef time.Duration
	for i, r := range run {
		if seen[r.ID] {
			return Metrics{}, fmt.Errorf("run[%d]: duplicate job ID %q", i, r.ID)
		}
		seen[r.ID] = true
		b, ok := ref[r.ID]
		if !ok {
			return Metrics{}, fmt.Errorf("run[%d]: job %q is not in the reference", i, r.ID)
		}
		if b.Submit != r.Submit {
			return Metrics{}, fmt.Errorf("run[%d] (job %q): submit %v differs from the reference's %v", i, r.ID, r.Submit, b.Submit)
		}
		d := r.Completion - b.Completion
		if d > tolerance || -d > tolerance {
			m.Impacted++
			if d < 0 {
				m.Earlier++
			}
			sumRun += r.Completion - r.Submit
			sumRef += b.Completion - b.Submit
		}
	}
	if len(run) != len(ref) {
		for _, r := range reference {
			if !seen[r.ID] {
				return Metrics{}, fmt.Errorf("reference: job %q is not in the run", r.ID)
			}
		}
	}
	if m.Jobs > 0 {
		m.ImpactedShare = float64(m.Impacted) / float64(m.Jobs)
		m.ReallocationsPerJob = float64(reallocations) / float64(m.Jobs)
	}
	m.RelativeResponse = 1
	if m.Impacted > 0 {
		m.EarlierShare = float64(m.Earlier) / float64(m.Impacted)
		if sumRef > 0 {
			m.RelativeResponse = float64(sumRun) / float64(sumRef)
		}
	}
	return m, nil
}
