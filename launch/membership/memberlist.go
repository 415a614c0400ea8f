package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultGossipPort is the port memberlist gossips on when Config.BindPort
// is left at its default.
const DefaultGossipPort = 7946

// Config configures a Memberlist provider. Start from DefaultConfig, which
// is tuned to detect a killed container within a few seconds on one Docker
// bridge. Timing fields left at zero fall back to memberlist's own LAN
// defaults (memberlist.DefaultLANConfig), not to DefaultConfig.
//
// How fast a dead member is found: every member probes one other member per
// ProbeInterval; a probe not answered within ProbeTimeout (directly, then
// through IndirectChecks helpers) makes the target suspect. A suspect is
// declared dead after
//
//	SuspicionTimeout = SuspicionMult * max(1, log10(N)) * ProbeInterval
//
// once SuspicionMult-2 other members confirm the suspicion, and after at
// most SuspicionMaxTimeoutMult times that without confirmations. With the
// defaults (500 ms, 3) that is 1.5 s for up to 10 members and 3.5 s for 210
// members, plus up to one probe round to notice; a big membership probes
// every member often, so confirmations arrive quickly.
type Config struct {
	// Self is the member this provider speaks for; Self.Name must be unique.
	Self Member

	// BindAddr and BindPort are where memberlist listens (UDP and TCP).
	// BindPort 0 picks a free port; GossipAddr reports it after Join.
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what other members dial. Empty /
	// zero: the bind address (or the first private address when binding to
	// 0.0.0.0) and the bind port. Set AdvertiseAddr to the container's
	// fixed IP on the docker backend.
	AdvertiseAddr string
	AdvertisePort int

	// ProbeInterval is the time between failure probes of random members.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack; keep it well above
	// the round-trip time between members.
	ProbeTimeout time.Duration
	// IndirectChecks is how many members are asked to probe a member that
	// did not answer a direct probe.
	IndirectChecks int
	// SuspicionMult scales the time a suspect member has to refute before it
	// is declared dead (see the formula above). At least 1.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion time when no other member
	// confirms the suspicion.
	SuspicionMaxTimeoutMult int
	// GossipInterval is the time between gossip rounds that spread changes.
	GossipInterval time.Duration
	// PushPullInterval is the time between full state exchanges with a
	// random member (anti-entropy).
	PushPullInterval time.Duration
	// TCPTimeout bounds a TCP exchange (join, push/pull, TCP fallback probe).
	TCPTimeout time.Duration
	// DeadNodeReclaimTime lets a member that was declared dead rejoin under
	// the same name from a new address after this time.
	DeadNodeReclaimTime time.Duration

	// JoinRetryInterval is the pause between join attempts while no seed
	// answers (seeds may still be starting).
	JoinRetryInterval time.Duration
	// LeaveTimeout bounds the departure broadcast of Leave when its context
	// has no deadline.
	LeaveTimeout time.Duration

	// RetransmitMult sets how often each member passes on a change it
	// learns (a join, a suspicion, a death): RetransmitMult * ceil(log10(N+1))
	// times, to random members. Every member passes on every change, so a
	// start of N members costs about N * N times that in messages; fewer
	// retransmissions leave more members unaware of a change until a
	// push/pull exchange or a repeated Join.
	RetransmitMult int

	// LogOutput receives memberlist's own log lines; nil discards them.
	LogOutput io.Writer
}

// DefaultConfig returns a configuration for self tuned for members on one
// LAN or Docker bridge with fast failure detection (see Config).
func DefaultConfig(self Member) Config {
	return Config{
		Self:                    self,
		BindAddr:                "0.0.0.0",
		BindPort:                DefaultGossipPort,
		ProbeInterval:           500 * time.Millisecond,
		ProbeTimeout:            250 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 4,
		GossipInterval:          100 * time.Millisecond,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              2 * time.Second,
		DeadNodeReclaimTime:     5 * time.Second,
		JoinRetryInterval:       250 * time.Millisecond,
		LeaveTimeout:            3 * time.Second,
	}
}

// Memberlist is a Provider gossiping with github.com/hashicorp/memberlist.
// It binds its port on Join.
type Memberlist struct {
	cfg   Config
	del   *delegate
	table *table
	q     *eventQueue

	mu     sync.Mutex
	ml     *memberlist.Memberlist // nil before Join
	gossip string                 // advertised host:port, set by Join
	closed bool
}

// table is the provider's own copy of the live members, kept from
// memberlist's notifications. memberlist's Members() hands out pointers to
// nodes it keeps mutating under its own lock, so reading their fields later
// would race.
type table struct {
	mu      sync.Mutex
	members map[string]Member
}

