package hostprobe

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
)

// The probe measures something on every figure and the cache gives back
// what it kept, for this machine only.
func TestMeasureAndCache(t *testing.T) {
	t.Setenv("KOALA_EMU_CACHE", t.TempDir())
	fakeMachine(t, 0) // the test's neighbours (other packages' tests) do not count
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

// fakeMachine makes the machine's CPU, as the probe sees it, busy with
// other processes for the given share (0-1) of every tick, and this
// process use none.
func fakeMachine(t *testing.T, others float64) {
	var ticks uint64
	mc, sc := machineCPU, selfCPU
	machineCPU = func() (uint64, uint64, error) {
		ticks += 1000
		return uint64(others * float64(ticks)), ticks, nil
	}
	selfCPU = func() time.Duration { return 0 }
	t.Cleanup(func() { machineCPU, selfCPU = mc, sc })
}

// Figures measured while other processes kept the machine busy serve the
// run that measured them and are not kept: the next run measures again.
func TestBusyFiguresNotKept(t *testing.T) {
	t.Setenv("KOALA_EMU_CACHE", t.TempDir())
	calls := 0
	m := func(context.Context, Options) (fidelity.Capacity, error) {
		calls++
		return fidelity.Capacity{Machine: MachineID(), MsgsPerSec: 1e5, BytesPerSec: 1e9, Measured: time.Now()}, nil
	}
	for _, tc := range []struct {
		others float64
		kept   bool
	}{{0.6, false}, {0.5, false}, {0.3, false}, {0.2, true}, {0, true}} {
		t.Setenv("KOALA_EMU_CACHE", t.TempDir())
		fakeMachine(t, tc.others)
		c, measured, err := Get(context.Background(), "inproc", m, false)
		if err != nil || !measured {
			t.Fatalf("others %v: measured %v, err %v", tc.others, measured, err)
		}
		if math.Abs(c.OthersCPU-tc.others) > 0.002 || c.Busy() == tc.kept {
			t.Fatalf("others %v: figures say others %v, busy %v", tc.others, c.OthersCPU, c.Busy())
		}
		if _, ok := Load("inproc"); ok != tc.kept {
			t.Fatalf("others %v: kept %v, want %v", tc.others, ok, tc.kept)
		}
		n := calls
		if _, measured, _ := Get(context.Background(), "inproc", m, false); measured == tc.kept || calls != n+map[bool]int{true: 0, false: 1}[tc.kept] {
			t.Fatalf("others %v: the next Get measured %v", tc.others, measured)
		}
	}
}

// The machine's CPU times are read from /proc/stat and grow.
func TestMachineCPU(t *testing.T) {
	b0, t0, err := fidelity.MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	b1, t1, err := fidelity.MachineCPU()
	if err != nil || t1 <= t0 || b1 < b0 || b0 > t0 {
		t.Fatalf("busy %d -> %d, total %d -> %d, err %v", b0, b1, t0, t1, err)
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
