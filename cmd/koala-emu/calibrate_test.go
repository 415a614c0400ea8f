package main

import (
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

func TestWorstStalls(t *testing.T) {
	us := time.Microsecond
	st := []ptimer.Stalls{{CPU: 0, P99: 20 * us}, {CPU: 1, P99: 41 * us}, {CPU: 2, P99: 12 * us}}
	if got := worstStalls(st); got != 41*us {
		t.Fatalf("worstStalls = %v, want 41µs", got)
	}
	if got := worstStalls(nil); got != 0 {
		t.Fatalf("worstStalls of no probe = %v, want 0", got)
	}
}

func TestDescribeStalls(t *testing.T) {
	st := []ptimer.Stalls{
		{CPU: 0, Span: 500 * time.Millisecond, Over: ptimer.StallThreshold, Count: 50, Away: 5 * time.Millisecond, Longest: 300 * time.Microsecond, P99: 27 * time.Microsecond},
		{CPU: 3, Span: 500 * time.Millisecond, Over: ptimer.StallThreshold, Count: 10, Away: time.Millisecond, Longest: 90 * time.Microsecond, P99: 0},
	}
	got := describeStalls(st)
	for _, want := range []string{"cpu0 away >=50µs 100/s (1.00% of 500ms, longest 300µs)", "never sleeps 27µs", "; cpu3 away >=50µs 20/s (0.20% of 500ms, longest 90µs)", "never sleeps 0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("describeStalls = %q, missing %q", got, want)
		}
	}
}

// The probe counts gaps at the calibration's own gate.
func TestStallThresholdIsTheGate(t *testing.T) {
	if ptimer.StallThreshold != netem.MaxReleaseLateness {
		t.Fatalf("ptimer.StallThreshold %v, netem.MaxReleaseLateness %v", ptimer.StallThreshold, netem.MaxReleaseLateness)
	}
}
