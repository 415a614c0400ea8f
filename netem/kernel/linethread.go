package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// lineThread is the thread that serves a DelayLine (see DelayLine). It
// starts with the line and stops when the line closes.
//
// The loop can serve several lines (one ppoll over all their sockets, one
// spin margin); it serves exactly one. Measured here, one thread shared by
// all the lines of a process was worse on two cores: a verdict runs the
// released packets' kernel path inline (the receiver's stack, and for
// ACKs the sender's next transmissions), 3-50 µs each, so one line's
// verdicts delayed the other line's releases (p99 release lateness of
// undelayed intra-cluster pairs rose from about 5 µs to 50-78 µs, of
// delayed pairs to 60-150 µs) where two threads issue them on both cores
// at once. An idle line's thread sleeps in ppoll without a timeout.
//
// Lines attach and detach through requests that the thread picks up at the
// top of its loop (an eventfd wakes it); everything else (the lines'
// queues, sockets and verdicts) is touched by the thread alone while the
// line is attached.
type lineThread struct {
	ctlFd  int // eventfd: requests are waiting
	reqMu  sync.Mutex
	reqs   []lineReq
	hasReq atomic.Bool

	lines []*DelayLine // thread only

	// Spin margin: adaptive per class of sleep length (margins) unless a
	// line fixes it (see DelayLineConfig.Spin); spin is the margin in
	// effect for the latest sleep.
	spin    atomic.Int64
	adapt   bool           // thread only
	margins *ptimer.Margin // thread only

	spinNs atomic.Int64 // total time spent spinning
	// yieldCost is how long each pass through the Go scheduler took
	// (see yieldEvery).
	yieldCost ptimer.Histogram
	wakeOver  ptimer.Histogram
	tid       atomic.Int64
	isRT      atomic.Bool

	base    time.Time
	monoOff int64 // CLOCK_MONOTONIC ns = monoOff + time.Since(base)

	done    chan struct{}
	release func() // ptimer.ThreadResources
}

type lineReq struct {
	line   *DelayLine // nil: stop the thread
	attach bool
	ack    chan struct{}
}

// The Go runtime preempts a goroutine that has not passed through its
// scheduler for 10 ms (sysmon's forcePreemptNS), at its next function call.
// A line thread never passes through it on its own (it sleeps and spins in
// system calls), and for a goroutine locked to its thread a preemption
// costs a hand-off: the thread parks and waits until another thread of the
// runtime wakes, finds the goroutine and hands the P back, two cross-CPU
// wake-ups (50-200 µs on a virtual machine). Traced on the Delft
// calibration, such preemptions were most of the releases more than 50 µs
// late, caught in the spin before a deadline or just after the wake-up for
// one. So the thread holds the runtime's pin (no preemption; sleeping and
// spinning in system calls does not hold up a stop of the world) except
// while it answers requests, and passes through the scheduler itself
// (runtime.Gosched, the same hand-off, p50 35 µs, p99 110 µs measured
// here) every yieldEvery, right after a release when nothing is due for at
// least yieldRoom; if deadlines come back to back for yieldForce, it
// yields after a release anyway.
const (
	yieldEvery = 8 * time.Millisecond
	yieldRoom  = 300 * time.Microsecond
	yieldForce = 20 * time.Millisecond
)

// liveThreads counts the running line threads (for tests).
var liveThreads atomic.Int64

// attachLine starts a thread for d.
func attachLine(d *DelayLine) (*lineThread, error) {
	t, err := startLineThread()
	if err != nil {
		return nil, err
	}
	t.request(lineReq{line: d, attach: true})
	return t, nil
}

// detach takes d off the thread and stops it; when it returns the thread
// no longer touches d.
func (t *lineThread) detach(_ context.Context, d *DelayLine) error {
	// The thread answers at the top of its next loop: it never blocks on
	// anything but ppoll, which the request's eventfd interrupts.
	t.request(lineReq{line: d})
	t.request(lineReq{}) // stop
	<-t.done
	liveThreads.Add(-1)
	t.release()
	if err := unix.Close(t.ctlFd); err != nil {
		return fmt.Errorf("delay line: %w", err)
	}
	return nil
}

