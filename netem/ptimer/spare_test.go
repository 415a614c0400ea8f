package ptimer

import (
	"runtime"
	"testing"
)

func TestReserveP(t *testing.T) {
	spare.mu.Lock()
	held := spare.n
	spare.mu.Unlock()
	g0 := runtime.GOMAXPROCS(0)
	want := func(n int) int { // GOMAXPROCS with n more reservations
		return g0 - min(held, runtime.NumCPU()) + min(held+n, runtime.NumCPU())
	}
	r1 := ReserveP()
	if g := runtime.GOMAXPROCS(0); g != want(1) {
		t.Errorf("one reservation: GOMAXPROCS %d, want %d", g, want(1))
	}
	r2 := ReserveP()
	if g := runtime.GOMAXPROCS(0); g != want(2) {
		t.Errorf("two reservations: GOMAXPROCS %d, want %d", g, want(2))
	}
	r1()
	r1() // releasing twice gives back one P only
	if g := runtime.GOMAXPROCS(0); g != want(1) {
		t.Errorf("after one release: GOMAXPROCS %d, want %d", g, want(1))
	}
	r2()
	if g := runtime.GOMAXPROCS(0); g != g0 {
		t.Errorf("after both releases: GOMAXPROCS %d, want %d", g, g0)
	}
}
