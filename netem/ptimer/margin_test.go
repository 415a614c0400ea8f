package ptimer

import (
	"testing"
	"time"
)

const us = int64(time.Microsecond)

func lineRule() MarginRule {
	o := Options{}.withDefaults()
	return MarginRule{Min: o.MinSpin, Max: o.MaxSpin, Offset: o.Guard, Initial: initialSpin, Every: 32, Early: true}
}

// feed observes n wake-ups of sleeps of length sleep with overshoots over(i).
func feed(m *Margin, sleep int64, n int, over func(i int) int64) {
	for i := range n {
		m.Observe(sleep, over(i))
	}
}

func TestMarginRule(t *testing.T) {
	cases := []struct {
		name      string
		over      func(i int) int64
		wantRange [2]int64
	}{
		{"idle machine: the guard", func(int) int64 { return 0 }, [2]int64{10 * us, 10 * us}},
		{"flat overshoot: p99.5 + guard", func(int) int64 { return 5 * us }, [2]int64{15 * us, 15 * us}},
		// one wake-up in 100 at 65 µs: p99.5 + guard (75 µs)
		{"tail: p99.5 + guard", func(i int) int64 {
			if i%100 == 99 {
				return 65 * us
			}
			return 5 * us
		}, [2]int64{75 * us, 75 * us}},
		{"clamped to MaxSpin", func(int) int64 { return 400 * us }, [2]int64{250 * us, 250 * us}},
	}
	for _, c := range cases {
		m := NewMargin(lineRule())
		feed(m, int64(100*time.Microsecond), 256, c.over)
		if got := m.For(int64(100 * time.Microsecond)); got < c.wantRange[0] || got > c.wantRange[1] {
			t.Errorf("%s: margin %v, want %v", c.name, time.Duration(got), time.Duration(c.wantRange[0]))
		}
	}
}

func TestMarginClassesAdaptApart(t *testing.T) {
	m := NewMargin(lineRule())
	short, long := int64(100*time.Microsecond), int64(3*time.Millisecond)
	if got := m.For(long); got != int64(initialSpin) {
		t.Fatalf("before any wake-up: %v, want the initial %v", time.Duration(got), initialSpin)
	}
	feed(m, short, 256, func(int) int64 { return 10 * us })
	// The long class has no wake-ups of its own: it borrows the shorter
	// class's margin only where that is larger than its own.
	if got := m.For(long); got != int64(initialSpin) {
		t.Fatalf("long class borrowed a smaller margin: %v", time.Duration(got))
	}
	feed(m, long, 256, func(int) int64 { return 80 * us })
	if got := m.For(short); got != 20*us {
		t.Fatalf("short sleeps: margin %v, want 20µs (not moved by the long ones)", time.Duration(got))
	}
	if got := m.For(long); got != 90*us {
		t.Fatalf("long sleeps: margin %v, want 90µs", time.Duration(got))
	}
	if m.Last() != 90*time.Microsecond {
		t.Fatalf("Last = %v", m.Last())
	}
	// A middle class that has not adapted takes the largest shorter one.
	m2 := NewMargin(lineRule())
	feed(m2, short, 256, func(int) int64 { return 120 * us })
	if got := m2.For(int64(500 * time.Microsecond)); got != 130*us {
		t.Fatalf("unadapted middle class: %v, want the short class's 130µs", time.Duration(got))
	}
}

func TestMarginEarlyEstimate(t *testing.T) {
	m := NewMargin(lineRule())
	long := int64(3 * time.Millisecond)
	feed(m, long, earlyAfter-1, func(int) int64 { return 100 * us })
	if got := m.For(long); got != int64(initialSpin) {
		t.Fatalf("after %d wake-ups: %v, want the initial %v", earlyAfter-1, time.Duration(got), initialSpin)
	}
	feed(m, long, 1, func(int) int64 { return 100 * us })
	if got := m.For(long); got != 110*us {
		t.Fatalf("after %d wake-ups of 100µs: %v, want their maximum + guard, 110µs", earlyAfter, time.Duration(got))
	}
	// The early estimate never drops below what the class had: small
	// overshoots keep the initial margin until the window's quarter.
	m2 := NewMargin(lineRule())
	feed(m2, long, 32, func(int) int64 { return 1 * us })
	if got := m2.For(long); got != int64(initialSpin) {
		t.Fatalf("early estimate lowered the margin to %v", time.Duration(got))
	}
}

func TestMarginNoEarlyEstimate(t *testing.T) {
	r := lineRule()
	r.Early = false
	m := NewMargin(r)
	long := int64(3 * time.Millisecond)
	feed(m, long, marginWindow/4-1, func(int) int64 { return 100 * us })
	if got := m.For(long); got != int64(initialSpin) {
		t.Fatalf("without Early, %d wake-ups moved the margin to %v", marginWindow/4-1, time.Duration(got))
	}
}
