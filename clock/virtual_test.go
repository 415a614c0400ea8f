package clock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
)

// waitLimit is how long a test waits for another goroutine to get somewhere.
const waitLimit = 10 * time.Second

// runAsync runs c in a goroutine and returns its result channel.
func runAsync(c *Virtual) <-chan error {
	out := make(chan error, 1)
	go func() { out <- c.Run(context.Background()) }()
	return out
}

// finish waits for Run's result with a deadline.
func finish(t *testing.T, res <-chan error) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// waitGroup waits for wg with a deadline: actors left blocked after Run
// returned mean the clock ran ahead of one of them and ended the simulation.
func waitGroup(t *testing.T, wg *sync.WaitGroup, c *Virtual) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("actors still blocked after the simulation ended at %v: the clock ran ahead of one of them", c.Now())
	}
}

type stamp struct {
	name string
	at   time.Duration
}

func TestVirtualOrder(t *testing.T) {
	c := NewVirtual()
	var got []stamp
	for _, x := range []struct {
		name string
		d    time.Duration
	}{{"five", 5 * time.Second}, {"one", time.Second}, {"three", 3 * time.Second}} {
		c.AfterFunc(x.d, func() { got = append(got, stamp{x.name, c.Now()}) })
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []stamp{{"one", time.Second}, {"three", 3 * time.Second}, {"five", 5 * time.Second}}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
	if c.Now() != 5*time.Second || c.Fired() != 3 {
		t.Fatalf("Now %v fired %d, want 5s and 3", c.Now(), c.Fired())
	}
}

func TestVirtualSimultaneousFIFO(t *testing.T) {
	c := NewVirtual()
	var got []string
	add := func(name string, d time.Duration, then func()) {
		c.AfterFunc(d, func() {
			got = append(got, fmt.Sprintf("%s@%v", name, c.Now()))
			if then != nil {
				then()
			}
		})
	}
	add("a", 2*time.Second, nil)
	add("b", time.Second, func() { add("f", 0, nil) }) // registered at 1s, after e
	add("c", 2*time.Second, nil)
	add("d", 2*time.Second, nil)
	add("e", time.Second, nil)
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"b@1s", "e@1s", "f@1s", "a@2s", "c@2s", "d@2s"}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestVirtualNoAdvanceWhileHeld(t *testing.T) {
	c := NewVirtual()
	fired := false
	c.AfterFunc(time.Second, func() { fired = true })
	release := c.Hold()
	if r := c.Step(); r != Held {
		t.Fatalf("Step while held = %v, want held", r)
	}
	if fired || c.Now() != 0 {
		t.Fatalf("advanced while held: fired %v now %v", fired, c.Now())
	}
	release()
	release() // idempotent
	if c.Active() != 0 {
		t.Fatalf("Active after release = %d, want 0", c.Active())
	}
	if r := c.Step(); r != Fired || !fired || c.Now() != time.Second {
		t.Fatalf("Step after release = %v fired %v now %v, want fired at 1s", r, fired, c.Now())
	}
	if r := c.Step(); r != Idle {
		t.Fatalf("Step with nothing pending = %v, want idle", r)
	}
}

func TestVirtualRunWaitsForRelease(t *testing.T) {
	c := NewVirtual()
	release := c.Hold()
	c.AfterFunc(time.Second, func() {})
	res := runAsync(c)
	// Run has looked at least once and found the clock held.
	waittest.Until(t, waitLimit, "Run to wait on the hold", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waits > 0
	})
	if c.Fired() != 0 || c.Now() != 0 {
		t.Fatalf("advanced while held: fired %d now %v", c.Fired(), c.Now())
	}
	select {
	case <-c.Done():
		t.Fatal("Done closed while held")
	default:
	}
	release()
	if err := finish(t, res); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if c.Fired() != 1 || c.Now() != time.Second {
		t.Fatalf("after release: fired %d now %v, want 1 at 1s", c.Fired(), c.Now())
	}
}

