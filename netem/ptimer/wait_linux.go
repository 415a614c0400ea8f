//go:build linux

package ptimer

import (
	"encoding/binary"
	"errors"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func lockThread() { runtime.LockOSThread() }

// setupThread sets 1 ns timer slack on the calling thread and, if asked,
// SCHED_FIFO priority 1. It reports whether the thread is realtime.
func setupThread(realtime bool) bool {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: default slack is 50 µs
	if !realtime {
		return false
	}
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
	attr.Size = uint32(unsafe.Sizeof(attr))
	return unix.SchedSetAttr(0, &attr, 0) == nil
}

// fdWaiter sleeps in ppoll on a timerfd armed with an absolute
// CLOCK_MONOTONIC time and an eventfd that kick writes to.
type fdWaiter struct {
	tfd, efd int
	kbase    int64 // CLOCK_MONOTONIC ns at base
}

// newWaiter picks the base time of the line and the platform waiter.
func newWaiter() (waiter, time.Time, string) {
	base, kbase, err := monoBase()
	if err != nil {
		base = time.Now()
		return newChanWaiter(base), base, "gotimer"
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return newChanWaiter(base), base, "gotimer"
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(tfd)
		return newChanWaiter(base), base, "gotimer"
	}
	return &fdWaiter{tfd: tfd, efd: efd, kbase: kbase}, base, "timerfd"
}

// monoBase reads time.Now (whose monotonic reading is CLOCK_MONOTONIC) and
// CLOCK_MONOTONIC directly, bracketing the first between two readings of
// the second and keeping the tightest of a few tries. The error of the
// mapping is half the bracket, well under a microsecond.
func monoBase() (time.Time, int64, error) {
	var best time.Time
	var bestK int64
	bestW := int64(-1)
	for range 8 {
		var a, b unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &a); err != nil {
			return time.Time{}, 0, err
		}
		t := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
			return time.Time{}, 0, err
		}
		w := b.Nano() - a.Nano()
		if bestW < 0 || w < bestW {
			bestW, best, bestK = w, t, a.Nano()+w/2
		}
	}
	return best, bestK, nil
}

func (w *fdWaiter) wait(at int64) bool {
	var its unix.ItimerSpec // zero disarms
	if at >= 0 {
		its.Value = unix.NsecToTimespec(w.kbase + at)
	}
	if err := unix.TimerfdSettime(w.tfd, unix.TFD_TIMER_ABSTIME, &its, nil); err != nil {
		// Cannot arm: fall back to a relative ppoll timeout.
		return w.pollRelative(at)
	}
	fds := [2]unix.PollFd{{Fd: int32(w.efd), Events: unix.POLLIN}, {Fd: int32(w.tfd), Events: unix.POLLIN}}
	if _, err := unix.Ppoll(fds[:], nil, nil); err != nil {
		return false // EINTR: the caller re-evaluates
	}
	if fds[0].Revents&unix.POLLIN != 0 {
		w.drain()
	}
	return fds[1].Revents&unix.POLLIN != 0
}

func (w *fdWaiter) pollRelative(at int64) bool {
	fds := [1]unix.PollFd{{Fd: int32(w.efd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if at >= 0 {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err == nil {
			t := unix.NsecToTimespec(max(0, w.kbase+at-now.Nano()))
			ts = &t
		}
	}
	n, err := unix.Ppoll(fds[:], ts, nil)
	if err != nil {
		return false
	}
	if n > 0 {
		w.drain()
		return false
	}
	return at >= 0
}

func (w *fdWaiter) drain() {
	var b [8]byte
	for {
		if _, err := unix.Read(w.efd, b[:]); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		return
	}
}

func (w *fdWaiter) kick() {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	for {
		_, err := unix.Write(w.efd, b[:])
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

func (w *fdWaiter) close() {
	_ = unix.Close(w.tfd)
	_ = unix.Close(w.efd)
}