func (t *table) set(m Member) {
	t.mu.Lock()
	t.members[m.Name] = m
	t.mu.Unlock()
}

func (t *table) remove(name string) {
	t.mu.Lock()
	delete(t.members, name)
	t.mu.Unlock()
}

func (t *table) list() []Member {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := make([]Member, 0, len(t.members))
	for _, m := range t.members {
		ms = append(ms, m.Clone())
	}
	return sortMembers(ms)
}

var _ Provider = (*Memberlist)(nil)

// NewMemberlist validates cfg and returns a provider that joins on Join.
func NewMemberlist(cfg Config) (*Memberlist, error) {
	if cfg.Self.Name == "" {
		return nil, errors.New("membership: Config.Self.Name is empty")
	}
	if cfg.SuspicionMult < 1 {
		return nil, fmt.Errorf("membership: SuspicionMult %d, want at least 1", cfg.SuspicionMult)
	}
	meta, err := encodeMeta(cfg.Self, 0)
	if err != nil {
		return nil, err
	}
	cfg.Self = cfg.Self.Clone()
	return &Memberlist{
		cfg:   cfg,
		del:   &delegate{meta: meta},
		table: &table{members: map[string]Member{}},
		q:     newEventQueue(),
	}, nil
}

func (p *Memberlist) memberlistConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = p.cfg.Self.Name
	c.BindAddr = p.cfg.BindAddr
	c.BindPort = p.cfg.BindPort
	c.AdvertiseAddr = p.cfg.AdvertiseAddr
	c.AdvertisePort = p.cfg.AdvertisePort
	if c.AdvertisePort == 0 {
		c.AdvertisePort = p.cfg.BindPort
	}
	setDur := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	setInt := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setDur(&c.ProbeInterval, p.cfg.ProbeInterval)
	setDur(&c.ProbeTimeout, p.cfg.ProbeTimeout)
	setInt(&c.IndirectChecks, p.cfg.IndirectChecks)
	setInt(&c.SuspicionMult, p.cfg.SuspicionMult)
	setInt(&c.SuspicionMaxTimeoutMult, p.cfg.SuspicionMaxTimeoutMult)
	setDur(&c.GossipInterval, p.cfg.GossipInterval)
	setDur(&c.PushPullInterval, p.cfg.PushPullInterval)
	setDur(&c.TCPTimeout, p.cfg.TCPTimeout)
	setDur(&c.DeadNodeReclaimTime, p.cfg.DeadNodeReclaimTime)
	setInt(&c.RetransmitMult, p.cfg.RetransmitMult)
	out := p.cfg.LogOutput
	if out == nil {
		out = io.Discard
	}
	c.Logger = log.New(out, "memberlist "+p.cfg.Self.Name+" ", log.LstdFlags|log.Lmicroseconds)
	c.Delegate = p.del
	c.Events = events{q: p.q, table: p.table}
	return c
}

// Local returns the member this provider speaks for.
func (p *Memberlist) Local() Member { return p.cfg.Self.Clone() }

// GossipAddr returns the host:port other members use as a seed to join
// this one, or "" before Join.
func (p *Memberlist) GossipAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gossip
}

