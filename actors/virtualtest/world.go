package virtualtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// World is one virtual-clock actor system of a test.
type World struct {
	T       testing.TB
	Clock   *clock.Virtual
	System  *actor.ActorSystem
	Env     actors.Env
	mailbox actor.MailboxProducer
	release func()

	mu     sync.Mutex
	events []*msg.Event
	inbox  []any
	probe  *actor.PID
}

// counter makes message delivery activity of the clock.
type counter struct{ c *clock.Virtual }

func (counter) MailboxStarted()               {}
func (k counter) MessagePosted(interface{})   { k.c.Begin() }
func (k counter) MessageReceived(interface{}) { k.c.End() }
func (counter) MailboxEmpty()                 {}
func (w *World) counted(p *actor.Props) *actor.Props {
	return p.Configure(actor.WithMailbox(w.mailbox))
}

// New returns a world at scenario time 0, held until Run.
func New(t testing.TB) *World {
	w := &World{T: t, Clock: clock.NewVirtual(), System: actor.NewActorSystem(actors.QuietLogging())}
	w.mailbox = actor.Unbounded(counter{w.Clock})
	w.release = w.Clock.Hold()
	t.Cleanup(w.System.Shutdown)
	rec, err := w.System.Root.SpawnNamed(w.counted(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok {
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	})), "recorder")
	if err != nil {
		t.Fatal(err)
	}
	w.Env = actors.Env{System: w.System, Clock: w.Clock, Recorder: rec}
	w.probe, err = w.System.Root.SpawnNamed(w.counted(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case actor.SystemMessage, actor.AutoReceiveMessage:
			return
		}
		w.mu.Lock()
		w.inbox = append(w.inbox, ctx.Message())
		w.mu.Unlock()
	})), "probe")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Spawn spawns props (its mailbox counted on the clock) under name.
func (w *World) Spawn(p *actor.Props, name string) *actor.PID {
	w.T.Helper()
	pid, err := w.System.Root.SpawnNamed(w.counted(p), name)
	if err != nil {
		w.T.Fatal(err)
	}
	return pid
}

// Probe is an actor that keeps every message sent to it (Inbox).
func (w *World) Probe() *actor.PID { return w.probe }

// At runs f at scenario instant at (f must not block; it may Send).
func (w *World) At(at time.Duration, f func()) { w.Clock.AfterFunc(at, f) }

// Send sends m to pid at scenario instant at.
func (w *World) Send(at time.Duration, pid *actor.PID, m any) {
	w.At(at, func() { w.System.Root.Send(pid, m) })
}

// Run lets the clock go until nothing is pending or until the scenario
// instant until (0: no limit), failing the test after 30 s of wall time.
func (w *World) Run(until time.Duration) {
	w.T.Helper()
	if until > 0 {
		w.Clock.AfterFunc(until, w.Clock.Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.release()
	w.release = func() {}
	err := w.Clock.Run(ctx)
	if ctx.Err() != nil {
		w.T.Fatalf("virtual world: run did not finish: %v", ctx.Err())
	}
	if err != nil && err != clock.ErrStopped {
		w.T.Fatalf("virtual world: %v", err)
	}
}

// Events returns the events of the given kinds ("" or none: every event),
// in the order the recorder got them.
func (w *World) Events(kinds ...string) []*msg.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*msg.Event
	for _, ev := range w.events {
		if len(kinds) == 0 {
			out = append(out, ev)
			continue
		}
		for _, k := range kinds {
			if ev.Kind == k {
				out = append(out, ev)
				break
			}
		}
	}
	return out
}

// Inbox returns the messages the probe got, in order.
func (w *World) Inbox() []any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]any(nil), w.inbox...)
}
