package migrate

import (
	"fmt"
	"math"
	"time"
)

// DefaultThreshold is SPEC §6's: migrate when the gain exceeds 30 %.
const DefaultThreshold = 0.30

// Reasons of a Decision.
const (
	ReasonGainAboveThreshold = "gain above threshold"
	ReasonGainNotAbove       = "gain not above threshold"
	ReasonNothingRemaining   = "nothing remaining here"
)

// Decision is the rescheduler's answer for one job and one candidate
// node set, with the figures it was taken on.
type Decision struct {
	Migrate   bool
	Gain      float64 // (Here - (There + Cost)) / Here; 0 when Here is 0
	Here      time.Duration
	There     time.Duration
	Cost      time.Duration
	Threshold float64
	Reason    string
}

// Decide is the rescheduler's rule (SPEC §6).
//
// Rule: gain = (here - (there + cost)) / here, with here and there the
// predicted remaining execution times on the current and on the new nodes
// and cost the migration cost; migrate when gain > threshold.
//
// Choices where the SPEC is silent:
//   - "exceeds" is strict: a gain exactly at the threshold stays.
//   - Nothing remaining here (here = 0) never migrates; the gain is 0.
//   - The gain is computed from integer nanoseconds, so equal figures give
//     equal gains whatever their order of magnitude.
//
// Negative times, and a threshold that is not a finite number in [0, 1),
// are errors naming the input.
func Decide(here, there, cost time.Duration, threshold float64) (Decision, error) {
	if err := checkThreshold(threshold); err != nil {
		return Decision{}, err
	}
	switch {
	case here < 0:
		return Decision{}, fmt.Errorf("migrate: remaining time here must be >= 0, got %v", here)
	case there < 0:
		return Decision{}, fmt.Errorf("migrate: remaining time there must be >= 0, got %v", there)
	case cost < 0:
		return Decision{}, fmt.Errorf("migrate: cost must be >= 0, got %v", cost)
	}
	d := Decision{Here: here, There: there, Cost: cost, Threshold: threshold}
	if here == 0 {
		d.Reason = ReasonNothingRemaining
		return d, nil
	}
	d.Gain = float64(here-(there+cost)) / float64(here)
	d.Migrate = d.Gain > threshold
	d.Reason = ReasonGainNotAbove
	if d.Migrate {
		d.Reason = ReasonGainAboveThreshold
	}
	return d, nil
}

func checkThreshold(t float64) error {
	if math.IsNaN(t) || t < 0 || t >= 1 {
		return fmt.Errorf("migrate: threshold must be in [0, 1), got %v", t)
	}
	return nil
}