// Join binds the gossip port (first call only) and joins through seeds,
// retrying every JoinRetryInterval until one answers or ctx ends. Seeds
// equal to the provider's own gossip address are skipped; with no other
// seed the provider starts a new membership alone.
func (p *Memberlist) Join(ctx context.Context, seeds []string) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.ml == nil {
		conf := p.memberlistConfig()
		ml, err := memberlist.Create(conf)
		if err != nil {
			p.mu.Unlock()
			return fmt.Errorf("membership: start memberlist for %q on %s:%d: %w", p.cfg.Self.Name, p.cfg.BindAddr, p.cfg.BindPort, err)
		}
		p.ml = ml
		// Create has filled in a picked port; the advertised address is the
		// configured one, or the one memberlist chose (read once, before
		// anyone knows this member).
		host := conf.AdvertiseAddr
		if host == "" {
			if ip := net.ParseIP(conf.BindAddr); ip != nil && !ip.IsUnspecified() {
				host = conf.BindAddr
			} else {
				host = ml.LocalNode().Addr.String()
			}
		}
		p.gossip = net.JoinHostPort(host, strconv.Itoa(conf.AdvertisePort))
	}
	ml := p.ml
	self := p.gossip
	p.mu.Unlock()

	others := make([]string, 0, len(seeds))
	for _, s := range seeds {
		if s != "" && s != self {
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		return nil
	}
	retry := p.cfg.JoinRetryInterval
	if retry <= 0 {
		retry = 250 * time.Millisecond
	}
	for {
		n, err := ml.Join(others)
		if n > 0 {
			return nil
		}
		if err == nil {
			err = errors.New("no seed answered")
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("membership: %q joining through %v: %w (last attempt: %v)", p.cfg.Self.Name, others, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Members returns the members believed alive (suspects included), sorted
// by name. Members whose metadata cannot be decoded are returned with their
// name only.
func (p *Memberlist) Members() []Member {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil
	}
	return p.table.list()
}

// Events returns the provider's event channel.
func (p *Memberlist) Events() <-chan Event { return p.q.out }

// Leave announces a graceful departure, waits until it has spread (bounded
// by ctx's deadline, or LeaveTimeout without one) and shuts down.
//
// memberlist itself marks a member that left as "left" rather than "dead",
// but does not tell its event delegate which of the two happened (the Node
// it passes keeps State alive; hashicorp/memberlist#266). So Leave first
// gossips a metadata update carrying a leaving flag, waits for that update
// to be retransmitted, and only then broadcasts memberlist's own leave.
// Members that saw the flag report Leave; a member that missed it (the
// departure overtook the update) reports Fail.
func (p *Memberlist) Leave(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	ml := p.ml
	p.mu.Unlock()
	defer p.q.close()
	if ml == nil {
		return nil
	}
	timeout := p.cfg.LeaveTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	var errs []error
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("membership: leave %q: %w", p.cfg.Self.Name, err))
	} else {
		// Same length as before, so it fits: only the flags byte changes.
		p.del.setFlags(metaFlagLeaving)
		if err := ml.UpdateNode(timeout / 2); err != nil {
			errs = append(errs, fmt.Errorf("membership: announce leaving of %q: %w", p.cfg.Self.Name, err))
		}
		if err := ml.Leave(timeout / 2); err != nil {
			errs = append(errs, fmt.Errorf("membership: leave %q: %w", p.cfg.Self.Name, err))
		}
	}
	if err := ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("membership: shut down %q: %w", p.cfg.Self.Name, err))
	}
	return errors.Join(errs...)
}

// Close shuts down without announcing a departure: the other members
// detect a failure. Safe after Leave and when called twice.
func (p *Memberlist) Close() error {
	p.mu.Lock()
	ml := p.ml
	wasClosed := p.closed
	p.closed = true
	p.mu.Unlock()
	p.q.close()
	if ml == nil || wasClosed {
		return nil
	}
	if err := ml.Shutdown(); err != nil {
		return fmt.Errorf("membership: shut down %q: %w", p.cfg.Self.Name, err)
	}
	return nil
}

// delegate hands memberlist the local metadata. It carries no user
// messages or state: actors talk over protoactor remote, not gossip.
type delegate struct {
	mu   sync.Mutex
	meta []byte
}

func (d *delegate) setFlags(flags byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	meta := append([]byte(nil), d.meta...)
	meta[1] = flags
	d.meta = meta
}

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit { // checked against MaxMetaSize in NewMemberlist
		return nil
	}
	return d.meta
}
func (*delegate) NotifyMsg([]byte)                           {}
func (*delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*delegate) LocalState(join bool) []byte                { return nil }
func (*delegate) MergeRemoteState(buf []byte, join bool)     {}

// events forwards memberlist's notifications into the queue; it never
// blocks memberlist and never calls back into it (memberlist holds its node
// lock while notifying).
type events struct {
	q     *eventQueue
	table *table
}

func (e events) NotifyJoin(n *memberlist.Node) {
	m, _ := nodeMember(n)
	e.table.set(m)
	e.q.push(Event{Kind: Join, Member: m.Clone()})
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	m, flags := nodeMember(n)
	e.table.set(m)
	if flags&metaFlagLeaving != 0 {
		return // the leave announcement, reported when the member goes
	}
	e.q.push(Event{Kind: Update, Member: m.Clone()})
}

func (e events) NotifyLeave(n *memberlist.Node) {
	m, flags := nodeMember(n)
	e.table.remove(m.Name)
	kind := Fail
	if flags&metaFlagLeaving != 0 {
		kind = Leave
	}
	e.q.push(Event{Kind: kind, Member: m})
}

// nodeMember decodes a memberlist node; undecodable metadata yields the
// name only.
func nodeMember(n *memberlist.Node) (Member, byte) {
	m, flags, _ := decodeMeta(n.Name, n.Meta)
	return m, flags
}
