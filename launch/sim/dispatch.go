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
	A       clock.Activity // nil: no activity is counted
	mu      sync.Mutex
	queue   []func()
	running bool
}

var _ actor.Dispatcher = (*Serial)(nil)

// Schedule implements actor.Dispatcher: fn runs after every run scheduled
// before it.
func (s *Serial) Schedule(fn func()) {
	s.mu.Lock()
	s.queue = append(s.queue, fn)
	if s.running {
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

func (s *Serial) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.queue = nil
			s.mu.Unlock()
			if s.A != nil {
				s.A.End()
			}
			return
		}
		fn := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
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
func NewRuntime(clk *clock.Virtual) *Runtime {
	return &Runtime{Clock: clk, dispatch: &Serial{A: clk}, mailbox: actor.Unbounded(Counter{A: clk})}
}

// Props makes p an actor of the simulation: its mailbox counts its
// messages on the clock and it runs on the simulation's dispatcher. It
// changes p and returns it.
func (r *Runtime) Props(p *actor.Props) *actor.Props {
	return p.Configure(actor.WithMailbox(r.mailbox), actor.WithDispatcher(r.dispatch))
}
