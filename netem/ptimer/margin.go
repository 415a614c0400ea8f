package ptimer

import (
	"slices"
	"sync/atomic"
	"time"
)

// MarginRule is how an adaptive spin margin follows the recent wake-up
// overshoots of a timed sleep: the margin is
// max(p90 + 2 µs, p99.5 + Offset), clamped to [Min, Max].
type MarginRule struct {
	Min, Max time.Duration
	// Offset is added to the p99.5 overshoot: positive spins beyond the
	// tail (a guard), negative accepts that much release lateness at the
	// p99.5 to spin less.
	Offset time.Duration
	// Initial is the margin before a class has enough wake-ups of its own
	// (it then also takes the margin of any shorter class that has).
	Initial time.Duration
	// Every is how many wake-ups of a class pass between re-estimates
	// (default 32).
	Every int
	// Early, from the 8th wake-up of a class until it has a quarter of its
	// window, sets the class's margin to the largest overshoot seen plus
	// Offset (never lower than it was), so that a class's first sleeps do
	// not run on a margin learnt from shorter ones. The in-process shaper's
	// line uses it: with it the in-process calibration's p99 lateness was
	// 43 µs or less in three runs out of three (the 4 ms pairs had failed at
	// 55-78 µs in two of three without). The kernel delay lines do not: the
	// Delft calibration showed no difference beyond the run-to-run spread.
	Early bool
}

// MarginClasses are the upper bounds of the sleep lengths that share one
// estimate; longer sleeps form the last class. Measured here (a 2-core
// virtual machine, SCHED_FIFO, 1 ns timer slack), the wake-up overshoot
// grows with the length of the sleep, because an idle virtual CPU halts
// and its wake-up goes through the hypervisor: p50/p99 21/43 µs after
// 100 µs sleeps, 24/68 µs after 500 µs, 45/76 µs after 1.5 ms and
// 48/86 µs after 3.4 ms. One margin over all of them either spins the
// short sleeps too long or leaves the long ones late (a slow link's
// releases, a few hundred per calibration pair, had p99 lateness 60-180 µs
// while its margin followed the many short sleeps of the fast links).
// The classes double in length from 125 µs to 4 ms.
var MarginClasses = [...]time.Duration{
	125 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond,
}

const (
	nMarginClasses = len(MarginClasses) + 1
	marginWindow   = 256
	earlyAfter     = 8
)

// Margin is an adaptive spin margin per class of sleep length (see
// MarginClasses). It belongs to one thread: For and Observe must not be
// called concurrently; Last may be read from anywhere.
type Margin struct {
	rule    MarginRule
	classes [nMarginClasses]marginClass
	last    atomic.Int64
}

type marginClass struct {
	ring    [marginWindow]int64
	n       int
	adapted bool
	margin  int64
}

// NewMargin starts every class at rule.Initial.
func NewMargin(rule MarginRule) *Margin {
	if rule.Every <= 0 {
		rule.Every = 32
	}
	if rule.Max < rule.Min {
		rule.Max = rule.Min
	}
	m := &Margin{rule: rule}
	init := int64(min(max(rule.Initial, rule.Min), rule.Max))
	for i := range m.classes {
		m.classes[i].margin = init
	}
	m.last.Store(init)
	return m
}

func classOf(sleep int64) int {
	for i, b := range MarginClasses {
		if sleep < int64(b) {
			return i
		}
	}
	return len(MarginClasses)
}

// For returns the margin for a sleep of this length (deadline minus now,
// in ns): a class that has not adapted yet borrows the largest margin of
// the shorter classes that have, since overshoots grow with the length.
func (m *Margin) For(sleep int64) int64 {
	c := classOf(sleep)
	out := m.classes[c].margin
	if !m.classes[c].adapted {
		for i := range c {
			if m.classes[i].adapted {
				out = max(out, m.classes[i].margin)
			}
		}
	}
	m.last.Store(out)
	return out
}

// Observe records the overshoot of a timed sleep that was asked to last
// sleep ns (the length For was given) and re-estimates that class's margin
// every rule.Every wake-ups once it has a quarter of its window (before
// that, with rule.Early, from the earlyAfter-th wake-up on).
func (m *Margin) Observe(sleep, over int64) {
	c := &m.classes[classOf(sleep)]
	c.ring[c.n%marginWindow] = max(over, 0)
	c.n++
	if c.n < marginWindow/4 {
		if m.rule.Early && c.n >= earlyAfter {
			v := max(slices.Max(c.ring[:c.n])+int64(m.rule.Offset), c.margin)
			c.margin = min(max(v, int64(m.rule.Min)), int64(m.rule.Max))
			c.adapted = true
		}
		return
	}
	if c.n%m.rule.Every != 0 {
		return
	}
	n := min(c.n, marginWindow)
	var buf [marginWindow]int64
	w := buf[:n]
	copy(w, c.ring[:n])
	slices.Sort(w)
	q90 := w[n*90/100]
	q995 := w[min(n-1, n*995/1000)]
	v := max(q90+int64(2*time.Microsecond), q995+int64(m.rule.Offset))
	c.margin = min(max(v, int64(m.rule.Min)), int64(m.rule.Max))
	c.adapted = true
}

// Last is the margin For returned last.
func (m *Margin) Last() time.Duration { return time.Duration(m.last.Load()) }
