package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/internal/waittest"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// waitLimit is how long a test waits for another goroutine to get somewhere.
const waitLimit = 10 * time.Second

type gated struct{ gate <-chan struct{} }

// accountings are the ways a simulation's actors can count as activity:
// each alone must keep the clock from advancing while messages are in
// flight; the runtime uses both.
func accountings(clk *clock.Virtual) map[string]func(*actor.Props) *actor.Props {
	return map[string]func(*actor.Props) *actor.Props{
		"mailbox counter": func(p *actor.Props) *actor.Props {
			return p.Configure(actor.WithMailbox(actor.Unbounded(Counter{A: clk})))
		},
		"serial dispatcher": func(p *actor.Props) *actor.Props {
			return p.Configure(actor.WithDispatcher(&Serial{A: clk}))
		},
		"runtime": NewRuntime(clk).Props,
	}
}

func forEachAccounting(t *testing.T, f func(t *testing.T, clk *clock.Virtual, props func(*actor.Props) *actor.Props)) {
	for _, name := range []string{"mailbox counter", "serial dispatcher", "runtime"} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewVirtual()
			f(t, clk, accountings(clk)[name])
		})
	}
}

// A message being handled keeps the clock where it is: while the receiver's
// handler is blocked the clock reports Held and does not fire the pending
// event; once the handler returns the event fires.
func TestMessageInFlightHoldsTheClock(t *testing.T) {
	forEachAccounting(t, testMessageInFlight)
}

func testMessageInFlight(t *testing.T, clk *clock.Virtual, props func(*actor.Props) *actor.Props) {
	system := quietSystem(t)
	var handled atomic.Int32
	pid := system.Root.Spawn(props(actor.PropsFromFunc(func(ctx actor.Context) {
		if g, ok := ctx.Message().(gated); ok {
			<-g.gate
			handled.Add(1)
		}
	})))
	waittest.Until(t, waitLimit, "the actor to start", func() bool { return clk.Active() == 0 })
	fired := false
	clk.AfterFunc(10*time.Second, func() { fired = true })
	gate := make(chan struct{})
	system.Root.Send(pid, gated{gate: gate})
	for i := 0; i < 100; i++ {
		if r := clk.Step(); r != clock.Held {
			t.Fatalf("step %d with a message in its handler: %v, want held", i, r)
		}
	}
	if clk.Now() != 0 || fired {
		t.Fatalf("clock moved to %v (fired %v) while a message was being handled", clk.Now(), fired)
	}
	close(gate)
	waittest.Until(t, waitLimit, "the handler to return", func() bool { return clk.Step() != clock.Held })
	if !fired || clk.Now() != 10*time.Second || handled.Load() != 1 {
		t.Fatalf("after the handler: fired %v at %v, handled %d; want fired at 10s, handled 1", fired, clk.Now(), handled.Load())
	}
}

type hop struct{ left int }

// A cascade of messages started by one event ends before the next event
// fires: every hop of a 200-hop relay between two actors happens at the
// time of the event that started it.
func TestCascadeSettlesBeforeTheNextEvent(t *testing.T) {
	forEachAccounting(t, testCascade)
}

