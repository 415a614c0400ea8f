package ptimer

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a Line. The zero value gives the defaults.
type Options struct {
	// MinSpin and MaxSpin bound the adaptive spin margin: the thread sleeps
	// until deadline-margin and spins the rest. Defaults 2 µs and 250 µs.
	MinSpin, MaxSpin time.Duration
	// Guard is how far beyond the 99.5th percentile of recent wake-up
	// overshoots the margin reaches (default 10 µs). The margin is
	// max(p90 overshoot + 2 µs, p99.5 overshoot + Guard), clamped to
	// [MinSpin, MaxSpin], per class of sleep length (see Margin). (With
	// p99.5 - 5 µs, measured here, 4 ms sleeps of a slow link woke after
	// their deadline often enough to put the 99th percentile of its
	// release lateness at 50-60 µs.)
	Guard time.Duration
	// Realtime asks for SCHED_FIFO priority 1 on the timer thread (needs
	// CAP_SYS_NICE; silently stays SCHED_OTHER without it, see Realtime()).
	Realtime bool
}

func (o Options) withDefaults() Options {
	if o.MinSpin <= 0 {
		o.MinSpin = 2 * time.Microsecond
	}
	if o.MaxSpin <= 0 {
		o.MaxSpin = 250 * time.Microsecond
	}
	if o.MaxSpin < o.MinSpin {
		o.MaxSpin = o.MinSpin
	}
	if o.Guard <= 0 {
		o.Guard = 10 * time.Microsecond
	}
	return o
}

// CoarseThreshold is the wait above which SleepUntil lets a Go timer do all
// but the last CoarseGuard of the wait, to keep the timer heap short.
const (
	CoarseThreshold = 2 * time.Millisecond
	CoarseGuard     = 1500 * time.Microsecond
)

const (
	stateRunning = iota
	stateSleeping
	stateSpinning
	stateClosed
)

const (
	adaptEvery  = 64
	initialSpin = 50 * time.Microsecond
)

type entry struct {
	at    int64 // ns since Line.base (Go's monotonic clock, CLOCK_MONOTONIC)
	tol   int64 // how late fn may run (ns): see AtWithin
	seq   uint64
	fn    func()
	idx   int
	state atomic.Int32 // entryPending, entryFired, entryCancelled
	next  *entry       // inbox link
}

const (
	entryPending = iota
	entryFired
	entryCancelled
)

type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.idx = -1
	*h = old[:n-1]
	return e
}

// waiter is the platform sleep: wait blocks until the absolute time at (ns
// since base; at < 0 means no deadline) or until kick; it reports whether the
// deadline (not a kick) ended the wait.
type waiter interface {
	wait(at int64) bool
	kick()
	close()
}

// Line is a precise deadline scheduler: one goroutine locked to one OS thread
// that runs callbacks at their deadlines. Create it with New (or use
// Default) and Close it when done.
//
// The timer thread never waits for a lock held by another goroutine: new
// entries arrive through a lock-free inbox and cancellation is an atomic
// flag, so a caller of At that the operating system deschedules at a bad
// moment cannot delay everybody's releases.
type Line struct {
	opts Options
	base time.Time
	w    waiter
	wk   *waker // WakeWithin's dispatcher (nil: the thread sends)
	mode string

	inbox   atomic.Pointer[entry] // pushed by At, drained by the thread
	seq     atomic.Uint64
	armed   atomic.Int64 // the thread's next wake target while it sleeps or spins
	state   atomic.Int32 // stateRunning, stateSleeping, stateSpinning, stateClosed
	pending atomic.Int64

	closeMu sync.RWMutex // At holds it shared; Close exclusively
	closed  bool
	stop    atomic.Bool
	done    chan struct{}

	h entryHeap // thread-only

	lat      Histogram // release lateness of callbacks
	cbTime   Histogram // how long callbacks run
	wake     Histogram // overshoot of the kernel sleep itself
	margin   *Margin   // per class of sleep length (thread-only but Last)
	realtime atomic.Bool
	spinNs   atomic.Int64 // total time spent spinning

	isDefault bool
	closeOnce sync.Once
	release   func() // gives back the thread's resources (ThreadResources)
}

// New starts a line with default options.
func New() *Line { return NewWithOptions(Options{}) }

// NewWithOptions starts a line.
func NewWithOptions(o Options) *Line {
	l := &Line{opts: o.withDefaults(), done: make(chan struct{})}
	l.w, l.base, l.mode = newWaiter()
	l.margin = NewMargin(MarginRule{Min: l.opts.MinSpin, Max: l.opts.MaxSpin, Offset: l.opts.Guard,
		Initial: initialSpin, Every: adaptEvery, Early: true})
	l.release = ThreadResources()
	l.wk = newWaker()
	started := make(chan struct{})
	go l.run(started)
	<-started
	return l
}

var (
	defaultOnce sync.Once
	defaultLine *Line
	defaultMu   sync.Mutex
	defaultOpts = Options{Realtime: true}
	defaultUsed bool
)

