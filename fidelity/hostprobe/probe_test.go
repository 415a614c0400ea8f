package hostprobe

import (
	"context"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
)

// The probe measures something on every figure and the cache gives back
// what it kept, for this machine only.
func TestMeasureAndCache(t *testing.T) {
	t.Setenv("KOALA_EMU_CACHE", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	calls := 0
	m := func(ctx context.Context, o Options) (fidelity.Capacity, error) {
		calls++
		return MeasureInproc(ctx, Options{Ranks: 4, Rings: 2, Span: 100 * time.Millisecond, Pairs: 1, Tries: 1})
	}
	c, measured, err := Get(ctx, "inproc", m, false)
	if err != nil {
		t.Fatal(err)
	}
	if !measured || c.MsgsPerSec <= 0 || c.BytesPerSec <= 0 || c.Machine != MachineID() {
		t.Fatalf("measured %v: %+v", measured, c)
	}
	again, measured, err := Get(ctx, "inproc", m, false)
	if err != nil || measured || calls != 1 || again.MsgsPerSec != c.MsgsPerSec {
		t.Fatalf("second Get measured %v (calls %d, err %v): %+v", measured, calls, err, again)
	}
	if _, ok := Load("docker"); ok {
		t.Fatal("figures of another backend were found")
	}
	if _, _, err := Get(ctx, "inproc", m, true); err != nil || calls != 2 {
		t.Fatalf("refresh: calls %d err %v", calls, err)
	}
}

// BenchmarkInprocCapacity reports the default probe's figures.
func BenchmarkInprocCapacity(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c, err := MeasureInproc(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(c.MsgsPerSec, "msgs/s")
		b.ReportMetric(c.BytesPerSec/1e6, "MB/s")
		b.ReportMetric(float64(c.Floor.Microseconds()), "floor-µs")
	}
}
