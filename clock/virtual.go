package clock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Virtual is the clock of a simulation: the same actors run, but scenario
// time stands still while anything is active and jumps to the next pending
// event when nothing is.
//
// Events. Sleep, SleepHeld and AfterFunc register an event at Now()+d. Events
// fire in (time, registration sequence) order, one at a time: the clock
// fires the first pending event, waits until the activity it causes has
// settled (the activity count is zero again), then fires the next one. So
// simultaneous events fire in the order they were registered (FIFO), no
// event fires before the work caused by an earlier event at the same time
// has finished, and time moves only once every event due at the current
// time has fired and settled. An event registered at the current time while
// others are due then (a zero duration) fires after them, still at that
// time.
//
// Activity. Hold marks work in progress (a message in flight, a goroutine
// computing) and returns its release; Begin and End are the same count for
// callers that cannot carry a release function (a protoactor sender
// middleware calls Begin for every message it sends and the receiver
// middleware calls End once the receiver's handler returned; a message that
// is dropped must be ended too, or the simulation stalls). The clock only
// advances while the count is zero.
//
// Woken sleepers. When a sleeper's event fires the clock takes a hold on
// its behalf before waking it, so the clock cannot move between the wake-up
// and the sleeper's first action. Who releases it:
//   - SleepHeld returns it: the caller releases it after its next step (for
//     example once the message it sends has been handed to Begin/Hold).
//   - Sleep on a context bound to a Lane (WithLane) parks it in the lane;
//     the lane releases it when its goroutine next sleeps (after the new
//     event is registered, so time cannot pass in between) or calls
//     Lane.Release. This lets code written against Clock
//     ("sleep until t, then send") run unchanged and race-free: bind the
//     goroutine's context to a lane where the simulation starts it.
//   - Sleep on any other context releases it when Sleep returns. The
//     clock then may advance before the caller acts: use a lane, SleepHeld
//     or AfterFunc whenever the caller acts after waking.
//
// AfterFunc callbacks run on the advancing goroutine, under a hold, in event
// order: whatever they Hold or Begin (a message they send) is in effect
// before the clock looks again. They must not block or sleep.
//
// Run advances the clock until nothing is active and no event is pending,
// then closes Done: the simulation is over (it finished, or its actors wait
// on each other with nothing in flight; the caller tells the two apart from
// its own state). Start the simulation under a Hold and release it once
// every actor is started, or Run may find the clock idle before the first
// Sleep and end at once.
//
// Determinism: given the same sequence of Holds, releases and registrations,
// the events fire in the same order at the same times every run; no
// goroutine race decides the order of simultaneous events, provided every
// goroutine that acts after waking keeps the wake hold (lane or SleepHeld)
// until it has registered its next event or handed its work to a hold.
// Events are fired one at a time rather than all those due at once because
// sleepers woken together would race to register their next events, and
// that race would order the next tie. What one event's cascade does
// concurrently (two actors that both message a third) is ordered by the
// actors' runtime, not by the clock.
type Virtual struct {
	start time.Time
	kick  chan struct{} // capacity 1: the activity count fell to zero
	stop  chan struct{}
	done  chan struct{}

	stopOnce sync.Once
	stepMu   sync.Mutex // one stepper at a time (Run or Step)

	mu      sync.Mutex
	now     time.Duration
	seq     uint64
	queue   eventQueue
	holds   int
	fired   uint64
	waits   uint64 // times Run waited for activity to settle (tests)
	running bool

	around func(f func()) // runs every AfterFunc callback (SetAround); nil: called plainly
}

// Interface check: a Virtual is a Clock.
var _ Clock = (*Virtual)(nil)

// ErrStopped is returned by Run after Stop.
var ErrStopped = errors.New("clock: virtual clock stopped")

