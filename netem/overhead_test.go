package netem

import (
	"errors"
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

// TestMeasureCurve: passes run over all delays in turn, each point is the
// median of its passes (one disturbed pass does not move it), negative
// overheads count as zero, and a probe's error ends the measurement.
func TestMeasureCurve(t *testing.T) {
	us := time.Microsecond
	delays := []time.Duration{0, 100 * us, 1000 * us}
	var calls []time.Duration
	pass := 0
	o, err := MeasureCurve(delays, 3, func(d time.Duration) (time.Duration, error) {
		calls = append(calls, d)
		if d == delays[len(delays)-1] {
			defer func() { pass++ }()
		}
		switch {
		case pass == 1: // a busy moment: every delay looks slow
			return d/10 + 500*us, nil
		case d == 0:
			return -us, nil
		}
		return d/10 + time.Duration(pass)*us, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Overhead{{0, 0}, {100 * us, 12 * us}, {1000 * us, 102 * us}}
	if len(o) != len(want) {
		t.Fatalf("curve %v, want %v", o, want)
	}
	for i := range want {
		if o[i] != want[i] {
			t.Errorf("curve %v, want %v", o, want)
			break
		}
	}
	if len(calls) != 9 || calls[0] != 0 || calls[2] != 1000*us || calls[3] != 0 {
		t.Errorf("probe order %v, want the delays in turn, three times", calls)
	}
	boom := errors.New("boom")
	if _, err := MeasureCurve(delays, 3, func(time.Duration) (time.Duration, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want the probe's", err)
	}
}

func TestMatrixMaxLatency(t *testing.T) {
	m := Matrix{Clusters: []string{"a", "b"}, Links: [][]Link{
		{{Latency: time.Millisecond}, {Unavailable: true, Latency: time.Second}},
		{{Unavailable: true, Latency: time.Second}, {Latency: 3 * time.Millisecond}},
	}}
	if got := m.MaxLatency(1); got != 3*time.Millisecond {
		t.Errorf("MaxLatency(1) = %v, want 3ms (unavailable links do not count)", got)
	}
	if got := m.MaxLatency(2); got != 6*time.Millisecond {
		t.Errorf("MaxLatency(2) = %v, want 6ms", got)
	}
}
