package ptimer

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
)

func TestAtNeverEarlyAndAllRun(t *testing.T) {
	l := New()
	defer l.Close()
	if l.Mode() != "timerfd" {
		t.Logf("mode %s", l.Mode())
	}
	const n = 200
	var mu sync.Mutex
	early := 0
	ran := 0
	start := time.Now()
	for i := range n {
		dl := start.Add(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if i%7 == 0 {
			dl = start.Add(-time.Millisecond) // already due
		}
		l.At(dl, func() {
			now := time.Now()
			mu.Lock()
			if now.Before(dl) {
				early++
			}
			ran++
			mu.Unlock()
		})
	}
	waittest.Until(t, 10*time.Second, "all callbacks", func() bool { mu.Lock(); defer mu.Unlock(); return ran == n })
	if early != 0 {
		t.Fatalf("%d callbacks ran before their deadline", early)
	}
	if s := l.Lateness(); s.Count != n {
		t.Fatalf("lateness count %d, want %d", s.Count, n)
	}
}

func TestAtOrder(t *testing.T) {
	l := New()
	defer l.Close()
	gate := make(chan struct{})
	entered := make(chan struct{})
	// Hold the timer thread so the following entries queue up.
	l.At(time.Now(), func() { close(entered); <-gate })
	<-entered
	base := time.Now().Add(-time.Second) // all due once the gate opens
	const n = 100
	perm := rand.Perm(n)
	var got []int
	var mu sync.Mutex
	for _, k := range perm {
		k := k
		l.At(base.Add(time.Duration(k/2)*time.Microsecond), func() { mu.Lock(); got = append(got, k); mu.Unlock() })
	}
	close(gate)
	waittest.Until(t, 5*time.Second, "callbacks", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
	// Deadlines ascend; equal deadlines (k/2) keep insertion order.
	pos := make(map[int]int, n)
	for i, k := range perm {
		pos[k] = i
	}
	for i := 1; i < n; i++ {
		a, b := got[i-1], got[i]
		if a/2 > b/2 || (a/2 == b/2 && pos[a] > pos[b]) {
			t.Fatalf("out of order at %d: %v", i, got)
		}
	}
}

func TestEarlierDeadlineInterruptsSleep(t *testing.T) {
	l := New()
	defer l.Close()
	late := make(chan struct{})
	l.At(time.Now().Add(time.Hour), func() { close(late) })
	// Let the thread go to sleep for the hour.
	waittest.Until(t, 5*time.Second, "thread asleep", func() bool { return l.state.Load() == stateSleeping })
	fired := make(chan struct{})
	l.At(time.Now().Add(500*time.Microsecond), func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("an earlier deadline did not interrupt the sleep")
	}
	select {
	case <-late:
		t.Fatal("the hour callback ran early")
	default:
	}
}

func TestSleepUntil(t *testing.T) {
	l := New()
	defer l.Close()
	ctx := context.Background()
	for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond} {
		dl := time.Now().Add(d)
		if err := l.SleepUntil(ctx, dl); err != nil {
			t.Fatalf("SleepUntil(%v): %v", d, err)
		}
		if time.Now().Before(dl) {
			t.Fatalf("SleepUntil(%v) returned before the deadline", d)
		}
	}
	if err := l.Sleep(ctx, 100*time.Microsecond); err != nil {
		t.Fatal(err)
	}
}

func TestSleepCancel(t *testing.T) {
	l := New()
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Sleep(ctx, time.Minute) }()
	// Short waits register on the line immediately; long ones first sleep on
	// a Go timer. Either way cancel must end them.
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not end the sleep")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { errc <- l.Sleep(ctx2, time.Millisecond*1) }()
	cancel2()
	err := <-errc
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	waittest.Until(t, 5*time.Second, "cancelled entry removed or fired", func() bool { return l.Pending() == 0 })
	if err := l.Sleep(ctx2, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep on a done context: %v", err)
	}
}

func TestCloseRunsPendingAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	l := New()
	done := make(chan struct{})
	l.At(time.Now().Add(20*time.Millisecond), func() { close(done) })
	l.Close()
	l.Close() // idempotent
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pending callback lost on Close")
	}
	after := make(chan struct{})
	l.At(time.Now(), func() { close(after) })
	select {
	case <-after:
	case <-time.After(10 * time.Second):
		t.Fatal("At after Close did not run")
	}
	waittest.Until(t, 5*time.Second, "timer goroutine exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestDefaultIsSharedAndNotClosable(t *testing.T) {
	a, b := Default(), Default()
	if a != b {
		t.Fatal("Default returned two lines")
	}
	a.Close()
	ch := make(chan struct{})
	a.At(time.Now().Add(100*time.Microsecond), func() { close(ch) })
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("default line stopped after Close")
	}
	if a.stop.Load() {
		t.Fatal("Close closed the default line")
	}
	if err := SetDefaultOptions(Options{}); err == nil {
		t.Fatal("SetDefaultOptions accepted after the default line started")
	}
}

func TestCancelledEntryDoesNotRun(t *testing.T) {
	l := New()
	defer l.Close()
	ran := make(chan struct{}, 1)
	e := l.schedule(l.mono(time.Now().Add(20*time.Millisecond)), 0, func() { ran <- struct{}{} })
	if !l.cancel(e) {
		t.Fatal("cancel of a pending entry failed")
	}
	if l.cancel(e) {
		t.Fatal("second cancel succeeded")
	}
	done := make(chan struct{})
	l.At(time.Now().Add(40*time.Millisecond), func() { close(done) })
	<-done // the line has passed the cancelled deadline
	select {
	case <-ran:
		t.Fatal("cancelled callback ran")
	default:
	}
	if p := l.Pending(); p != 0 {
		t.Fatalf("Pending() = %d", p)
	}
}

func TestConcurrentAt(t *testing.T) {
	l := New()
	defer l.Close()
	const goroutines, per = 8, 200
	var mu sync.Mutex
	count := 0
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				l.At(time.Now().Add(time.Duration((g*per+i)%500)*time.Microsecond), func() {
					mu.Lock()
					count++
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	waittest.Until(t, 10*time.Second, "all callbacks", func() bool { mu.Lock(); defer mu.Unlock(); return count == goroutines*per })
	if p := l.Pending(); p != 0 {
		t.Fatalf("Pending() = %d after everything ran", p)
	}
}

// A tolerant callback runs at or after its deadline, never before, and the
// thread sleeps to it instead of spinning.
func TestAtWithinDoesNotSpin(t *testing.T) {
	l := New()
	defer l.Close()
	const n = 50
	late := make(chan time.Duration, n)
	for i := range n {
		at := time.Now().Add(time.Duration(2+i%5) * time.Millisecond)
		l.AtWithin(at, time.Second, func() { late <- time.Since(at) })
		time.Sleep(time.Millisecond / 2)
	}
	for range n {
		if d := <-late; d < 0 {
			t.Fatalf("a tolerant callback ran %v early", -d)
		}
	}
	// Spinning for each would take tens of ms; only the sub-µs gap between
	// the kernel's clock and Go's may be spun.
	if s := l.SpinTime(); s > time.Millisecond {
		t.Fatalf("the line spun %v for tolerant callbacks", s)
	}
}