// NewVirtual returns a virtual clock at scenario time 0; its wall time starts
// now.
func NewVirtual() *Virtual {
	return &Virtual{
		start: time.Now(),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

type event struct {
	at    time.Duration
	seq   uint64
	index int           // position in the queue; -1 once fired or removed
	f     func()        // AfterFunc callback
	wake  chan struct{} // sleeper's wake-up (closed when fired)
	fired bool
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(a, b int) bool {
	if q[a].at != q[b].at {
		return q[a].at < q[b].at
	}
	return q[a].seq < q[b].seq
}
func (q eventQueue) Swap(a, b int) {
	q[a], q[b] = q[b], q[a]
	q[a].index, q[b].index = a, b
}
func (q *eventQueue) Push(x any) {
	e := x.(*event)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*q = old[:n-1]
	return e
}

// Now implements Clock: the time of the last event fired.
func (c *Virtual) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Wall implements Clock: the real time elapsed since NewVirtual.
func (c *Virtual) Wall() time.Duration { return time.Since(c.start) }

// Factor implements Clock: scenario seconds simulated per wall second so far
// (Now / Wall), the simulation's speed-up; it changes as the run goes on and
// is 0 before any scenario time has passed. Nothing real runs under a
// virtual clock, so no caller should need it to convert a measured wall
// duration; it is reported for progress and benchmarks.
func (c *Virtual) Factor() float64 {
	w := c.Wall()
	if w <= 0 {
		return 0
	}
	return c.Now().Seconds() / w.Seconds()
}

// ToWall implements Clock and returns 0: skipping a scenario duration costs
// no wall time, the clock jumps over it. A wall timer armed from ToWall
// (time.AfterFunc(clk.ToWall(d), f)) therefore fires at once under a virtual
// clock, at the wrong scenario time: code that runs on both clocks must
// arm its timers through AfterFunc (see Timers) or Sleep.
func (c *Virtual) ToWall(time.Duration) time.Duration { return 0 }

// Timers is implemented by clocks that run a callback at a scenario time.
// Virtual implements it; code that schedules deliveries (actors.Env.After,
// Every) should prefer it to a wall timer when the clock provides it.
type Timers interface {
	// AfterFunc runs f once the scenario duration d has passed. stop
	// cancels it and reports whether it did (false: f ran or is running).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

var _ Timers = (*Virtual)(nil)

// Activity is what a message middleware needs of a simulation clock: the
// sender side calls Begin for every message it sends, the receiver side End
// once the receiver's handler has returned (and the dead-letter path End for
// a message that is dropped). The clock does not move while messages are in
// flight or being handled.
type Activity interface {
	Begin()
	End()
}

var _ Activity = (*Virtual)(nil)

// Begin marks one unit of activity (for example a message sent); End
// undoes one. They are Hold without the release function, for middleware
// that counts messages in flight (see Activity).
func (c *Virtual) Begin() {
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
}

// End ends one unit of activity begun by Begin (or taken by the clock for a
// woken sleeper). It panics when nothing is active: an End without its
// Begin would let the clock run ahead of real work.
func (c *Virtual) End() {
	c.mu.Lock()
	if c.holds <= 0 {
		c.mu.Unlock()
		panic("clock: Virtual.End without a matching Begin")
	}
	c.holds--
	idle := c.holds == 0
	c.mu.Unlock()
	if idle {
		c.signal()
	}
}

func (c *Virtual) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Hold marks work in progress until release is called; release may be
// called more than once (the later calls do nothing).
func (c *Virtual) Hold() (release func()) {
	c.Begin()
	return c.releaser()
}

func (c *Virtual) releaser() func() {
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			c.End()
		}
	}
}

// Active is the current activity count (holds, Begins without End, woken
// sleepers not yet released, a callback running).
func (c *Virtual) Active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds
}

// Pending is the number of events registered and not yet fired.
func (c *Virtual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Fired is the number of events fired so far.
func (c *Virtual) Fired() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

// register queues an event at Now()+d (d < 0 counts as 0); c.mu is held.
func (c *Virtual) register(d time.Duration, e *event) {
	if d < 0 {
		d = 0
	}
	c.seq++
	e.at, e.seq = c.now+d, c.seq
	heap.Push(&c.queue, e)
}

// AfterFunc implements Timers: f runs on the advancing goroutine once d of
// scenario time has passed, under a hold, in event order. f must not block.
func (c *Virtual) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	e := &event{f: f}
	c.mu.Lock()
	c.register(d, e)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.fired || e.index < 0 {
			return false
		}
		heap.Remove(&c.queue, e.index)
		return true
	}
}

// SetAround makes around run every AfterFunc callback from then on:
// around(f) must call f once, on the goroutine it was called on, and may
// do more work after it, which then counts as the callback's (the clock
// does not move before around returns). A simulation's dispatcher uses it
// to handle the messages a callback sent on the advancing goroutine, right
// after the callback, instead of handing them to a goroutine of its own.
// Set it before Run or Step.
func (c *Virtual) SetAround(around func(f func())) {
	c.mu.Lock()
	c.around = around
	c.mu.Unlock()
}

// Sleep implements Clock: it waits until d of scenario time has passed or
// ctx ends. See the type's comment for who releases the wake hold: the
// lane of ctx (WithLane), or Sleep itself when ctx carries none. A d <= 0
// returns at once (ctx.Err()) and keeps a lane's hold: the step goes on.
func (c *Virtual) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if l, ok := ctx.Value(laneKey{}).(*Lane); ok && l.c == c {
		release, err := c.sleep(ctx, d, l.Release)
		l.adopt(release)
		return err
	}
	release, err := c.sleep(ctx, d, nil)
	release()
	return err
}

