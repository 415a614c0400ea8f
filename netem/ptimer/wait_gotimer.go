package ptimer

import "time"

// chanWaiter is the portable fallback: a Go timer (coarse, about 1 ms on
// Linux) and a channel for kicks.
type chanWaiter struct {
	base time.Time
	k    chan struct{}
}

func newChanWaiter(base time.Time) *chanWaiter {
	return &chanWaiter{base: base, k: make(chan struct{}, 1)}
}

func (w *chanWaiter) wait(at int64) bool {
	if at < 0 {
		<-w.k
		return false
	}
	t := time.NewTimer(time.Until(w.base.Add(time.Duration(at))))
	defer t.Stop()
	select {
	case <-w.k:
		return false
	case <-t.C:
		return true
	}
}

func (w *chanWaiter) kick() {
	select {
	case w.k <- struct{}{}:
	default:
	}
}

func (w *chanWaiter) close() {}