func startLineThread() (*lineThread, error) {
	t := &lineThread{done: make(chan struct{}), adapt: true, margins: ptimer.NewMargin(ptimer.MarginRule{
		Min: MinSpin, Max: MaxSpin, Offset: SpinGuard, Initial: DefaultSpin, Every: adaptEvery,
	})}
	t.spin.Store(int64(DefaultSpin))
	var err error
	if t.base, t.monoOff, err = monoBase(); err != nil {
		return nil, err
	}
	if t.ctlFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("delay line: eventfd: %w", err)
	}
	t.release = ptimer.ThreadResources()
	started := make(chan struct{})
	liveThreads.Add(1)
	go t.run(started)
	<-started
	return t, nil
}

// request queues r, wakes the thread and waits until it has been applied.
func (t *lineThread) request(r lineReq) {
	r.ack = make(chan struct{})
	t.reqMu.Lock()
	t.reqs = append(t.reqs, r)
	t.hasReq.Store(true)
	t.reqMu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		// The eventfd counter cannot overflow here (one write per request).
		if _, err := unix.Write(t.ctlFd, one[:]); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	<-r.ack
}

// applyRequests runs on the thread; it reports whether to stop.
func (t *lineThread) applyRequests() (stop bool) {
	var b [8]byte
	_, _ = unix.Read(t.ctlFd, b[:]) // reset the counter; requests are in reqs
	t.reqMu.Lock()
	reqs := t.reqs
	t.reqs = nil
	t.hasReq.Store(false)
	t.reqMu.Unlock()
	for _, r := range reqs {
		switch {
		case r.line == nil:
			stop = true
		case r.attach:
			t.lines = append(t.lines, r.line)
			if r.line.realtime && !t.isRT.Load() {
				attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
				attr.Size = uint32(unsafe.Sizeof(attr))
				t.isRT.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
			}
		default:
			t.lines = slices.DeleteFunc(t.lines, func(d *DelayLine) bool { return d == r.line })
		}
		close(r.ack)
	}
	t.configureSpin()
	return stop
}

// configureSpin applies the lines' Spin settings (see DelayLineConfig).
func (t *lineThread) configureSpin() {
	var fixed time.Duration
	never := len(t.lines) > 0
	for _, d := range t.lines {
		fixed = max(fixed, d.spinCfg)
		if d.spinCfg >= 0 {
			never = false
		}
	}
	switch {
	case fixed > 0:
		t.adapt = false
		t.spin.Store(int64(fixed))
	case never:
		t.adapt = false
		t.spin.Store(0)
	default:
		if !t.adapt {
			t.spin.Store(int64(DefaultSpin))
		}
		t.adapt = true
	}
}

func (t *lineThread) now() int64 { return t.monoOff + int64(time.Since(t.base)) }