// SleepHeld waits like Sleep and returns holding the wake hold: the clock
// cannot advance until the caller calls release (typically after its next
// step). On error no hold is kept and release does nothing.
func (c *Virtual) SleepHeld(ctx context.Context, d time.Duration) (release func(), err error) {
	return c.sleep(ctx, d, nil)
}

func noop() {}

// sleep registers a wake-up event, then calls registered (if not nil) so
// that a caller's hold ends only once the event is queued, then waits.
func (c *Virtual) sleep(ctx context.Context, d time.Duration, registered func()) (func(), error) {
	if err := ctx.Err(); err != nil {
		if registered != nil {
			registered()
		}
		return noop, err
	}
	e := &event{wake: make(chan struct{})}
	c.mu.Lock()
	c.register(d, e)
	c.mu.Unlock()
	if registered != nil {
		registered()
	}
	select {
	case <-e.wake:
		return c.releaser(), nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	if e.fired { // woken at the same moment: give the wake hold back
		c.mu.Unlock()
		c.End()
		return noop, ctx.Err()
	}
	heap.Remove(&c.queue, e.index)
	c.mu.Unlock()
	return noop, ctx.Err()
}

// Lane is one sequential thread of simulated activity: a goroutine that
// sleeps and acts (a submitter replaying arrivals, a load generator). Sleep
// on a context bound to the lane keeps the wake hold after it returns and
// releases it at the lane's next Sleep, once the new wake-up is registered,
// so the goroutine's step between two sleeps happens at one scenario time.
// Call Release before the goroutine blocks on anything but the clock (a
// channel, a lock held by another actor) and when it ends.
type Lane struct {
	c       *Virtual
	mu      sync.Mutex
	release func()
}

type laneKey struct{}

// WithLane returns ctx bound to a new lane of c, and the lane.
func (c *Virtual) WithLane(ctx context.Context) (context.Context, *Lane) {
	l := &Lane{c: c}
	return context.WithValue(ctx, laneKey{}, l), l
}

// Adopt hands a hold to the lane (for example the hold of a message the
// goroutine received): the lane releases it at its next Sleep, once the
// wake-up is registered, or at Release. A hold already parked in the lane
// is released first.
func (l *Lane) Adopt(release func()) { l.adopt(release) }

func (l *Lane) adopt(release func()) {
	l.mu.Lock()
	old := l.release
	l.release = release
	l.mu.Unlock()
	if old != nil {
		old()
	}
}

// Release releases the hold parked in the lane, if any.
func (l *Lane) Release() { l.adopt(nil) }

// StepResult says what Step did.
type StepResult int

const (
	// Fired: the next event fired.
	Fired StepResult = iota
	// Held: something is active; the clock did not move.
	Held
	// Idle: nothing is active and no event is pending: the simulation is over.
	Idle
)

func (r StepResult) String() string {
	switch r {
	case Fired:
		return "fired"
	case Held:
		return "held"
	case Idle:
		return "idle"
	}
	return "unknown"
}

// Step fires the next event if nothing is active, and runs its callback (an
// AfterFunc) to completion. It does not wait, and does not close Done; Run
// is Step in a loop that waits while Held. Do not call Step while Run runs.
func (c *Virtual) Step() StepResult {
	c.stepMu.Lock()
	defer c.stepMu.Unlock()
	return c.step()
}

func (c *Virtual) step() StepResult {
	c.mu.Lock()
	if c.holds > 0 {
		c.mu.Unlock()
		return Held
	}
	if len(c.queue) == 0 {
		c.mu.Unlock()
		return Idle
	}
	e := heap.Pop(&c.queue).(*event)
	c.now = e.at
	c.fired++
	e.fired = true
	c.holds++ // the sleeper's wake hold, or the callback's
	if e.wake != nil {
		c.mu.Unlock()
		close(e.wake)
		return Fired
	}
	around := c.around
	c.mu.Unlock()
	defer c.End()
	if around != nil {
		around(e.f)
	} else {
		e.f()
	}
	return Fired
}

// Run advances the clock until the simulation is over (nothing active, no
// event pending: Done is closed and Run returns nil), ctx ends (ctx.Err())
// or Stop is called (ErrStopped). Run may be called once.
func (c *Virtual) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("clock: Virtual.Run called twice")
	}
	c.running = true
	c.mu.Unlock()
	c.stepMu.Lock()
	defer c.stepMu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return ErrStopped
		default:
		}
		switch c.step() {
		case Fired:
		case Idle:
			close(c.done)
			return nil
		case Held:
			c.mu.Lock()
			c.waits++
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.stop:
				return ErrStopped
			case <-c.kick:
			}
		}
	}
}

// Stop makes Run return ErrStopped; pending events stay pending.
func (c *Virtual) Stop() { c.stopOnce.Do(func() { close(c.stop) }) }

// Done is closed when Run found the simulation over.
func (c *Virtual) Done() <-chan struct{} { return c.done }