// SetDefaultOptions sets the options of the Default line. It fails once the
// Default line has started. Without it the Default line asks for
// SCHED_FIFO (Realtime: true): on a shared machine a wake-up of a normal
// thread can wait milliseconds behind other processes; the thread spins at
// most MaxSpin per deadline, and the kernel's real-time throttling bounds it.
// Without CAP_SYS_NICE the line stays SCHED_OTHER (see Realtime).
func SetDefaultOptions(o Options) error {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultUsed {
		return errors.New("ptimer: the default line has already started")
	}
	defaultOpts = o
	return nil
}

// Default returns the process-wide line, started on first use. Close on it
// is a no-op.
func Default() *Line {
	defaultOnce.Do(func() {
		defaultMu.Lock()
		defaultUsed = true
		o := defaultOpts
		defaultMu.Unlock()
		defaultLine = NewWithOptions(o)
		defaultLine.isDefault = true
	})
	return defaultLine
}

// Mode names the sleep technique: "timerfd" (Linux: timerfd + eventfd +
// ppoll on a thread with 1 ns timer slack) or "gotimer" (fallback).
func (l *Line) Mode() string { return l.mode }

// Realtime reports whether the timer thread runs with SCHED_FIFO.
func (l *Line) Realtime() bool { return l.realtime.Load() }

// Spin returns the spin margin in effect for the latest sleep (the margin
// adapts per class of sleep length, see Margin).
func (l *Line) Spin() time.Duration { return l.margin.Last() }

// SpinTime returns the total time the thread has spent spinning.
func (l *Line) SpinTime() time.Duration { return time.Duration(l.spinNs.Load()) }

// Lateness summarises release lateness (callback start minus deadline) of
// everything the line has released so far.
func (l *Line) Lateness() Stats { return l.lat.Stats() }

// CallbackTime summarises how long callbacks ran (a callback that blocks
// shows here, and in the lateness of everything behind it).
func (l *Line) CallbackTime() Stats { return l.cbTime.Stats() }

// WakeOvershoot summarises how late the kernel woke the thread relative to
// the time it asked for (before spinning); diagnostic.
func (l *Line) WakeOvershoot() Stats { return l.wake.Stats() }

// ResetStats clears the lateness and wake-up histograms.
func (l *Line) ResetStats() {
	l.lat.Reset()
	l.wake.Reset()
	l.cbTime.Reset()
	l.spinNs.Store(0)
}

// TryLockFor tries to acquire mu for about d without parking. Callbacks on
// the timer thread use it instead of Lock: parking the locked timer
// goroutine, or waiting for a holder that the operating system has
// descheduled, delays every later release. On failure the callback should
// retry later (for example with At) rather than block.
func TryLockFor(mu *sync.Mutex, d time.Duration) bool {
	if mu.TryLock() {
		return true
	}
	end := time.Now().Add(d)
	for i := 0; ; i++ {
		if mu.TryLock() {
			return true
		}
		if i%32 == 31 && time.Now().After(end) {
			return false
		}
	}
}

func (l *Line) now() int64 { return int64(time.Since(l.base)) }

func (l *Line) mono(t time.Time) int64 { return int64(t.Sub(l.base)) }

// At runs fn on the timer thread at deadline (immediately if it has passed).
// fn must be short and must not block: it delays every later deadline.
// Callbacks with equal deadlines run in the order they were added. After
// Close, fn runs from a Go timer instead (imprecise, but it still runs once).
func (l *Line) At(deadline time.Time, fn func()) {
	l.schedule(l.mono(deadline), 0, fn)
}

// AtWithin is At for a callback that may run up to tolerance late: when the
// thread's spin margin (the wake-up overshoot it expects) is within
// tolerance, it sleeps to the deadline itself instead of waking early and
// spinning the rest. A spinning thread holds a core at real-time priority;
// a burst of releases spread over a few hundred µs (the frames of a
// lock-step exchange) would keep it spinning from the first to the last,
// taking a core from the goroutines those releases wake. Releases whose
// targets are milliseconds long do not need spinning to be precise to a
// percent.
func (l *Line) AtWithin(deadline time.Time, tolerance time.Duration, fn func()) {
	l.schedule(l.mono(deadline), int64(max(tolerance, 0)), fn)
}

func (l *Line) schedule(at, tol int64, fn func()) *entry {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		time.AfterFunc(time.Duration(at-l.now()), fn)
		return nil
	}
	e := &entry{at: at, tol: tol, seq: l.seq.Add(1), fn: fn, idx: -1}
	l.pending.Add(1)
	for {
		old := l.inbox.Load()
		e.next = old
		if l.inbox.CompareAndSwap(old, e) {
			break
		}
	}
	// The thread publishes state and armed before it looks at the inbox a
	// last time and sleeps, so either it sees e or we see it sleeping.
	if l.state.Load() == stateSleeping && at < l.armed.Load() {
		l.w.kick()
	}
	return e
}

// cancel stops e from firing; it reports whether e had not fired yet.
func (l *Line) cancel(e *entry) bool {
	if e == nil {
		return false
	}
	if e.state.CompareAndSwap(entryPending, entryCancelled) {
		l.pending.Add(-1)
		return true
	}
	return false
}

