package launch

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// inprocGC turns the garbage collector off for an inproc run, under a
// memory limit (a quarter of the machine's memory, 1 to 16 GiB), and
// returns what puts the previous settings back. Every rank, shaper and
// actor shares the run's process, and a collection's mark phase drafts the
// goroutines that allocate into marking (assists): on the 2-core VM a
// das3-coalloc run (wave, FCM, dilation 600) collected 35-39 times, frames
// were 24 % late at p99 and 157 of 201 jobs were judged degraded; with the
// collector off, 0 collections, 8.7 % and 68 (docs/fidelity.md). The limit
// keeps memory bounded: the collector runs when the heap reaches it. GOGC
// or GOMEMLIMIT in the environment leave the settings to the user. Runs
// that overlap in one process (tests) share the setting: the first sets
// it, the last puts the previous one back.
func inprocGC() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	gcOff.mu.Lock()
	defer gcOff.mu.Unlock()
	if gcOff.runs == 0 {
		gcOff.pct = debug.SetGCPercent(-1)
		gcOff.limit = debug.SetMemoryLimit(gcLimit(memTotal()))
	}
	gcOff.runs++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcOff.mu.Lock()
			defer gcOff.mu.Unlock()
			if gcOff.runs--; gcOff.runs == 0 {
				debug.SetMemoryLimit(gcOff.limit)
				debug.SetGCPercent(gcOff.pct)
			}
		})
	}
}

// gcOff is the collector's setting while inproc runs are under way.
var gcOff struct {
	mu    sync.Mutex
	runs  int
	pct   int
	limit int64
}

// gcLimit is the memory limit of an inproc run on a machine of total bytes
// (0: unknown, 4 GiB assumed): a quarter of it, between 1 and 16 GiB.
func gcLimit(total int64) int64 {
	const gib = 1 << 30
	if total <= 0 {
		total = 4 * gib
	}
	return min(max(total/4, gib), 16*gib)
}

// memTotal is the machine's memory in bytes from /proc/meminfo (0 when it
// cannot be read).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
