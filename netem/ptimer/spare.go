package ptimer

import (
	"runtime"
	"sync"
)

// A dedicated timer thread is a Go thread: when its sleep ends (a system
// call), it needs a P of the Go scheduler before it can run a single
// instruction of Go code. When every P is busy with other goroutines it
// waits until one of them blocks or is preempted (up to the scheduler's
// 10 ms time slice): measured here, a SCHED_FIFO thread sleeping 400 µs
// woke p99 3.5 ms late with GOMAXPROCS=2 and one busy goroutine, 31 µs
// with GOMAXPROCS=3. ReserveP therefore raises GOMAXPROCS by one while a
// timer thread exists, so that a P is usually idle when the thread wakes;
// the thread holds it only while it runs (spinning before a deadline,
// releasing), so the other goroutines keep their share of the cores.

var spare struct {
	mu      sync.Mutex
	n       int  // reservations held
	base    int  // GOMAXPROCS before the first reservation
	ours    int  // GOMAXPROCS as we last set it
	foreign bool // somebody else changed GOMAXPROCS meanwhile: leave it
}

// ReserveP raises GOMAXPROCS by one for the life of a dedicated timer
// thread and returns the function that gives the P back. Reservations are
// counted: each adds a P, up to the number of CPUs (more timer threads
// than that cannot run at once anyway); the last one restores GOMAXPROCS.
// If somebody else sets GOMAXPROCS meanwhile, it is left as they set it.
func ReserveP() (release func()) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.n == 0 {
		spare.base = runtime.GOMAXPROCS(0)
		spare.ours = spare.base
		spare.foreign = false
	}
	spare.n++
	adjustSpare()
	return releaseOnce(&spare.mu, func() {
		spare.n--
		adjustSpare()
	})
}

// releaseOnce returns a release function of a counted process-wide hold:
// the first call runs drop under mu, later calls do nothing.
func releaseOnce(mu *sync.Mutex, drop func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			drop()
		})
	}
}

// adjustSpare sets GOMAXPROCS to base + min(n, NumCPU). Caller holds
// spare.mu.
func adjustSpare() {
	if spare.foreign || runtime.GOMAXPROCS(0) != spare.ours {
		spare.foreign = true
		return
	}
	want := spare.base + min(spare.n, runtime.NumCPU())
	if want != spare.ours {
		runtime.GOMAXPROCS(want)
		spare.ours = want
	}
}
