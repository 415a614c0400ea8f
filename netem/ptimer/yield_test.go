package ptimer

import (
	"testing"
	"time"
)

func TestYielderChoosesItsMoment(t *testing.T) {
	ms := int64(time.Millisecond)
	clock := 10 * ms
	now := func() int64 { return clock }
	y := &Yielder{Every: 4 * time.Millisecond, Slack: 500 * time.Microsecond}
	steps := []struct {
		advance, untilNext int64
		want               bool
		why                string
	}{
		{0, -1, true, "never yielded, no deadline"},
		{1 * ms, -1, false, "1 ms after a yield"},
		{3 * ms, 400 * us, false, "due, but the deadline is within the slack"},
		{0, 500 * us, true, "due, deadline exactly the slack away"},
		{3999 * us, 10 * ms, false, "just under Every"},
		{1 * us, 10 * ms, true, "Every reached"},
		{10 * ms, 0, false, "long overdue, deadline now"},
		{0, -1, true, "long overdue, idle"},
	}
	var n int64
	for _, s := range steps {
		clock += s.advance
		if got := y.Maybe(clock, s.untilNext, now); got != s.want {
			t.Fatalf("%s: Maybe = %v, want %v", s.why, got, s.want)
		}
		if s.want {
			n++
		}
	}
	if y.Count() != n {
		t.Fatalf("Count = %d, want %d", y.Count(), n)
	}
	if c := y.Cost(); c.Count != n {
		t.Fatalf("Cost has %d samples, want %d", c.Count, n)
	}
}
