package waittest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeT records a failure; its Fatalf ends the calling goroutine as
// testing.T's does.
type fakeT struct {
	testing.TB
	fatal string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs Until on f in a goroutine of its own (Fatalf ends it) and says
// whether Until returned.
func call(f *fakeT, within time.Duration, what string, cond func() bool) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(f, within, what, cond)
		returned = true
	}()
	<-done
	return returned
}

// Until returns as soon as the condition holds, calling it no more than
// that, and fails nothing.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	for _, holdsAt := range []int{1, 3} {
		f := &fakeT{TB: t}
		calls := 0
		if !call(f, time.Hour, "the condition", func() bool { calls++; return calls == holdsAt }) {
			t.Fatalf("holds at call %d: Until did not return (%q)", holdsAt, f.fatal)
		}
		if calls != holdsAt || f.fatal != "" {
			t.Errorf("holds at call %d: %d calls, failure %q; want %d calls and no failure", holdsAt, calls, f.fatal, holdsAt)
		}
	}
}

// A condition that never holds fails the test once the deadline passes,
// naming what was awaited and dumping the goroutines, and Until does not
// return to its caller.
func TestUntilFailsAtTheDeadline(t *testing.T) {
	f := &fakeT{TB: t}
	calls := 0
	if call(f, time.Millisecond, "the impossible", func() bool { calls++; return false }) {
		t.Fatal("Until returned although its condition never held")
	}
	for _, want := range []string{"timed out after 1ms waiting for the impossible", "goroutine ", "waittest.TestUntilFailsAtTheDeadline"} {
		if !strings.Contains(f.fatal, want) {
			t.Errorf("failure %q lacks %q", f.fatal, want)
		}
	}
	if calls == 0 {
		t.Error("the condition was never called")
	}
}
