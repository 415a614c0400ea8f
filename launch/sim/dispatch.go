package sim

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/clock"
)

// Serial is a protoactor dispatcher that runs every mailbox of a
// simulation on one goroutine, one mailbox run after another in the order
// they were scheduled. Within one event's cascade every message is handled
// in an order that depends only on the order messages were sent, not on
// Go's scheduler: this is what makes a simulation deterministic.
//
// While its goroutine has work (from the first Schedule until its queue is
// empty and the last mailbox run has returned, the mailbox's own
// bookkeeping included) it holds one unit of activity on A, so the clock
// fires its next event only once the dispatcher is entirely idle: no
// mailbox run of the previous cascade can then race the next event's.
type Serial struct {
	A     clock.Activity // nil: no activity is counted
	mu    sync.Mutex
	queue []func()
	head  int // queue[head:] is still to run; the array is reused once empty
	// running: a goroutine (drain) or Around is running the queue.
	running bool
	// inline: Around runs a clock callback; what it schedules waits for
	// Around to run it once the callback has returned.
	inline bool
}

var _ actor.Dispatcher = (*Serial)(nil)

// Schedule implements actor.Dispatcher: fn runs after every run scheduled
// before it.
func (s *Serial) Schedule(fn func()) {
	s.mu.Lock()
	s.queue = append(s.queue, fn)
	if s.running || s.inline {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	if s.A != nil {
		s.A.Begin()
	}
	go s.drain()
}

// Around runs f, a callback of the clock (clock.Virtual.SetAround), and
// then, on the same goroutine, every mailbox run scheduled while it ran,
// and those these schedule, until the queue is empty. The clock holds its
// callback's unit of activity until Around returns, so nothing is begun
// for them. The order is the one drain would follow: runs start in the
// order they were scheduled, after the callback (which only sends) has
// returned. Runs scheduled during f from another goroutine while a drain
// goroutine was already running are left to it.
func (s *Serial) Around(f func()) {
	s.mu.Lock()
	s.inline = true
	s.mu.Unlock()
	f()
	s.mu.Lock()
	s.inline = false
	if s.running || s.head == len(s.queue) {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	s.run()
}

func (s *Serial) drain() {
	s.run()
	if s.A != nil {
		s.A.End()
	}
}

// run runs the queue until it is empty, then clears running.
func (s *Serial) run() {
	for {
		s.mu.Lock()
		if s.head == len(s.queue) {
			s.running = false
			clear(s.queue)
			s.queue, s.head = s.queue[:0], 0
			s.mu.Unlock()
			return
		}
		fn := s.queue[s.head]
		s.queue[s.head] = nil
		s.head++
		s.mu.Unlock()
		fn()
	}
}

// Throughput implements actor.Dispatcher: messages a mailbox handles before
// it yields the goroutine.
func (*Serial) Throughput() int { return 1 << 20 }

// Counter is the mailbox middleware that makes message delivery count as
// activity of the simulation's clock: Begin when a message (user or
// system) is posted to a mailbox, End once the receiver's handler has
// returned for it. See the package comment for why this is sound.
type Counter struct{ A clock.Activity }

var _ actor.MailboxMiddleware = Counter{}

// MailboxStarted implements actor.MailboxMiddleware.
func (Counter) MailboxStarted() {}

// MessagePosted implements actor.MailboxMiddleware.
func (c Counter) MessagePosted(interface{}) { c.A.Begin() }

// MessageReceived implements actor.MailboxMiddleware.
func (c Counter) MessageReceived(interface{}) { c.A.End() }

// MailboxEmpty implements actor.MailboxMiddleware.
func (Counter) MailboxEmpty() {}

// Runtime is what every actor of one simulation shares: the clock that
// counts their messages and the dispatcher they run on.
type Runtime struct {
	Clock    *clock.Virtual
	dispatch *Serial
	mailbox  actor.MailboxProducer
}

// NewRuntime returns the runtime of a simulation on clk.
// The clock's callbacks run through the dispatcher's Around, so the
// messages a callback sends are handled on the clock's goroutine right
// after it.
func NewRuntime(clk *clock.Virtual) *Runtime {
	d := &Serial{A: clk}
	clk.SetAround(d.Around)
	return &Runtime{Clock: clk, dispatch: d, mailbox: actor.Unbounded(Counter{A: clk})}
}

// Props makes p an actor of the simulation: its mailbox counts its
// messages on the clock and it runs on the simulation's dispatcher. It
// changes p and returns it.
func (r *Runtime) Props(p *actor.Props) *actor.Props {
	return p.Configure(actor.WithMailbox(r.mailbox), actor.WithDispatcher(r.dispatch))
}
