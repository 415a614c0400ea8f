package netem

import (
	"testing"
	"time"
)

func TestOverheadCurve(t *testing.T) {
	us := time.Microsecond
	o := Overhead{{0, 10 * us}, {60 * us, 16 * us}, {400 * us, 40 * us}}
	at := []struct{ d, want time.Duration }{
		{0, 10 * us}, {-us, 10 * us}, {30 * us, 13 * us}, {60 * us, 16 * us},
		{230 * us, 28 * us}, {400 * us, 40 * us}, {time.Second, 40 * us},
	}
	for _, c := range at {
		if got := o.At(c.d); got != c.want {
			t.Errorf("At(%v) = %v, want %v", c.d, got, c.want)
		}
	}
	for _, target := range []time.Duration{11 * us, 30 * us, 50 * us, 76 * us, 100 * us, 400 * us, 440 * us, 1150 * us} {
		d := o.DelayFor(target)
		if got := d + o.At(d); (got - target).Abs() > 2 {
			t.Errorf("DelayFor(%v) = %v: %v one way", target, d, got)
		}
	}
	for _, target := range []time.Duration{0, 5 * us, 10 * us} {
		if d := o.DelayFor(target); d != 0 {
			t.Errorf("DelayFor(%v) = %v, want 0 at the floor", target, d)
		}
	}
	if d := (Overhead{}).DelayFor(30 * us); d != 30*us {
		t.Errorf("no overhead: %v", d)
	}
	if d := (Overhead{{0, 10 * us}}).DelayFor(1000 * us); d != 990*us {
		t.Errorf("constant overhead: %v", d)
	}
	// A curve that falls (wake-ups cheaper at some delay) still gives the
	// first solution.
	f := Overhead{{0, 10 * us}, {20 * us, 40 * us}, {40 * us, 5 * us}}
	d := f.DelayFor(45 * us)
	if got := d + f.At(d); (got-45*us).Abs() > 2 || d > 20*us {
		t.Errorf("falling curve: DelayFor(45µs) = %v (%v one way)", d, got)
	}
}
