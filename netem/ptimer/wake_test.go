package ptimer

import (
	"sync"
	"testing"
	"time"
)

// Every channel a waker is asked to signal gets its value, from many
// signallers at once, and none gets two.
func TestWakerSignalsEveryChannel(t *testing.T) {
	w := newWaker()
	if w == nil {
		t.Skip("no eventfd on this platform") // signal then sends directly: covered below
	}
	defer w.close()
	const n = 2000
	chs := make([]chan struct{}, n)
	var wg sync.WaitGroup
	for i := range chs {
		chs[i] = make(chan struct{}, 1)
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				w.signal(chs[i])
			}
		}()
	}
	wg.Wait()
	for i, ch := range chs {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("channel %d never signalled", i)
		}
	}
	// The dispatcher sends in the order it was asked: once a last channel
	// is signalled, a second send to any of the others would be there.
	last := make(chan struct{}, 1)
	w.signal(last)
	<-last
	for i, ch := range chs {
		if len(ch) != 0 {
			t.Fatalf("channel %d signalled twice", i)
		}
	}
}

// A nil waker (no eventfd) and a closed one send at once; closing hands
// over what was still queued and stops the dispatcher.
func TestWakerNilAndClosed(t *testing.T) {
	ch := make(chan struct{}, 1)
	(*waker)(nil).signal(ch)
	if len(ch) != 1 {
		t.Fatal("a nil waker did not send")
	}
	<-ch
	w := newWaker()
	if w == nil {
		return
	}
	w.close()
	w.signal(ch)
	if len(ch) != 1 {
		t.Fatal("a closed waker did not send at once")
	}
	select {
	case <-w.done:
	default:
		t.Fatal("the dispatcher still runs after close")
	}
}

// A line's WakeWithin sends at the deadline, never before it.
func TestLineWakeWithin(t *testing.T) {
	l := New()
	defer l.Close()
	ch := make(chan struct{}, 1)
	at := time.Now().Add(3 * time.Millisecond)
	l.WakeWithin(at, 0, ch)
	<-ch
	if now := time.Now(); now.Before(at) {
		t.Fatalf("woken %v before the deadline", at.Sub(now))
	}
}
