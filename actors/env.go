package actors

import (
	"log/slog"
	"os"
	"strconv"
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
// The returned function cancels the delivery.
func (e Env) After(d time.Duration, pid *actor.PID, message interface{}) (cancel func()) {
	t := time.AfterFunc(e.Clock.ToWall(d), func() { e.System.Root.Send(pid, message) })
	return func() { t.Stop() }
}

// Every delivers message to pid every scenario duration d until cancelled.
func (e Env) Every(d time.Duration, pid *actor.PID, message func() interface{}) (cancel func()) {
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

// Itoa is strconv.Itoa for event fields.
func Itoa(i int) string { return strconv.Itoa(i) }

// QuietLogging keeps protoactor's own logging (system start, every dead
// letter at INFO) to errors only, so runs and tests stay readable.
func QuietLogging() actor.ConfigOption {
	return actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	})
}
