package apps

import (
	"math"
	"testing"
	"time"
)

// A resize applied late is credited (k-1)/k of its lateness times the
// share of an iteration the new size saves: nothing at time scale 1 or
// without lateness, a debt when the new size is slower.
func TestLateCredit(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		late          time.Duration
		k             float64
		before, after time.Duration
		want          time.Duration
	}{
		{s, 1, 2 * s, s, 0},
		{0, 240, 2 * s, s, 0},
		{s, 240, 0, s, 0},
		{s, 2, 2 * s, s, s / 4},             // half of the wait, half of it saved
		{s, 4, 4 * s, s, 3 * s / 4 * 3 / 4}, // 3/4 of the wait, 3/4 saved
		{s, 2, s, 2 * s, -s / 2},            // a shrink to a slower size
		{2 * s, 240, 2 * s, 2 * s, 0},       // no change of pace
	} {
		if got := lateCredit(c.late, c.k, c.before, c.after); got != c.want {
			t.Errorf("lateCredit(%v, %g, %v, %v) = %v, want %v", c.late, c.k, c.before, c.after, got, c.want)
		}
	}
}

// A credit (or debt) is settled evenly over the iterations left and never
// beyond its amount.
func TestOweTake(t *testing.T) {
	for _, c := range []struct {
		credit time.Duration
		left   int
	}{{10 * time.Millisecond, 3}, {-10 * time.Millisecond, 3}, {7, 10}, {5 * time.Millisecond, 0}} {
		s := &mstate{total: c.left}
		s.owe(c.credit)
		var sum time.Duration
		for range max(c.left, 1) + 2 {
			x := s.credit.take(math.MaxInt64)
			if (c.credit > 0 && x < 0) || (c.credit < 0 && x > 0) {
				t.Fatalf("credit %v: took %v", c.credit, x)
			}
			sum += x
		}
		if sum != c.credit || s.credit.left != 0 {
			t.Errorf("credit %v over %d iterations: settled %v, %v left", c.credit, c.left, sum, s.credit.left)
		}
	}
}

// An iteration at time scale k is split into round(k) steps, at most
// SafePointsPerIteration, and at least one.
func TestStepsPer(t *testing.T) {
	for k, want := range map[float64]int{0: 1, 0.5: 1, 1: 1, 2.4: 2, 2.6: 3, 8: 8, 60: SafePointsPerIteration, 240: SafePointsPerIteration} {
		if got := StepsPer(k); got != want {
			t.Errorf("StepsPer(%g) = %d, want %d", k, got, want)
		}
	}
}

// A step of the job's fastest iteration is never shorter than MinStepWall.
func TestStepsFor(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		k       float64
		fastest time.Duration
		want    int
	}{{240, 0, SafePointsPerIteration}, {240, 100 * ms, 1}, {240, 250 * ms, 2}, {240, 4 * time.Second, 8}, {3, 4 * time.Second, 3}, {1, 4 * time.Second, 1}} {
		if got := stepsFor(c.k, c.fastest); got != c.want {
			t.Errorf("stepsFor(%g, %v) = %d, want %d", c.k, c.fastest, got, c.want)
		}
	}
}