func TestVirtualSleepCancel(t *testing.T) {
	c := NewVirtual()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Sleep(ctx, 10*time.Second) }()
	waittest.Until(t, waitLimit, "the sleep to register", func() bool { return c.Pending() == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled Sleep did not return")
	}
	if c.Pending() != 0 || c.Active() != 0 {
		t.Fatalf("after cancel: pending %d active %d, want 0 and 0", c.Pending(), c.Active())
	}
	if r := c.Step(); r != Idle || c.Now() != 0 {
		t.Fatalf("Step = %v now %v, want idle at 0", r, c.Now())
	}
	if err := c.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled ctx = %v, want context.Canceled", err)
	}
	if c.Pending() != 0 {
		t.Fatal("Sleep on a cancelled ctx registered an event")
	}
}

func TestVirtualSleepHeldKeepsTheClock(t *testing.T) {
	c := NewVirtual()
	c.AfterFunc(5*time.Second, func() {})
	type woke struct {
		release func()
		err     error
	}
	wc := make(chan woke, 1)
	go func() {
		r, err := c.SleepHeld(context.Background(), 2*time.Second)
		wc <- woke{r, err}
	}()
	waittest.Until(t, waitLimit, "the sleep to register", func() bool { return c.Pending() == 2 })
	if r := c.Step(); r != Fired || c.Now() != 2*time.Second {
		t.Fatalf("Step = %v now %v, want the sleeper fired at 2s", r, c.Now())
	}
	w := <-wc
	if w.err != nil {
		t.Fatalf("SleepHeld: %v", w.err)
	}
	// The sleeper has returned and still holds the clock.
	if r := c.Step(); r != Held || c.Now() != 2*time.Second {
		t.Fatalf("Step before the sleeper released = %v now %v, want held at 2s", r, c.Now())
	}
	w.release()
	if r := c.Step(); r != Fired || c.Now() != 5*time.Second {
		t.Fatalf("Step after release = %v now %v, want fired at 5s", r, c.Now())
	}
}

func TestVirtualLaneKeepsTheWakeHold(t *testing.T) {
	c := NewVirtual()
	c.AfterFunc(5*time.Second, func() {})
	ctx, lane := c.WithLane(context.Background())
	woke := make(chan error, 1)
	next := make(chan struct{})
	go func() {
		err := c.Sleep(ctx, time.Second)
		if err == nil {
			err = c.Sleep(ctx, 0) // returns at once and keeps the hold
		}
		woke <- err
		<-next
		woke <- c.Sleep(ctx, time.Second) // registers at 2s, then releases
	}()
	waittest.Until(t, waitLimit, "the sleep to register", func() bool { return c.Pending() == 2 })
	if r := c.Step(); r != Fired || c.Now() != time.Second {
		t.Fatalf("Step = %v now %v, want the sleeper at 1s", r, c.Now())
	}
	if err := <-woke; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if r := c.Step(); r != Held || c.Active() != 1 {
		t.Fatalf("after the lane woke: Step = %v, active %d; want held by the lane", r, c.Active())
	}
	close(next)
	waittest.Until(t, waitLimit, "the lane to sleep again", func() bool { return c.Active() == 0 })
	if r := c.Step(); r != Fired || c.Now() != 2*time.Second {
		t.Fatalf("Step = %v now %v, want the lane's second wake-up at 2s", r, c.Now())
	}
	if err := <-woke; err != nil {
		t.Fatalf("second Sleep: %v", err)
	}
	lane.Release()
	lane.Release()
	if r := c.Step(); r != Fired || c.Now() != 5*time.Second {
		t.Fatalf("Step after Release = %v now %v, want 5s", r, c.Now())
	}
}

func TestVirtualPlainSleep(t *testing.T) {
	c := NewVirtual()
	start := c.Hold()
	res := runAsync(c)
	errc := make(chan error, 1)
	var at time.Duration
	go func() {
		err := c.Sleep(context.Background(), 7*time.Second)
		at = c.Now()
		errc <- err
	}()
	waittest.Until(t, waitLimit, "the sleep to register", func() bool { return c.Pending() == 1 })
	start()
	if err := <-errc; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if err := finish(t, res); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if at != 7*time.Second || c.Active() != 0 {
		t.Fatalf("woke at %v with %d active, want 7s and 0", at, c.Active())
	}
}

