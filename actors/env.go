package actors

import (
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// Env is what an actor needs from its surroundings.
type Env struct {
	System   *actor.ActorSystem
	Clock    clock.Clock
	Recorder *actor.PID // receives *msg.Event; nil drops events
}

// Seconds converts a scenario duration to float seconds.
func Seconds(d time.Duration) float64 { return d.Seconds() }

// Now returns the scenario time in seconds.
func (e Env) Now() float64 { return e.Clock.Now().Seconds() }

// Event builds an event stamped with the current scenario and wall time.
func (e Env) Event(kind, source, jobID string) *msg.Event {
	return &msg.Event{
		TS:     e.Now(),
		WallS:  e.Clock.Wall().Seconds(),
		Kind:   kind,
		JobId:  jobID,
		Source: source,
	}
}

// Emit sends an event to the recorder.
func (e Env) Emit(ev *msg.Event) {
	if e.Recorder == nil || e.System == nil {
		return
	}
	e.System.Root.Send(e.Recorder, ev)
}

// After delivers message to pid once the scenario duration d has passed.
// The returned function cancels the delivery. Under a clock with its own
// timers (clock.Timers: the simulation's virtual clock) the delivery is an
// event of that clock; otherwise it is a wall timer of ToWall(d).
func (e Env) After(d time.Duration, pid *actor.PID, message interface{}) (cancel func()) {
	if t, ok := e.Clock.(clock.Timers); ok {
		stop := t.AfterFunc(d, func() { e.System.Root.Send(pid, message) })
		return func() { stop() }
	}
	t := time.AfterFunc(e.Clock.ToWall(d), func() { e.System.Root.Send(pid, message) })
	return func() { t.Stop() }
}

// Every delivers message to pid every scenario duration d until cancelled.
// Under a clock with its own timers each delivery is an event of that clock
// that arms the next one.
func (e Env) Every(d time.Duration, pid *actor.PID, message func() interface{}) (cancel func()) {
	if t, ok := e.Clock.(clock.Timers); ok {
		return everyOn(t, d, func() { e.System.Root.Send(pid, message()) })
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(e.Clock.ToWall(d))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				e.System.Root.Send(pid, message())
			}
		}
	}()
	var closed bool
	return func() {
		if !closed {
			closed = true
			close(done)
		}
	}
}

// everyOn runs f every d on the clock's timers until cancelled; a d <= 0
// counts as one nanosecond, so the clock still advances between rounds.
func everyOn(t clock.Timers, d time.Duration, f func()) (cancel func()) {
	if d <= 0 {
		d = time.Nanosecond
	}
	var mu sync.Mutex
	var stop func() bool
	stopped := false
	var arm func()
	arm = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		stop = t.AfterFunc(d, func() {
			f()
			arm()
		})
	}
	arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if stop != nil {
			stop()
		}
	}
}

// Go runs f, work an actor hands off so that its handler returns at once
// (a link measurement). On a clock that counts activity (clock.Activity:
// the simulation) f runs on the caller's goroutine before Go returns: the
// simulation's work is instantaneous, and running it inline keeps the clock
// from advancing before f's messages are sent and keeps their order
// deterministic. Elsewhere f runs on a goroutine of its own.
func (e Env) Go(f func()) {
	if _, ok := e.Clock.(clock.Activity); ok {
		f()
		return
	}
	go f()
}

// Itoa is strconv.Itoa for event fields.
func Itoa(i int) string { return strconv.Itoa(i) }

// QuietLogging keeps protoactor's own logging (system start, every dead
// letter at INFO) to errors only, so runs and tests stay readable.
func QuietLogging() actor.ConfigOption {
	return actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	})
}
