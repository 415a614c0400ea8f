package membership

import "sync"

// eventQueue hands events from membership callbacks to a consumer without
// ever blocking the producer: push appends to an unbounded buffer and a pump
// goroutine feeds the out channel. Memory is bounded by membership churn.
type eventQueue struct {
	mu     sync.Mutex
	buf    []Event
	closed bool

	wake chan struct{} // capacity 1: "buf may be non-empty"
	done chan struct{} // closed by close
	out  chan Event    // closed by the pump when it exits
	once sync.Once
}

func newEventQueue() *eventQueue {
	q := &eventQueue{
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		out:  make(chan Event, 16),
	}
	go q.pump()
	return q
}

// push queues e; it never blocks. Events pushed after close are dropped.
func (q *eventQueue) push(e Event) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.buf = append(q.buf, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops the pump; the out channel is closed shortly after and events
// not yet delivered are dropped. Safe to call more than once.
func (q *eventQueue) close() {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.buf = nil
		q.mu.Unlock()
		close(q.done)
	})
}

func (q *eventQueue) pump() {
	defer close(q.out)
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		if len(q.buf) == 0 {
			q.mu.Unlock()
			select {
			case <-q.wake:
				continue
			case <-q.done:
				return
			}
		}
		e := q.buf[0]
		q.buf[0] = Event{}
		q.buf = q.buf[1:]
		q.mu.Unlock()
		select {
		case q.out <- e:
		case <-q.done:
			return
		}
	}
}
