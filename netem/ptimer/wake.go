package ptimer

import (
	"os"
	"sync"
	"time"
)

// A goroutine that the line's thread readies (a channel send in a
// callback) is put on the P that thread holds, and the thread keeps that P
// while it spins or sleeps in a system call: another thread has to be
// woken to steal the goroutine, and on a virtual machine that took p50
// 91-127 µs and up to 14 ms (execution traces of das3-smoke,
// docs/fidelity.md). A waker hands the wake-up to the netpoller instead:
// the line's thread writes an eventfd, the kernel wakes the thread that
// waits in the netpoller (or the next one that looks), and a dispatcher
// goroutine there sends on the channels. Measured the same way: the
// dispatcher ran p50 at once, p99 0.24 ms, at most 1.0 ms after it was
// readied, and the goroutines it readied p50 11 µs, p99 0.47 ms, at most
// 2.9 ms.
type waker struct {
	mu     sync.Mutex
	q      []chan<- struct{}
	armed  bool // an eventfd write is outstanding: the dispatcher will look
	closed bool
	fd     int
	f      *os.File
	done   chan struct{}
}

// newWaker starts a waker, or returns nil where the platform has no
// eventfd (signal then sends directly).
func newWaker() *waker {
	fd, err := newEventFD()
	if err != nil {
		return nil
	}
	w := &waker{fd: fd, f: os.NewFile(uintptr(fd), "ptimer-wake"), done: make(chan struct{})}
	go w.loop()
	return w
}

// signal makes a non-blocking send on ch from the dispatcher goroutine
// (ch must have room for one value, so that the wake-up is never lost). A
// nil or closed waker sends at once.
func (w *waker) signal(ch chan<- struct{}) {
	if w == nil {
		notify(ch)
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		notify(ch)
		return
	}
	w.q = append(w.q, ch)
	write := !w.armed
	w.armed = true
	w.mu.Unlock()
	if write {
		writeEventFD(w.fd)
	}
}

func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *waker) loop() {
	defer close(w.done)
	var b [8]byte
	var batch []chan<- struct{}
	for {
		_, err := w.f.Read(b[:])
		w.mu.Lock()
		batch, w.q = w.q, batch[:0]
		w.armed = false
		w.mu.Unlock()
		for _, ch := range batch {
			notify(ch)
		}
		if err != nil {
			return
		}
	}
}

// close stops the dispatcher after it has sent what was asked; later
// signals send at once.
func (w *waker) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	_ = w.f.Close() // the dispatcher's Read returns
	<-w.done
	w.mu.Lock()
	rest := w.q
	w.q = nil
	w.mu.Unlock()
	for _, ch := range rest {
		notify(ch)
	}
}

// WakeWithin sends on ch at deadline, like AtWithin with a callback that
// sends, but the send is made by a goroutine the netpoller wakes, not by
// the line's thread (see waker). ch must have room for one value.
func (l *Line) WakeWithin(deadline time.Time, tolerance time.Duration, ch chan<- struct{}) {
	w := l.wk
	l.AtWithin(deadline, tolerance, func() { w.signal(ch) })
}