func testCascade(t *testing.T, clk *clock.Virtual, props func(*actor.Props) *actor.Props) {
	system := quietSystem(t)
	var mu sync.Mutex
	var at []time.Duration
	var a, b *actor.PID
	relay := func(next func() *actor.PID) actor.ReceiveFunc {
		return func(ctx actor.Context) {
			if h, ok := ctx.Message().(hop); ok {
				mu.Lock()
				at = append(at, clk.Now())
				mu.Unlock()
				if h.left > 0 {
					ctx.Send(next(), hop{left: h.left - 1})
				}
			}
		}
	}
	a = system.Root.Spawn(props(actor.PropsFromFunc(relay(func() *actor.PID { return b }))))
	b = system.Root.Spawn(props(actor.PropsFromFunc(relay(func() *actor.PID { return a }))))
	clk.AfterFunc(time.Second, func() { system.Root.Send(a, hop{left: 199}) })
	var seen int
	clk.AfterFunc(2*time.Second, func() {
		mu.Lock()
		seen = len(at)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if seen != 200 {
		t.Fatalf("the event at 2s saw %d hops of 200: the clock advanced with messages in flight", seen)
	}
	for i, d := range at {
		if d != time.Second {
			t.Fatalf("hop %d at %v, want 1s", i, d)
		}
	}
}

type tick struct{}

// Env.After and Env.Every under the virtual clock deliver at scenario
// times, as clock events, and their cancel stops them.
func TestEnvTimersOnTheVirtualClock(t *testing.T) {
	clk := clock.NewVirtual()
	rt := NewRuntime(clk)
	system := quietSystem(t)
	env := actors.Env{System: system, Clock: clk}
	var mu sync.Mutex
	var ticks []time.Duration
	var after time.Duration
	pid := system.Root.Spawn(rt.Props(actor.PropsFromFunc(func(ctx actor.Context) {
		mu.Lock()
		defer mu.Unlock()
		switch ctx.Message().(type) {
		case tick:
			ticks = append(ticks, clk.Now())
		case string:
			after = clk.Now()
		}
	})))
	cancel := env.Every(10*time.Second, pid, func() interface{} { return tick{} })
	env.After(25*time.Second, pid, "after")
	dropped := env.After(5*time.Second, pid, "dropped")
	dropped()
	clk.AfterFunc(35*time.Second, cancel)
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if err := clk.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}
	if len(ticks) != len(want) || ticks[0] != want[0] || ticks[1] != want[1] || ticks[2] != want[2] {
		t.Fatalf("ticks at %v, want %v", ticks, want)
	}
	if after != 25*time.Second {
		t.Fatalf("After delivered at %v, want 25s (the cancelled one must not deliver)", after)
	}
}

func testMatrix(t *testing.T) netem.Matrix {
	t.Helper()
	m, err := netem.Preset("das3", []string{netem.Vrije, netem.Leiden})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Predictions against hand-computed ones from the applications' own
// figures.
func TestModelPredict(t *testing.T) {
	links := testMatrix(t)
	m := NewModel(map[string]float64{netem.Vrije: 0.5, netem.Leiden: 1}, links)
	prime, _ := apps.Lookup("prime")
	nom, err := apps.NominalArgs(prime, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	wave, _ := apps.Lookup("wave")
	tr, err := apps.TrafficOf(wave, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	vl, _ := links.Link(netem.Vrije, netem.Leiden)
	ll, _ := links.Link(netem.Leiden, netem.Leiden)
	for _, c := range []struct {
		name     string
		app      string
		clusters []string
		want     time.Duration
	}{
		{"compute-bound on the reference speed", "prime", rep(netem.Leiden, 8), nom},
		{"compute-bound at half speed takes twice", "prime", rep(netem.Vrije, 8), 2 * nom},
		{"co-allocated: the slowest processors set the pace", "prime", append(rep(netem.Leiden, 4), rep(netem.Vrije, 4)...), 2 * nom},
		{"one cluster: its own link", "wave", rep(netem.Leiden, 8), time.Duration(tr.Iterations * float64(tr.On(ll.Latency, ll.Bandwidth)))},
		{"two clusters: the wide-area link, the slower speed", "wave", append(rep(netem.Leiden, 4), rep(netem.Vrije, 4)...),
			2 * time.Duration(tr.Iterations*float64(tr.On(vl.Latency, vl.Bandwidth)))},
	} {
		got, err := m.Predict(c.app, nil, c.clusters)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	one, _ := m.Predict("wave", nil, rep(netem.Leiden, 8))
	two, _ := m.Predict("wave", nil, append(rep(netem.Leiden, 4), rep(netem.Leiden, 4)...))
	wide, _ := m.Predict("wave", nil, append(rep(netem.Leiden, 4), rep(netem.Vrije, 4)...))
	if one != two || wide <= one {
		t.Errorf("wave: one cluster %v, same cluster again %v, across the wide area %v: want equal, then slower", one, two, wide)
	}
	if _, err := m.Predict("ft", nil, rep(netem.Leiden, 4)); !errors.Is(err, ErrMalleable) {
		t.Errorf("ft: %v, want ErrMalleable", err)
	}
	if _, err := m.Predict("nope", nil, rep(netem.Leiden, 4)); err == nil {
		t.Error("an unknown application was predicted")
	}
	if _, err := m.Predict("prime", nil, nil); err == nil {
		t.Error("a job without ranks was predicted")
	}
}

func rep(c string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// The prober answers from the matrix without sending anything.
func TestProberReadsTheMatrix(t *testing.T) {
	links := testMatrix(t)
	p := Prober{Cluster: netem.Vrije, Model: NewModel(nil, links)}
	lat, bw, err := p.Measure(context.Background(), netem.Leiden, p.Addr(), 1<<20)
	want, _ := links.Link(netem.Vrije, netem.Leiden)
	if err != nil || lat != want.Latency || bw != want.Bandwidth {
		t.Fatalf("measure: %v %v %v, want %v %v", lat, bw, err, want.Latency, want.Bandwidth)
	}
	if _, _, err := p.Measure(context.Background(), "nowhere", "", 0); err == nil {
		t.Fatal("an unknown cluster was measured")
	}
}

// The watchdog reports a clock held with no event firing, and stays quiet
// once stopped.
func TestWatchReportsAStuckClock(t *testing.T) {
	clk := clock.NewVirtual()
	release := clk.Hold()
	defer release()
	got := make(chan string, 1)
	stop := Watch(clk, 20*time.Millisecond, func(reason string) { got <- reason })
	defer stop()
	select {
	case r := <-got:
		if r == "" {
			t.Fatal("stuck without a reason")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a clock held with no event was not reported")
	}
	idle := clock.NewVirtual()
	calls := make(chan string, 1)
	stopIdle := Watch(idle, time.Millisecond, func(reason string) { calls <- reason })
	// An idle clock (nothing active) is never stuck: wait for the watch to
	// have looked many times, through the clock's own wall time.
	waittest.Until(t, waitLimit, "the watch to look", func() bool { return idle.Wall() > 50*time.Millisecond })
	stopIdle()
	select {
	case r := <-calls:
		t.Fatalf("an idle clock was reported stuck: %s", r)
	default:
	}
}

// A handler that panics leaves its message unended: the clock stays held
// (it never runs ahead of the lost work) and the watchdog reports it.
func TestPanickingHandlerHoldsTheClock(t *testing.T) {
	clk := clock.NewVirtual()
	rt := NewRuntime(clk)
	system := quietSystem(t)
	pid := system.Root.Spawn(rt.Props(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			panic("boom")
		}
	})))
	waittest.Until(t, waitLimit, "the actor to start", func() bool { return clk.Active() == 0 })
	clk.AfterFunc(time.Second, func() {})
	system.Root.Send(pid, "boom")
	got := make(chan string, 1)
	stop := Watch(clk, 50*time.Millisecond, func(reason string) { got <- reason })
	defer stop()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("a panicked handler's message was not reported stuck")
	}
	if r := clk.Step(); r != clock.Held || clk.Now() != 0 {
		t.Fatalf("after a panic: step %v at %v; want held at 0", r, clk.Now())
	}
}

// A clock callback's messages are handled by the runtime after the
// callback has returned, in the order they were sent, with every handler's
// own sends after them, and before the clock fires the next event (which
// here is due at the same time).
func TestCallbackCascadeRunsAfterTheCallback(t *testing.T) {
	clk := clock.NewVirtual()
	rt := NewRuntime(clk)
	system := quietSystem(t)
	var log []string // only touched by handlers and callbacks, one at a time
	var b *actor.PID
	a := system.Root.Spawn(rt.Props(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(string); ok {
			log = append(log, "a:"+m)
			ctx.Send(b, m+"+")
		}
	})))
	b = system.Root.Spawn(rt.Props(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(string); ok {
			log = append(log, "b:"+m)
		}
	})))
	waittest.Until(t, waitLimit, "the actors to start", func() bool { return clk.Active() == 0 })
	clk.AfterFunc(time.Second, func() {
		system.Root.Send(a, "1")
		system.Root.Send(b, "2")
		log = append(log, "callback")
	})
	clk.AfterFunc(time.Second, func() { log = append(log, "next") })
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if err := clk.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"callback", "a:1", "b:2", "b:1+", "next"}
	if len(log) != len(want) {
		t.Fatalf("log %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("log %v, want %v", log, want)
		}
	}
}

// quietSystem is an actor system that logs nothing, shut down when the
// test ends.
func quietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(system.Shutdown)
	return system
}
