package ptimer

import (
	"testing"
	"time"
)

func TestIdealLateness(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		gaps []time.Duration
		span time.Duration
		q    float64
		want time.Duration
	}{
		{"no gaps", nil, time.Second, 0.99, 0},
		{"no span", []time.Duration{ms}, 0, 0.99, 0},
		// P(L > x) = (20ms - x) / 1s = 1% at x = 10 ms.
		{"one gap", []time.Duration{20 * ms}, time.Second, 0.99, 10 * ms},
		// Two gaps of 8 ms: 2(8ms - x) = 10 ms at x = 3 ms.
		{"two equal gaps", []time.Duration{8 * ms, 8 * ms}, time.Second, 0.99, 3 * ms},
		// 12 ms alone above 6 ms leaves 6 ms of tail mass, short of 10 ms;
		// both above x: 12 + 6 - 2x = 10 at x = 4 ms.
		{"unequal gaps", []time.Duration{6 * ms, 12 * ms}, time.Second, 0.99, 4 * ms},
		// 30 ms - x = 10 ms at x = 20 ms, above the 5 ms gap: it does not count.
		{"short gap below the quantile", []time.Duration{5 * ms, 30 * ms}, time.Second, 0.99, 20 * ms},
		// Less than 1% of the span away in all: the p99 release is on time.
		{"tail under one percent", []time.Duration{3 * ms, 4 * ms}, time.Second, 0.99, 0},
		// Exactly one percent: on time.
		{"tail exactly one percent", []time.Duration{10 * ms}, time.Second, 0.99, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := IdealLateness(c.gaps, c.span, c.q)
			if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("IdealLateness(%v, %v, %v) = %v, want %v", c.gaps, c.span, c.q, got, c.want)
			}
		})
	}
}

func TestIdealLatenessKeepsInput(t *testing.T) {
	gaps := []time.Duration{3, 1, 2}
	IdealLateness(gaps, 10, 0.5)
	if gaps[0] != 3 || gaps[1] != 1 || gaps[2] != 2 {
		t.Fatalf("IdealLateness reordered its input: %v", gaps)
	}
}

func TestSummarizeStalls(t *testing.T) {
	us := time.Microsecond
	s := summarize(1, time.Second, []time.Duration{3 * us, 49 * us, 50 * us, 400 * us, 20 * time.Millisecond})
	if s.CPU != 1 || s.Span != time.Second || s.Over != StallThreshold {
		t.Fatalf("identity fields: %+v", s)
	}
	if s.Count != 3 || s.Away != 50*us+400*us+20*time.Millisecond || s.Longest != 20*time.Millisecond {
		t.Fatalf("count/away/longest: %+v", s)
	}
	if s.PerSecond() != 3 {
		t.Fatalf("PerSecond = %v, want 3", s.PerSecond())
	}
	// The 20 ms gap alone: 20ms - x = 10 ms.
	if d := s.P99 - 10*time.Millisecond; d < -us || d > us {
		t.Fatalf("P99 = %v, want 10ms", s.P99)
	}
	if (Stalls{}).PerSecond() != 0 {
		t.Fatal("PerSecond of an empty probe is not 0")
	}
}