func TestVirtualAfterFuncStop(t *testing.T) {
	c := NewVirtual()
	ran := map[string]bool{}
	stopA := c.AfterFunc(time.Second, func() { ran["a"] = true })
	stopB := c.AfterFunc(2*time.Second, func() { ran["b"] = true })
	if !stopB() {
		t.Fatal("stop before firing = false, want true")
	}
	if stopB() {
		t.Fatal("second stop = true, want false")
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !ran["a"] || ran["b"] || c.Now() != time.Second {
		t.Fatalf("ran %v now %v, want a only, at 1s", ran, c.Now())
	}
	if stopA() {
		t.Fatal("stop after firing = true, want false")
	}
}

func TestVirtualEndWithoutBegin(t *testing.T) {
	c := NewVirtual()
	defer func() {
		if recover() == nil {
			t.Fatal("End without Begin did not panic")
		}
	}()
	c.End()
}

func TestVirtualRunOnceAndStop(t *testing.T) {
	c := NewVirtual()
	release := c.Hold()
	res := runAsync(c)
	waittest.Until(t, waitLimit, "Run to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waits > 0
	})
	if err := c.Run(context.Background()); err == nil {
		t.Fatal("second Run = nil, want an error")
	}
	c.Stop()
	if err := finish(t, res); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop = %v, want ErrStopped", err)
	}
	release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewVirtual().Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestVirtualWallFactor(t *testing.T) {
	c := NewVirtual()
	if c.ToWall(time.Hour) != 0 {
		t.Fatalf("ToWall = %v, want 0", c.ToWall(time.Hour))
	}
	c.AfterFunc(1000*time.Hour, func() {})
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	w := c.Wall()
	if w <= 0 {
		t.Fatalf("Wall = %v, want > 0", w)
	}
	if f := c.Factor(); f <= 0 {
		t.Fatalf("Factor = %v after 1000 h of scenario time, want > 0", f)
	}
}

// pingPong runs two simulated actors: A sleeps 3 s and sends to B; B sleeps
// 5 s and answers; n rounds. Every message carries a hold; each goroutine
// keeps its wake hold in a lane until its message is sent. A ticker on
// AfterFunc (every second) gives the clock other events to run ahead to.
func pingPong(t *testing.T, n int) (sendsA, sendsB []time.Duration, end time.Duration) {
	c := NewVirtual()
	ctx := context.Background()
	toA, toB := make(chan func()), make(chan func())
	start := c.Hold()
	var tick func()
	tick = func() {
		if c.Now() < time.Duration(n)*8*time.Second {
			c.AfterFunc(time.Second, tick)
		}
	}
	tick()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // A
		defer wg.Done()
		ctx, lane := c.WithLane(ctx)
		lane.Adopt(start)
		for range n {
			if err := c.Sleep(ctx, 3*time.Second); err != nil {
				t.Errorf("A: %v", err)
				return
			}
			runtime.Gosched() // let the clock try to run ahead
			sendsA = append(sendsA, c.Now())
			toB <- c.Hold()
			lane.Release()
			lane.Adopt(<-toA)
		}
		lane.Release()
	}()
	go func() { // B
		defer wg.Done()
		ctx, lane := c.WithLane(ctx)
		for range n {
			lane.Adopt(<-toB)
			if err := c.Sleep(ctx, 5*time.Second); err != nil {
				t.Errorf("B: %v", err)
				return
			}
			runtime.Gosched()
			sendsB = append(sendsB, c.Now())
			toA <- c.Hold()
			lane.Release()
		}
	}()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitGroup(t, &wg, c)
	return sendsA, sendsB, c.Now()
}

func TestVirtualPingPong(t *testing.T) {
	const n = 50
	sendsA, sendsB, end := pingPong(t, n)
	if end != n*8*time.Second {
		t.Fatalf("ended at %v, want %v", end, n*8*time.Second)
	}
	if len(sendsA) != n || len(sendsB) != n {
		t.Fatalf("%d and %d sends, want %d each", len(sendsA), len(sendsB), n)
	}
	for i := range n {
		wantA := time.Duration(8*i+3) * time.Second
		wantB := time.Duration(8*i+8) * time.Second
		if sendsA[i] != wantA || sendsB[i] != wantB {
			t.Fatalf("round %d: A sent at %v, B at %v, want %v and %v", i, sendsA[i], sendsB[i], wantA, wantB)
		}
	}
}

