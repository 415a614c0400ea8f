package fidelity

import (
	"fmt"
	"sort"
)

// Verdicts.
const (
	Faithful   = "faithful"
	Degraded   = "degraded"
	Unmeasured = "unmeasured" // nothing was computed or sent
)

// Thresholds decide the verdict: the p99 of each relative lateness.
type Thresholds struct {
	// ComputeP99: a Compute may end at most this share of its asked wait
	// late (p99). Default 5 %.
	ComputeP99 float64 `json:"compute_p99"`
	// LinkP99: a frame on an idle link may arrive at most this share of its
	// target delay late (p99). Default 10 %.
	LinkP99 float64 `json:"link_p99"`
	// RateP99: a frame that queued behind others may arrive at most this
	// share of its target late (p99): the delivered rate. Default 5 %.
	RateP99 float64 `json:"rate_p99"`
}

// DefaultThresholds are the verdict's limits.
func DefaultThresholds() Thresholds {
	return Thresholds{ComputeP99: 0.05, LinkP99: 0.10, RateP99: 0.05}
}

// Figures are one job's (or the run's) fidelity figures.
type Figures struct {
	ComputeCalls int64    `json:"compute_calls"`
	Stretch      float64  `json:"stretch"`
	CompensatedS float64  `json:"compensated_s"`
	Compute      Summary  `json:"compute_late"`
	Link         Summary  `json:"link_late"`
	Backlog      Summary  `json:"backlog_late"`
	Verdict      string   `json:"verdict"`
	Reasons      []string `json:"reasons,omitempty"`
}

// Judge returns the figures of s and their verdict under th.
func Judge(s *Stats, th Thresholds) Figures {
	f := Figures{
		ComputeCalls: s.ComputeCalls,
		Stretch:      s.Stretch(),
		CompensatedS: s.Compensated.Seconds(),
		Compute:      s.ComputeLate.Summary(),
		Link:         s.LinkLate().Summary(),
		Backlog:      s.BacklogLate().Summary(),
	}
	if f.Compute.N == 0 && f.Link.N == 0 && f.Backlog.N == 0 {
		f.Verdict = Unmeasured
		return f
	}
	check := func(what string, got Summary, limit float64) {
		if got.N > 0 && got.P99 > limit {
			f.Reasons = append(f.Reasons, fmt.Sprintf("%s p99 %.1f%% late > %.0f%%", what, 100*got.P99, 100*limit))
		}
	}
	check("compute", f.Compute, th.ComputeP99)
	check("link delay", f.Link, th.LinkP99)
	check("backlogged link rate", f.Backlog, th.RateP99)
	f.Verdict = Faithful
	if len(f.Reasons) > 0 {
		f.Verdict = Degraded
	}
	return f
}

// PairFigures are one cluster pair's link figures in a run.
type PairFigures struct {
	Pair    string  `json:"pair"`
	Frames  int64   `json:"frames"`
	Late    Summary `json:"late"`
	Backlog Summary `json:"backlog"`
	WorstMs float64 `json:"worst_ms"`
}

// JobFigures names a job's figures.
type JobFigures struct {
	Job string `json:"job"`
	Figures
}

// Report is the fidelity section of a run's results.
type Report struct {
	Verdict    string        `json:"verdict"`
	Reasons    []string      `json:"reasons,omitempty"`
	Thresholds Thresholds    `json:"thresholds"`
	Run        Figures       `json:"run"`
	Jobs       int           `json:"jobs_measured"`
	Degraded   int           `json:"jobs_degraded"`
	WorstJobs  []JobFigures  `json:"worst_jobs,omitempty"`
	WorstLinks []PairFigures `json:"worst_links,omitempty"`
	Host       *Host         `json:"host,omitempty"`
	Dilation   *Choice       `json:"dilation,omitempty"`
}

// NewReport judges a run from its jobs' stats (by job id) and the host's
// figures. The run is faithful when the merged figures are; a job that is
// degraded alone is named among the worst jobs and counted.
func NewReport(jobs map[string]*Stats, host *Host, th Thresholds) Report {
	var all Stats
	r := Report{Thresholds: th, Host: host}
	var judged []JobFigures
	for _, id := range sortedKeys(jobs) {
		s := jobs[id]
		all.Merge(s)
		f := Judge(s, th)
		if f.Verdict == Unmeasured {
			continue
		}
		r.Jobs++
		if f.Verdict == Degraded {
			r.Degraded++
		}
		judged = append(judged, JobFigures{Job: id, Figures: f})
	}
	r.Run = Judge(&all, th)
	r.Verdict, r.Reasons = r.Run.Verdict, r.Run.Reasons
	if r.Degraded > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d of %d jobs degraded on their own", r.Degraded, r.Jobs))
		if r.Verdict == Faithful && r.Degraded*20 > r.Jobs {
			// More than 5 % of the jobs: the run's figures hide them.
			r.Verdict = Degraded
		}
	}
	sort.SliceStable(judged, func(i, j int) bool { return worst(judged[i].Figures) > worst(judged[j].Figures) })
	r.WorstJobs = judged[:min(5, len(judged))]
	for _, k := range sortedKeys(all.Links) {
		l := all.Links[k]
		r.WorstLinks = append(r.WorstLinks, PairFigures{Pair: k, Frames: l.Frames, Late: l.Late.Summary(),
			Backlog: l.Backlog.Summary(), WorstMs: float64(l.WorstNs) / 1e6})
	}
	sort.SliceStable(r.WorstLinks, func(i, j int) bool {
		return max(r.WorstLinks[i].Late.P99, r.WorstLinks[i].Backlog.P99) > max(r.WorstLinks[j].Late.P99, r.WorstLinks[j].Backlog.P99)
	})
	r.WorstLinks = r.WorstLinks[:min(5, len(r.WorstLinks))]
	return r
}

// worst is a job's largest p99 relative to its limit's scale.
func worst(f Figures) float64 {
	return max(f.Compute.P99, f.Link.P99, f.Backlog.P99)
}
