package ptimer

import (
	"slices"
	"time"
)

// A thread that never sleeps can still be late: on a virtual machine the
// hypervisor takes a virtual CPU away from the guest, and nothing in the
// guest sees it happen (no interrupt, no context switch; the thread's own
// CPU clock keeps running). Measured on this project's CI machine (2 vCPUs,
// nested virtualisation, idle), a thread spinning on one CPU lost it for
// 50 µs or more 65-125 times a second, for 0.3-0.9 % of the time in all, and
// about four in five of those gaps carried no guest event in a kernel trace.
// A delay line releasing at an instant that falls in such a gap is late by
// what remains of it, however well it slept. ProbeStalls measures that floor
// so that a calibration can show it beside the release lateness it reports.

// Stalls is what a spinning probe saw of one CPU.
type Stalls struct {
	CPU int `json:"cpu"`
	// Span is how long the probe spun.
	Span time.Duration `json:"span_ns"`
	// Over is the gap length counted in Count and Away (StallThreshold).
	Over time.Duration `json:"over_ns"`
	// Count is the number of gaps of at least Over between two consecutive
	// clock readings; Away their total length; Longest the longest gap.
	Count   int           `json:"count"`
	Away    time.Duration `json:"away_ns"`
	Longest time.Duration `json:"longest_ns"`
	// P99 is the 99th percentile lateness of a release due at a random
	// instant on this CPU by a releaser that never sleeps: the lateness the
	// machine alone imposes (see IdealLateness).
	P99 time.Duration `json:"p99_ns"`
}

// PerSecond is Count per second of Span.
func (s Stalls) PerSecond() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Count) / s.Span.Seconds()
}

// StallThreshold is the gap length Stalls counts: the calibration's gate
// on p99 release lateness.
const StallThreshold = 50 * time.Microsecond

// minGap is the shortest gap between two clock readings the probe records;
// shorter ones (the clock reading itself, cache misses) cannot move a
// percentile of tens of microseconds.
const minGap = 2 * time.Microsecond

// IdealLateness returns the q-quantile (0 < q < 1) of the lateness of a
// release due at an instant drawn uniformly from a span of length span in
// which the releasing CPU was away during gaps: an instant inside a gap is
// late by the rest of that gap, any other instant is on time. So
// P(lateness > x) = sum over gaps of max(0, g - x) / span, and the result
// is the x at which that falls to 1 - q.
func IdealLateness(gaps []time.Duration, span time.Duration, q float64) time.Duration {
	if span <= 0 || len(gaps) == 0 {
		return 0
	}
	target := (1 - q) * float64(span)
	g := slices.Clone(gaps)
	slices.Sort(g)
	slices.Reverse(g)
	// With the k longest gaps above x, the tail mass is sum(g[:k]) - k*x.
	sum := 0.0
	for k := 1; k <= len(g); k++ {
		sum += float64(g[k-1])
		next := 0.0
		if k < len(g) {
			next = float64(g[k])
		}
		// sum - k*next >= target puts the answer at or above next.
		if sum-float64(k)*next >= target {
			return time.Duration((sum - target) / float64(k))
		}
	}
	return 0
}

// summarize turns the gaps a probe recorded over span into Stalls.
func summarize(cpu int, span time.Duration, gaps []time.Duration) Stalls {
	s := Stalls{CPU: cpu, Span: span, Over: StallThreshold}
	for _, g := range gaps {
		if g >= StallThreshold {
			s.Count++
			s.Away += g
		}
		s.Longest = max(s.Longest, g)
	}
	s.P99 = IdealLateness(gaps, span, 0.99)
	return s
}

// maxGaps bounds what one probe records (a gap every 10 µs for a second);
// a machine that stalls more often than that is reported as it was up to
// there.
const maxGaps = 1 << 17