// run is the thread. It never unlocks its OS thread (the thread's timer
// slack and scheduling policy were changed), so the runtime discards the
// thread when run returns.
func (t *lineThread) run(started chan<- struct{}) {
	defer close(t.done)
	runtime.LockOSThread()
	t.tid.Store(int64(unix.Gettid()))
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort
	close(started)
	buf := make([]byte, 1<<18)
	var pk []qpacket
	var pfd []unix.PollFd   // ctlFd, then one socket per serving line
	var polled []*DelayLine // the lines of pfd[1:]
	rebuild := func() {
		pfd = append(pfd[:0], unix.PollFd{Fd: int32(t.ctlFd), Events: unix.POLLIN})
		polled = polled[:0]
		for _, d := range t.lines {
			if !d.failed {
				pfd = append(pfd, unix.PollFd{Fd: int32(d.sock.fd), Events: unix.POLLIN})
				polled = append(polled, d)
			}
		}
	}
	rebuild()
	// take handles what ppoll reported: packets in, broken sockets out.
	take := func() {
		broken := false
		for i, d := range polled {
			re := pfd[i+1].Revents
			if re&(unix.POLLERR|unix.POLLNVAL) != 0 {
				d.fail(errors.New("delay line: socket error"))
				d.failed, broken = true, true
				continue
			}
			if re&unix.POLLIN != 0 {
				pk = d.drain(buf, pk, t.now)
				broken = broken || d.failed
			}
		}
		if broken {
			rebuild()
		}
	}
	zero := unix.Timespec{}
	var spinSince int64   // start of the current run of spinning, 0: none
	sleptFor := int64(-1) // the deadline the last timed sleep was for
	pinned := false
	lastYield := t.now()
	unpin := func() {
		if pinned {
			procUnpin()
			pinned = false
		}
	}
	defer unpin()
	for {
		if t.hasReq.Load() {
			unpin() // requests take a mutex: never block pinned
			if t.applyRequests() {
				return
			}
			rebuild()
		}
		if !pinned {
			procPin()
			pinned = true
		}
		for _, d := range t.lines {
			d.release(t.now(), t.now)
		}
		// Read the clock after the verdicts: they run the released
		// packets' kernel path and can take tens of µs, which a timeout
		// computed from an earlier reading would add to the next sleep.
		now := t.now()
		next := int64(-1)
		var nextLine *DelayLine
		for _, d := range t.lines {
			for _, q := range d.qs {
				if n := q.next(); n >= 0 && (next < 0 || n < next) {
					next, nextLine = n, d
				}
			}
		}
		// Pass through the Go scheduler here, away from any deadline,
		// before the runtime would force it (see yieldEvery).
		if since := now - lastYield; since >= int64(yieldEvery) && (next < 0 || next-now >= int64(yieldRoom) || since >= int64(yieldForce)) {
			unpin()
			runtime.Gosched()
			lastYield = t.now()
			t.yieldCost.Record(time.Duration(lastYield - now))
			continue
		}
		var ts *unix.Timespec
		var tmo int64
		if next >= 0 {
			// After a timed sleep for this deadline the thread spins the
			// rest: the margin of the (now short) remaining wait belongs to
			// another class of sleep length and would put it back to sleep.
			wait := int64(0)
			if next != sleptFor {
				wait = next - now - t.marginFor(next-now)
			}
			if wait <= 0 && spinSince == 0 {
				spinSince = now
			}
			if wait <= 0 && now-spinSince < int64(maxSpinRun) {
				// Spin to the deadline, still taking packets and requests in.
				for i := range pfd {
					pfd[i].Revents = 0
				}
				if n, err := unix.Ppoll(pfd, &zero, nil); err == nil && n > 0 {
					take()
				}
				if t2 := t.now(); t2 < next {
					t.spinNs.Add(t2 - now)
				}
				continue
			}
			if wait <= 0 {
				// Deadlines back to back kept the thread spinning: sleep
				// to this one exactly (precision yields to the rest of the
				// machine, the thread being realtime).
				wait = max(next-now, 1)
			}
			spinSince = 0
			tmo = wait
			tsv := unix.NsecToTimespec(wait)
			ts = &tsv
		}
		for i := range pfd {
			pfd[i].Revents = 0
		}
		n, err := unix.Ppoll(pfd, ts, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			for _, d := range t.lines {
				d.fail(fmt.Errorf("delay line: poll: %w", err))
			}
			// Keep answering requests; without them Close would hang.
			unpin()
			time.Sleep(time.Millisecond)
			continue
		}
		if err == nil && n == 0 && ts != nil {
			sleptFor = next
			t2 := t.now()
			over := t2 - now - tmo
			t.wakeOver.Record(time.Duration(over))
			if t2 > next {
				nextLine.lateWakes.Add(1)
			}
			if t.adapt {
				t.margins.Observe(next-now, over)
			}
		}
		if n > 0 {
			take()
		}
	}
}

// marginFor is the spin margin before a deadline sleep ns away: the
// adaptive one of its class of sleep length, or the fixed one.
func (t *lineThread) marginFor(sleep int64) int64 {
	if !t.adapt {
		return t.spin.Load()
	}
	m := t.margins.For(sleep)
	t.spin.Store(m)
	return m
}

// cpuTime is the thread's CPU time so far.
func (t *lineThread) cpuTime() time.Duration {
	tid := t.tid.Load()
	if tid == 0 {
		return 0
	}
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of linux/posix-timers.h.
	clock := int32(^uint32(tid)<<3) | 6
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