// chatter runs k lane goroutines that sleep 1, 2 or 3 s (seeded per
// goroutine, so many wake-ups coincide) and on every other wake-up send a
// held message to a collector; everything is logged with its scenario time.
// The goroutines start one after the other (each registers its first sleep
// before the next starts), so the sequence of registrations is fixed.
func chatter(t *testing.T, k, rounds int) []string {
	c := NewVirtual()
	ctx := context.Background()
	var mu sync.Mutex
	var log []string
	logf := func(format string, args ...any) {
		mu.Lock()
		log = append(log, fmt.Sprintf("%v ", c.Now())+fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	type note struct {
		from, round int
		release     func()
	}
	inbox := make(chan note)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for m := range inbox {
			logf("collector got %d/%d", m.from, m.round)
			m.release()
		}
	}()
	start := c.Hold()
	var wg sync.WaitGroup
	for id := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, lane := c.WithLane(ctx)
			defer lane.Release()
			rng := rand.New(rand.NewPCG(uint64(id), 7))
			for r := range rounds {
				if err := c.Sleep(ctx, time.Duration(1+rng.IntN(3))*time.Second); err != nil {
					t.Errorf("sleeper %d: %v", id, err)
					return
				}
				logf("%d woke %d", id, r)
				if r%2 == 0 {
					inbox <- note{id, r, c.Hold()}
				}
			}
		}()
		waittest.Until(t, waitLimit, "the sleeper's first registration", func() bool { return c.Pending() == id+1 })
	}
	start()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitGroup(t, &wg, c)
	close(inbox)
	<-collected
	return log
}

func TestVirtualDeterminism(t *testing.T) {
	const k, rounds = 5, 30
	first := chatter(t, k, rounds)
	if want := k*rounds + k*rounds/2; len(first) != want {
		t.Fatalf("%d log lines, want %d", len(first), want)
	}
	for i := range 99 {
		if got := chatter(t, k, rounds); !slices.Equal(got, first) {
			for j := range min(len(got), len(first)) {
				if got[j] != first[j] {
					t.Fatalf("run %d differs at line %d: %q, first run had %q", i+2, j, got[j], first[j])
				}
			}
			t.Fatalf("run %d: %d lines, first run %d", i+2, len(got), len(first))
		}
	}
}

func BenchmarkVirtualTimers(b *testing.B) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = time.Duration(rng.IntN(86_400)) * time.Second
	}
	var events uint64
	b.ResetTimer()
	for b.Loop() {
		c := NewVirtual()
		for _, d := range ds {
			c.AfterFunc(d, func() {})
		}
		if err := c.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		events += c.Fired()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkVirtualSleepers(b *testing.B) {
	const sleepers, rounds = 1000, 100
	var events uint64
	for b.Loop() {
		c := NewVirtual()
		start := c.Hold()
		for i := range sleepers {
			go func() {
				ctx, lane := c.WithLane(context.Background())
				defer lane.Release()
				for range rounds {
					if err := c.Sleep(ctx, time.Duration(1+i%7)*time.Second); err != nil {
						return
					}
				}
			}()
		}
		for c.Pending() < sleepers {
			runtime.Gosched()
		}
		start()
		if err := c.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		events += c.Fired()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// SetAround's function runs every AfterFunc callback, and the clock does
// not move before it returns.
func TestSetAroundRunsCallbacks(t *testing.T) {
	c := NewVirtual()
	var log []string
	c.SetAround(func(f func()) {
		log = append(log, "before")
		f()
		log = append(log, "after")
	})
	c.AfterFunc(time.Second, func() { log = append(log, "f") })
	c.AfterFunc(time.Second, func() { log = append(log, "g") })
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, " "), "before f after before g after"; got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
}
