package migrate

import (
	"fmt"
	"time"
)

// Reasons of an opportunistic Choice.
const (
	ReasonBestGain     = "largest gain above threshold"
	ReasonNoJobGains   = "no job gains above threshold"
	ReasonNoCandidates = "no running job"
)

// Candidate is a running job seen from nodes a finished job has just
// freed: its predicted remaining time where it runs, its predicted
// remaining time on the freed nodes, and the cost of moving there.
type Candidate struct {
	Job   string
	Here  time.Duration
	There time.Duration
	Cost  time.Duration
}

// Choice is the outcome of opportunistic migration: the job to move (Index
// into the candidates, -1 for none) and every candidate's Decision.
type Choice struct {
	Index     int
	Job       string
	Decision  Decision // the chosen job's; zero when none
	Decisions []Decision
	Reason    string
}

// Opportunistic is the rescheduler's opportunistic rule (SPEC §6): when a
// job completes, would a running job gain by moving onto the freed nodes?
//
// Rule: every candidate gets Decide's decision at the threshold; the
// candidate with the largest gain among those that would migrate is
// chosen; none when no gain exceeds the threshold.
//
// Choices where the SPEC is silent:
//   - One job moves per freed node set (the caller asks again if nodes
//     remain free after it).
//   - Equal gains go to the candidate listed first.
//   - A malformed candidate is an error naming it; nothing is chosen.
func Opportunistic(cands []Candidate, threshold float64) (Choice, error) {
	if err := checkThreshold(threshold); err != nil {
		return Choice{}, err
	}
	c := Choice{Index: -1, Reason: ReasonNoCandidates}
	if len(cands) > 0 {
		c.Reason = ReasonNoJobGains
	}
	for k, cand := range cands {
		d, err := Decide(cand.Here, cand.There, cand.Cost, threshold)
		if err != nil {
			return Choice{}, fmt.Errorf("migrate: candidate %d (%q): %w", k, cand.Job, err)
		}
		c.Decisions = append(c.Decisions, d)
		if d.Migrate && (c.Index < 0 || d.Gain > c.Decision.Gain) {
			c.Index, c.Job, c.Decision, c.Reason = k, cand.Job, d, ReasonBestGain
		}
	}
	return c, nil
}