// SleepUntil blocks the calling goroutine until deadline or until ctx ends
// (then it returns ctx.Err()). Waits longer than CoarseThreshold sleep on a
// Go timer until CoarseGuard before the deadline and finish on the line. The
// caller resumes when the Go scheduler runs it after the line's release; the
// release itself is precise, the resumption adds the scheduler's latency
// (tens of µs on small virtual machines).
func (l *Line) SleepUntil(ctx context.Context, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := time.Until(deadline)
	if d <= 0 {
		return nil
	}
	if d > CoarseThreshold {
		t := time.NewTimer(d - CoarseGuard)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	ch := make(chan struct{}, 1)
	w := l.wk
	e := l.schedule(l.mono(deadline), 0, func() { w.signal(ch) })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.cancel(e)
		return ctx.Err()
	}
}

// Sleep is SleepUntil(ctx, time.Now().Add(d)).
func (l *Line) Sleep(ctx context.Context, d time.Duration) error {
	return l.SleepUntil(ctx, time.Now().Add(d))
}

// Pending returns the number of callbacks waiting for their deadline.
func (l *Line) Pending() int { return int(l.pending.Load()) }

// Close stops the timer thread. Callbacks still pending run from Go timers
// at (about) their deadlines; so do callbacks added later. Close on the
// Default line does nothing.
func (l *Line) Close() {
	if l.isDefault {
		return
	}
	l.closeOnce.Do(func() {
		l.closeMu.Lock()
		l.closed = true
		l.closeMu.Unlock()
		l.stop.Store(true)
		l.w.kick()
		<-l.done
		l.release()
		l.w.close()
		l.drain()
		for _, e := range l.h {
			if e.state.CompareAndSwap(entryPending, entryFired) {
				l.pending.Add(-1)
				time.AfterFunc(time.Duration(e.at-l.now()), e.fn)
			}
		}
		l.h = nil
		l.wk.close()
	})
}

// drain moves the inbox into the heap (thread, or Close after the thread).
func (l *Line) drain() bool {
	e := l.inbox.Swap(nil)
	if e == nil {
		return false
	}
	for e != nil {
		next := e.next
		e.next = nil
		if e.state.Load() == entryPending {
			heap.Push(&l.h, e)
		}
		e = next
	}
	return true
}

// head drops fired or cancelled entries from the top of the heap and
// returns the earliest pending one, or nil.
func (l *Line) head() *entry {
	for len(l.h) > 0 {
		if e := l.h[0]; e.state.Load() == entryPending {
			return e
		}
		heap.Pop(&l.h)
	}
	return nil
}

func (l *Line) run(started chan<- struct{}) {
	// The thread is never unlocked: it exits with this goroutine, taking its
	// timer slack and scheduling policy with it.
	lockThread()
	if setupThread(l.opts.Realtime) {
		l.realtime.Store(true)
	}
	close(started)
	defer func() {
		l.state.Store(stateClosed)
		close(l.done)
	}()

	sleptFor := int64(-1) // the deadline the last timed sleep was for
	for !l.stop.Load() {
		l.state.Store(stateRunning)
		l.drain()
		now := l.now()
		if e := l.head(); e != nil && e.at <= now {
			heap.Pop(&l.h)
			if !e.state.CompareAndSwap(entryPending, entryFired) {
				continue // cancelled meanwhile
			}
			l.pending.Add(-1)
			t := l.now()
			l.lat.Record(time.Duration(t - e.at))
			e.fn()
			l.cbTime.Record(time.Duration(l.now() - t))
			continue
		}
		e := l.head()
		if e == nil {
			l.armed.Store(math.MaxInt64)
			l.state.Store(stateSleeping)
			if l.inbox.Load() != nil || l.stop.Load() {
				continue
			}
			l.w.wait(-1)
			continue
		}
		next := e.at
		// After a timed sleep for this deadline the thread spins the rest:
		// the margin of the (now short) remaining wait belongs to another
		// class of sleep length and would put it back to sleep.
		spin := next == sleptFor
		var margin int64
		if !spin {
			margin = l.margin.For(next - now)
			spin = next-now <= margin
			if e.tol >= margin {
				// Tolerant: sleep to the deadline itself (see AtWithin).
				margin, spin = 0, false
			}
		}
		if spin {
			l.armed.Store(next)
			l.state.Store(stateSpinning)
			t := now
			for t < next && l.inbox.Load() == nil && !l.stop.Load() {
				t = l.now()
			}
			l.spinNs.Add(t - now)
			continue
		}
		wakeAt := next - margin
		l.armed.Store(next)
		l.state.Store(stateSleeping)
		if l.inbox.Load() != nil || l.stop.Load() {
			continue
		}
		if l.w.wait(wakeAt) {
			sleptFor = next
			over := max(l.now()-wakeAt, 0)
			l.wake.Record(time.Duration(over))
			l.margin.Observe(next-now, over)
		}
	}
}
