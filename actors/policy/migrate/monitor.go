package migrate

import (
	"fmt"
	"math"
	"time"
)

// SPEC §6's tolerance limits of the contract monitor.
const (
	DefaultUpper = 2.0
	DefaultLower = 0.7
)

// ActionKind is what the contract monitor asks of its job's runner.
type ActionKind uint8

const (
	// Continue: nothing to do.
	Continue ActionKind = iota
	// RequestMigration: ask the rescheduler to migrate the job. The runner
	// calls Declined if the rescheduler refuses, Reset after a migration.
	RequestMigration
	// LimitsLowered: the job runs persistently faster than predicted; the
	// monitor lowered its limits (informational).
	LimitsLowered
)

// Reasons of an Action.
const (
	ReasonWithinLimits    = "within limits"
	ReasonSpikeAbove      = "ratio above upper limit, average within"
	ReasonAverageAbove    = "average above upper limit"
	ReasonRequestPending  = "migration request pending"
	ReasonSpikeBelow      = "ratio below lower limit, average within"
	ReasonAverageBelow    = "average below lower limit"
	ReasonInvalidSample   = "invalid sample"
	ReasonLimitsRaised    = "rescheduler declined: limits raised"
	ReasonNothingDeclined = "no request pending"
)

// Action is the monitor's answer to one phase, with the figures.
type Action struct {
	Kind         ActionKind
	Ratio        float64 // measured / predicted of this phase
	Average      float64 // mean of every ratio observed so far, this one included
	Lower, Upper float64 // the limits after this observation
	Reason       string
}

// Monitor is the contract monitor of one running job (SPEC §6), a pure
// state machine fed by the job's runner after every phase.
//
// Rule: the ratio of a phase is its measured time over the performance
// model's prediction. Every ratio is kept in the average of all ratios so
// far.
//   - Above the upper limit (initially Upper, 2.0): if the average is
//     still above the upper limit, request a migration (migration on
//     request); otherwise it was a spike: continue.
//   - Below the lower limit (initially Lower, 0.7): if the average is
//     still below the lower limit, the model is pessimistic for this job,
//     so the monitor adjusts its limits to the observed pace: both become
//     average x their configured factor (Upper x average, Lower x
//     average), and a later slowdown is judged against how fast the job
//     really runs. Otherwise it was a spike: continue.
//   - When the rescheduler declines a request (Declined), the monitor
//     raises its limits.
//
// Choices where the SPEC is silent:
//   - Declined widens the band upwards only: the upper limit becomes the
//     average at the declined request x Upper (never less than before), the
//     lower limit stays. Why: the rescheduler has judged that running at
//     that average is better than moving, so that pace is the new normal;
//     asking again at about the same level would be refused again unless
//     only the remaining time changed. The monitor asks again once the job
//     is Upper times slower than the pace just accepted, so a job whose
//     ratio climbs to R asks at most about log_Upper(R) times.
//   - While a request is pending (between RequestMigration and Declined or
//     Reset) ratios are still averaged but no second request is made.
//   - A ratio exactly at a limit is within it.
//   - A sample with a predicted time <= 0 or a negative measured time is
//     ignored (ReasonInvalidSample) and not averaged.
//   - Zero Upper or Lower mean SPEC §6's 2.0 and 0.7.
//
// The zero value is ready to use with the SPEC's limits.
type Monitor struct {
	Upper float64 // configured upper tolerance factor (0 means DefaultUpper)
	Lower float64 // configured lower tolerance factor (0 means DefaultLower)

	started    bool
	hi, lo     float64
	sum        float64
	n          int
	pending    bool
	requestAvg float64
}

func (m *Monitor) start() {
	if m.started {
		return
	}
	if m.Upper == 0 {
		m.Upper = DefaultUpper
	}
	if m.Lower == 0 {
		m.Lower = DefaultLower
	}
	m.hi, m.lo, m.started = m.Upper, m.Lower, true
}

// Limits are the current lower and upper limits.
func (m *Monitor) Limits() (lower, upper float64) {
	m.start()
	return m.lo, m.hi
}

// Pending reports whether a migration request awaits the rescheduler.
func (m *Monitor) Pending() bool { return m.pending }

// Observe takes one phase's measured and predicted times.
func (m *Monitor) Observe(measured, predicted time.Duration) Action {
	m.start()
	if predicted <= 0 || measured < 0 {
		return m.action(Continue, math.NaN(), ReasonInvalidSample)
	}
	r := float64(measured) / float64(predicted)
	m.sum += r
	m.n++
	avg := m.sum / float64(m.n)
	switch {
	case m.pending:
		return m.action(Continue, r, ReasonRequestPending)
	case r > m.hi && avg > m.hi:
		m.pending, m.requestAvg = true, avg
		return m.action(RequestMigration, r, ReasonAverageAbove)
	case r > m.hi:
		return m.action(Continue, r, ReasonSpikeAbove)
	case r < m.lo && avg < m.lo:
		m.hi, m.lo = m.Upper*avg, m.Lower*avg
		return m.action(LimitsLowered, r, ReasonAverageBelow)
	case r < m.lo:
		return m.action(Continue, r, ReasonSpikeBelow)
	}
	return m.action(Continue, r, ReasonWithinLimits)
}

// Declined tells the monitor the rescheduler refused its pending request:
// the upper limit rises to the average at the request x Upper.
func (m *Monitor) Declined() Action {
	m.start()
	if !m.pending {
		return m.action(Continue, math.NaN(), ReasonNothingDeclined)
	}
	m.pending = false
	m.hi = max(m.hi, m.requestAvg*m.Upper)
	return m.action(Continue, math.NaN(), ReasonLimitsRaised)
}

// Reset starts a new contract (after a migration, with new predictions):
// no ratios, the configured limits, nothing pending.
func (m *Monitor) Reset() {
	*m = Monitor{Upper: m.Upper, Lower: m.Lower}
	m.start()
}

func (m *Monitor) action(k ActionKind, r float64, reason string) Action {
	a := Action{Kind: k, Ratio: r, Lower: m.lo, Upper: m.hi, Reason: reason}
	if m.n > 0 {
		a.Average = m.sum / float64(m.n)
	}
	return a
}

// Validate reports a malformed configuration: the limits must satisfy
// 0 < Lower < Upper once defaults are filled in.
func (m Monitor) Validate() error {
	up, lo := m.Upper, m.Lower
	if up == 0 {
		up = DefaultUpper
	}
	if lo == 0 {
		lo = DefaultLower
	}
	if math.IsNaN(lo) || lo <= 0 {
		return fmt.Errorf("migrate: monitor Lower must be > 0, got %v", m.Lower)
	}
	if math.IsNaN(up) || up <= lo || math.IsInf(up, 0) {
		return fmt.Errorf("migrate: monitor Upper must be a number above Lower (%v), got %v", lo, m.Upper)
	}
	return nil
}
