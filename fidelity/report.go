package fidelity

import (
	"fmt"
	"math"
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
	// LinkP99 also bounds how early a frame may arrive (p99 over every
	// frame): a link faster than its latency and rate is no more the
	// grid's than a slower one.
}

// DefaultThresholds are the verdict's limits.
func DefaultThresholds() Thresholds {
	return Thresholds{ComputeP99: 0.05, LinkP99: 0.10, RateP99: 0.05}
}

// Figures are one job's (or the run's) fidelity figures.
type Figures struct {
	ComputeCalls int64   `json:"compute_calls"`
	Stretch      float64 `json:"stretch"`
	CompensatedS float64 `json:"compensated_s"`
	Compute      Summary `json:"compute_late"`
	Link         Summary `json:"link_late"`
	Backlog      Summary `json:"backlog_late"`
	// Early is the earliness of every frame (N counts the early ones; the
	// quantiles are over all frames, the others on time).
	Early   Summary  `json:"link_early"`
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
}

// JudgedTail is how many of the worst values a judged quantile leaves
// above it at least: a quantile with fewer above it is one stall's figure.
const JudgedTail = 10

// JudgedQuantile is the quantile a verdict judges n values on: the value
// with JudgedTail values above it, or the p99 once that is higher (from
// 1,050 values on); the median below 2 x JudgedTail values. The p99 of a
// job's 160 frames is its second-worst frame: with every frame 1 % likely
// to be late, as a run that passes allows, half of such jobs would be
// judged degraded for two stalls; eleven late frames out of 160 come by
// chance about once in a million jobs.
func JudgedQuantile(n uint64) float64 {
	if n < 2*JudgedTail {
		return 0.5
	}
	// Half a value below the rank, so that Quantile's ceiling lands on it.
	return math.Min(0.99, (float64(n-JudgedTail)-0.5)/float64(n))
}

// Judge returns the figures of s and their verdict under th: each
// lateness at its judged quantile (JudgedQuantile) against its limit.
func Judge(s *Stats, th Thresholds) Figures {
	f := Figures{
		ComputeCalls: s.ComputeCalls,
		Stretch:      s.Stretch(),
		CompensatedS: s.Compensated.Seconds(),
		Compute:      s.ComputeLate.Summary(),
		Link:         s.LinkLate().Summary(),
		Backlog:      s.BacklogLate().Summary(),
	}
	early := s.LinkEarly()
	frames := f.Link.N + f.Backlog.N
	f.Early = Summary{N: early.Count(), P50: early.QuantileAmong(0.5, frames), P99: early.QuantileAmong(0.99, frames), Max: early.Max()}
	if f.Compute.N == 0 && f.Link.N == 0 && f.Backlog.N == 0 {
		f.Verdict = Unmeasured
		return f
	}
	check := func(what string, h *Hist, n uint64, limit float64, how string) {
		if n == 0 {
			return
		}
		q := JudgedQuantile(n)
		if v := h.QuantileAmong(q, n); v > limit {
			at := "p99"
			if q < 0.99 {
				at = fmt.Sprintf("p%.3g (%d of %d above it)", 100*q, n-uint64(math.Ceil(q*float64(n))), n)
			}
			f.Reasons = append(f.Reasons, fmt.Sprintf("%s %s %.1f%% %s > %.0f%%", what, at, 100*v, how, 100*limit))
		}
	}
	check("compute", &s.ComputeLate, f.Compute.N, th.ComputeP99, "late")
	check("link delay", s.LinkLate(), f.Link.N, th.LinkP99, "late")
	check("backlogged link rate", s.BacklogLate(), f.Backlog.N, th.RateP99, "late")
	check("link delay", early, frames, th.LinkP99, "early")
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
	Early   Summary `json:"early"`
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
		n := l.Late.Count() + l.Backlog.Count()
		r.WorstLinks = append(r.WorstLinks, PairFigures{Pair: k, Frames: l.Frames, Late: l.Late.Summary(),
			Backlog: l.Backlog.Summary(), WorstMs: float64(l.WorstNs) / 1e6,
			Early: Summary{N: l.Early.Count(), P50: l.Early.QuantileAmong(0.5, n), P99: l.Early.QuantileAmong(0.99, n), Max: l.Early.Max()}})
	}
	sort.SliceStable(r.WorstLinks, func(i, j int) bool {
		a, b := r.WorstLinks[i], r.WorstLinks[j]
		return max(a.Late.P99, a.Backlog.P99, a.Early.P99) > max(b.Late.P99, b.Backlog.P99, b.Early.P99)
	})
	r.WorstLinks = r.WorstLinks[:min(5, len(r.WorstLinks))]
	return r
}

// worst is a job's largest p99 relative to its limit's scale.
func worst(f Figures) float64 {
	return max(f.Compute.P99, f.Link.P99, f.Backlog.P99, f.Early.P99)
}
