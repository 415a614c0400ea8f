package launch

import (
	"runtime/debug"
	"testing"
)

func TestGCLimit(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct{ total, want int64 }{
		{0, gib}, {2 * gib, gib}, {24 * gib, 6 * gib}, {256 * gib, 16 * gib},
	} {
		if got := gcLimit(c.total); got != c.want {
			t.Errorf("gcLimit(%d) = %d, want %d", c.total, got, c.want)
		}
	}
	if memTotal() <= 0 {
		t.Error("no MemTotal in /proc/meminfo")
	}
}

// A run turns the collector off under its limit and puts the process's
// settings back afterwards.
func TestInprocGCRestores(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := inprocGC()
	inner := inprocGC() // an overlapping run
	inner()
	if off := debug.SetGCPercent(-1); off != -1 {
		t.Errorf("collector at %d %% during a run, want off", off)
	}
	if lim := debug.SetMemoryLimit(-1); lim != gcLimit(memTotal()) {
		t.Errorf("memory limit %d during a run, want %d", lim, gcLimit(memTotal()))
	}
	restore()
	if pct := debug.SetGCPercent(-1); pct != 100 {
		t.Errorf("collector at %d %% after the run, want 100 back", pct)
	}
	debug.SetGCPercent(100)
}
