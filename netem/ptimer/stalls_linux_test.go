//go:build linux

package ptimer

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProbeStalls(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	span := 20 * time.Millisecond
	st, err := ProbeStalls(context.Background(), span)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != set.Count() {
		t.Fatalf("%d CPUs probed, affinity has %d", len(st), set.Count())
	}
	for i, s := range st {
		if !set.IsSet(s.CPU) || (i > 0 && s.CPU <= st[i-1].CPU) {
			t.Fatalf("CPU %d probed out of order or outside the affinity: %+v", s.CPU, st)
		}
		if s.Span < span {
			t.Errorf("cpu %d: spun %v, asked %v", s.CPU, s.Span, span)
		}
		if s.Away < time.Duration(s.Count)*StallThreshold || s.Away > s.Span || s.P99 > s.Longest {
			t.Errorf("cpu %d: inconsistent %+v", s.CPU, s)
		}
	}
}

func TestProbeStallsRejectsSpan(t *testing.T) {
	for _, span := range []time.Duration{0, -time.Millisecond, time.Second} {
		if _, err := ProbeStalls(context.Background(), span); err == nil {
			t.Errorf("span %v accepted", span)
		}
	}
}

func TestProbeStallsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ProbeStalls(ctx, time.Millisecond); err == nil {
		t.Fatal("a cancelled probe returned no error")
	}
}
