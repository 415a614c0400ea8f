package comm

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
)

// Reserved tags. User tags are >= 0.
const (
	tagGoodbye   = math.MinInt32
	tagAbort     = math.MinInt32 + 1
	tagBarrier   = -1
	tagBcast     = -2
	tagAllreduce = -3
	tagAllgather = -4
	tagGather    = -5
	tagLayout    = -6 // resize: block lengths
	tagResize    = -7 // resize: data moves
	tagOldLayout = -8 // grow: the old layout, down to the new ranks
)

// A frame is its header then its payload. The header holds the payload
// length, the tag, and the sender's fidelity stamps: the send time and the
// time its link model says the frame is due at the receiver (both
// fidelity.Mono, 0 when the sender has no model), and whether the frame
// queued behind earlier ones on the sender's link.
const (
	headerLen = 25
	// inlineMax is the largest payload copied into the connection's send
	// buffer so header and payload leave in one write.
	inlineMax = 64 << 10
	// readBuf is the size of each connection's read buffer.
	readBuf = 8 << 10
	// MaxMessage is the largest payload a frame may carry.
	MaxMessage = 1 << 30
)

var (
	// ErrClosed is returned by operations on a closed Comm.
	ErrClosed = errors.New("comm: communicator closed")
	// ErrPeerClosed is returned by Recv from a peer that closed its Comm
	// (gracefully) before sending the awaited message.
	ErrPeerClosed = errors.New("peer closed its communicator")
	// ErrPeerLost marks a peer whose connection broke without a goodbye.
	ErrPeerLost = errors.New("peer lost")
	// ErrPeerAborted marks a peer that aborted the job.
	ErrPeerAborted = errors.New("peer aborted")
)

// Op is a reduction operator.
type Op int

// Reduction operators for AllreduceFloat64.
const (
	Sum Op = iota
	Max
	Min
)

// String names the operator.
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Stats counts what a rank did.
type Stats struct {
	BytesSent int64 // payload bytes sent to other ranks
	MsgsSent  int64 // messages sent to other ranks (collectives included)
	BytesRecv int64
	MsgsRecv  int64
	// ComputeTime is the emulated compute asked for (work scaled by speed,
	// processors and dilation).
	ComputeTime time.Duration
	// CommTime is the wall time spent blocked in communication calls.
	CommTime time.Duration
	// Resizes counts the resizes this rank took part in (Resize and Join);
	// ResizeTime is the wall time they took, ResizeBytesSent and
	// ResizeBytesRecv the data they moved over the network (included in
	// BytesSent and BytesRecv).
	Resizes         int64
	ResizeTime      time.Duration
	ResizeBytesSent int64
	ResizeBytesRecv int64
	// Connections counts the connections this rank established or
	// accepted: they are opened lazily, at the first send to a peer.
	Connections int64
}

// Comm is one rank's communicator: its connections to the other ranks,
// opened lazily (see Endpoint.Connect). Methods are safe for concurrent
// use; the usual SPMD program calls them from one goroutine.
type Comm struct {
	opts Options
	rank int
	ep   *Endpoint // closed with the Comm
	// tab is the rank table: replaced (never changed in place) by Resize.
	tab  atomic.Pointer[table]
	self *inbox

	// linkMu guards the slots' links and ended counts, accepting, parked,
	// and the replacement of tab.
	linkMu    sync.Mutex
	accepting bool         // false once Close or Abort began
	parked    []parkedConn // accepted from ranks already resized (adoptParked)
	conns     atomic.Int64

	failed  chan struct{}
	failMu  sync.Mutex
	failErr error

	closing atomic.Bool
	closeMu sync.Mutex
	done    bool
	readers sync.WaitGroup

	bytesSent, msgsSent atomic.Int64
	bytesRecv, msgsRecv atomic.Int64
	computeNs, commNs   atomic.Int64

	computeMu sync.Mutex
	debt      time.Duration // lateness of earlier compute waits, paid back

	resizes, resizeNs      atomic.Int64
	resizeSent, resizeRecv atomic.Int64
	resizeMu               sync.Mutex // one Resize at a time

	model *fidelity.LinkModel // nil: frames carry no stamps
}

// table is the job's rank table as this rank sees it.
type table struct {
	peers []Peer
	slots []*slot // by rank; nil for self
}

// slot is this rank's side of one peer: the peer's inbox and the
// connections with it. There is usually one connection; two when both
// ranks dialed at once. Both feed the inbox; each rank sends over the
// connection it chose first (out) and never switches, so messages in one
// direction keep their order. A slot outlives resizes that keep its rank.
type slot struct {
	rank int
	peer Peer
	in   *inbox
	// sem (capacity 1) lets one sender at a time choose or open out.
	sem     chan struct{}
	out     atomic.Pointer[link]
	dialErr error // under sem: the peer is gone, sends fail with it
	// under Comm.linkMu:
	links []*link
	ended int // links whose goodbye arrived
	// linked is closed when the first connection with the peer is
	// installed (ConnectPeers waits on it).
	linked chan struct{}
}

// parkedConn is a connection accepted from a rank that already runs with a
// larger table; the grow that installs that table adopts it.
type parkedConn struct {
	rank, size int
	c          net.Conn
}

// t returns the current rank table.
func (c *Comm) t() *table { return c.tab.Load() }

type link struct {
	peer int
	addr string // the peer's endpoint, for error messages
	dst  string // the peer's cluster
	pair string // "peer's cluster>my cluster": the fidelity key of frames received
	raw  net.Conn
	w    net.Conn // raw wrapped by the egress shaper
	// held is w when the shaper lets the reader take bytes before their
	// delivery time (netem.HeldReader): recv then holds each message in
	// the receiving rank's goroutine.
	held netem.HeldReader
	wmu  sync.Mutex
	wbuf []byte
	in   *inbox // the slot's
	// ended (under Comm.linkMu): the peer's goodbye or abort came on it.
	ended bool
}

type inbox struct {
	mu      sync.Mutex
	qs      map[int32]*queue
	gone    chan struct{} // closed once the peer will send nothing more
	goneErr error
}

type queue struct {
	msgs    []message
	waiters []*waiter
}

// message is a received payload with what its receiver needs besides the
// bytes: the sender's fidelity stamps (sent and due, 0 without a model;
// back: it queued behind earlier frames), when the reading goroutine had
// the whole frame (arrived, Mono), and the delivery time the shaper asks
// the receiver to hold it until (hold, Mono; 0 when the shaper held it).
type message struct {
	b         []byte
	sent, due int64
	back      bool
	arrived   int64
	hold      int64
	via       *link // the connection it came on (nil: from self)
}

type waiter struct{ ch chan message }

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan message, 1)} }}

func newInbox() *inbox {
	return &inbox{qs: make(map[int32]*queue), gone: make(chan struct{})}
}

func (in *inbox) queue(tag int32) *queue {
	q := in.qs[tag]
	if q == nil {
		q = &queue{}
		in.qs[tag] = q
	}
	return q
}

// deliver hands a message to the first waiting receiver or queues it.
func (in *inbox) deliver(tag int32, m message) {
	in.mu.Lock()
	q := in.queue(tag)
	if len(q.waiters) > 0 {
		w := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		w.ch <- m
	} else {
		q.msgs = append(q.msgs, m)
	}
	in.mu.Unlock()
}

func (in *inbox) setGone(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.gone:
	default:
		in.goneErr = err
		close(in.gone)
	}
}

func newComm(opts Options, peers []Peer, ep *Endpoint) *Comm {
	c := &Comm{
		opts:      opts,
		rank:      opts.Rank,
		ep:        ep,
		self:      newInbox(),
		failed:    make(chan struct{}),
		model:     linkModel(opts),
		accepting: true,
	}
	slots := make([]*slot, len(peers))
	for j := range peers {
		if j != c.rank {
			slots[j] = newSlot(j, peers[j])
		}
	}
	c.tab.Store(&table{peers: peers, slots: slots})
	return c
}

func newSlot(j int, p Peer) *slot {
	return &slot{rank: j, peer: p, in: newInbox(), sem: make(chan struct{}, 1), linked: make(chan struct{})}
}

// install makes raw (handshaken, either direction) a connection with the
// slot's peer and starts its reader. The caller holds c.linkMu and has
// checked c.accepting.
func (c *Comm) install(s *slot, raw net.Conn) *link {
	l := c.newLink(s.rank, s.peer, raw, s.in)
	s.links = append(s.links, l)
	c.conns.Add(1)
	c.readers.Add(1)
	go c.read(l)
	if len(s.links) == 1 {
		close(s.linked) // counted and reading first: a waiter sees it all
	}
	return l
}

// adopt takes a connection the endpoint accepted after Connect (its
// greeting read, no answer yet) and answers it. It reports whether it
// kept the connection.
func (c *Comm) adopt(rank, size int, conn net.Conn) bool {
	c.linkMu.Lock()
	defer c.linkMu.Unlock()
	if !c.accepting {
		refuse(conn, statusClosed, "communicator closed")
		return false
	}
	t := c.t()
	n := len(t.peers)
	switch {
	case size == n && rank < n && t.slots[rank] != nil:
		if _, err := conn.Write([]byte{statusOK}); err != nil {
			return false
		}
		_ = conn.SetDeadline(time.Time{})
		c.install(t.slots[rank], conn)
		return true
	case size != n && rank < size:
		// The dialer has resized the job already (grown it, or shrunk it
		// and sends to a survivor); this rank has not reached the resize
		// yet. Keep the connection for the resize that installs a table of
		// that size (adoptParked).
		if _, err := conn.Write([]byte{statusOK}); err != nil {
			return false
		}
		_ = conn.SetDeadline(time.Time{})
		c.parked = append(c.parked, parkedConn{rank: rank, size: size, c: conn})
		return true
	}
	refuse(conn, statusRefused, fmt.Sprintf("rank %d believes the job has %d ranks, not %d", rank, size, n))
	return false
}

// adoptParked installs the parked connections whose dialers run with the
// table just installed (n ranks, slots) and keeps the others for a later
// resize (they are closed with the Comm). The caller holds c.linkMu.
func (c *Comm) adoptParked(slots []*slot, n int) {
	keep := c.parked[:0]
	for _, p := range c.parked {
		if p.size == n && p.rank < n && slots[p.rank] != nil {
			c.install(slots[p.rank], p.c)
		} else {
			keep = append(keep, p)
		}
	}
	clear(c.parked[len(keep):])
	c.parked = keep
}

// newLink wraps a connection to peer p (rank j, whose inbox is in) in the
// egress shaper; the caller starts its reader.
func (c *Comm) newLink(j int, p Peer, raw net.Conn, in *inbox) *link {
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	l := &link{peer: j, addr: p.Addr, dst: p.Cluster, pair: p.Cluster + ">" + c.opts.Cluster, raw: raw,
		w: c.opts.Egress.Wrap(raw, p.Cluster), in: in}
	l.held, _ = l.w.(netem.HeldReader)
	return l
}

// outLink returns the connection this rank sends to peer s over, opening
// it at the first send: the connection the peer opened if there is one,
// otherwise a new one this rank dials. Concurrent first sends wait for one
// another: one connection is chosen, once.
func (c *Comm) outLink(ctx context.Context, s *slot) (*link, error) {
	if l := s.out.Load(); l != nil {
		return l, nil
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, c.errorf("send to rank %d: %w", s.rank, ctx.Err())
	case <-c.failed:
		return nil, c.Err()
	}
	defer func() { <-s.sem }()
	if l := s.out.Load(); l != nil {
		return l, nil
	}
	if s.dialErr != nil {
		return nil, s.dialErr
	}
	c.linkMu.Lock()
	if !c.accepting {
		c.linkMu.Unlock()
		return nil, ErrClosed
	}
	if len(s.links) > 0 {
		l := s.links[0]
		s.out.Store(l)
		c.linkMu.Unlock()
		return l, nil
	}
	n := len(c.t().peers)
	c.linkMu.Unlock()
	raw, err := dial(ctx, c.opts.Dial, s.peer.Addr, c.opts.JobID, c.rank, n)
	if err != nil {
		if errors.Is(err, errPeerGone) {
			s.dialErr = c.errorf("send to rank %d (%s): %w: %w", s.rank, s.peer.Addr, ErrPeerClosed, err)
			return nil, s.dialErr
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, c.errorf("send to rank %d: connect: %w", s.rank, cerr)
		}
		e := c.errorf("connect to rank %d at %s: %w", s.rank, s.peer.Addr, err)
		c.fail(e)
		return nil, e
	}
	c.linkMu.Lock()
	defer c.linkMu.Unlock()
	if !c.accepting {
		// Closed while dialing: the peer has installed the connection, so
		// it must see a goodbye (through the shaper: it may frame the
		// bytes), not a lost peer.
		l := c.newLink(s.rank, s.peer, raw, s.in)
		_ = c.control(l, tagGoodbye, nil)
		_ = l.w.Close()
		_ = raw.Close()
		return nil, ErrClosed
	}
	// Should the peer have dialed meanwhile, the pair has two connections;
	// this rank sends over its own.
	l := c.install(s, raw)
	s.out.Store(l)
	return l, nil
}

// allLinks returns every connection of the slots, and the slots that have one.
// The caller holds c.linkMu.
func (t *table) allLinks() (links []*link, connected []*slot) {
	for _, s := range t.slots {
		if s != nil && len(s.links) > 0 {
			links = append(links, s.links...)
			connected = append(connected, s)
		}
	}
	return links, connected
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return len(c.t().peers) }

// Cluster returns the cluster of this rank's node.
func (c *Comm) Cluster() string { return c.opts.Cluster }

// Processors returns the processors the rank computes with.
func (c *Comm) Processors() int { return c.opts.Processors }

// JobID returns the job the communicator belongs to.
func (c *Comm) JobID() string { return c.opts.JobID }

// Peers returns every rank of the job, ordered by rank.
func (c *Comm) Peers() []Peer { return append([]Peer(nil), c.t().peers...) }

// Stats returns the counters of this rank.
func (c *Comm) Stats() Stats {
	return Stats{
		BytesSent:   c.bytesSent.Load(),
		MsgsSent:    c.msgsSent.Load(),
		BytesRecv:   c.bytesRecv.Load(),
		MsgsRecv:    c.msgsRecv.Load(),
		ComputeTime: time.Duration(c.computeNs.Load()),
		CommTime:    time.Duration(c.commNs.Load()),

		Resizes:         c.resizes.Load(),
		ResizeTime:      time.Duration(c.resizeNs.Load()),
		ResizeBytesSent: c.resizeSent.Load(),
		ResizeBytesRecv: c.resizeRecv.Load(),
		Connections:     c.conns.Load(),
	}
}

func (c *Comm) errorf(format string, a ...any) error {
	return fmt.Errorf("comm: job %s rank %d: "+format, append([]any{c.opts.JobID, c.rank}, a...)...)
}

// fail breaks the communicator with its first error.
func (c *Comm) fail(err error) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if c.failErr != nil {
		return
	}
	c.failErr = err
	close(c.failed)
}

// Err returns the error that broke the communicator, or nil.
func (c *Comm) Err() error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failErr
}

func (c *Comm) check(ctx context.Context) error {
	select {
	case <-c.failed:
		return c.Err()
	default:
	}
	return ctx.Err()
}

// read demultiplexes one connection into the peer's inbox. Over a shaper
// that lets it (netem.HeldReader) it takes each frame as soon as it has
// arrived and leaves the hold until its delivery time to recv.
func (c *Comm) read(l *link) {
	defer c.readers.Done()
	var r io.Reader
	var dr *dueReader
	if l.held != nil {
		dr = &dueReader{h: l.held}
		r = dr
	} else {
		r = bufio.NewReaderSize(l.w, readBuf)
	}
	var h [headerLen]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			c.readErr(l, err)
			return
		}
		n := binary.BigEndian.Uint32(h[0:4])
		tag := int32(binary.BigEndian.Uint32(h[4:8]))
		if n > MaxMessage {
			c.readErr(l, fmt.Errorf("frame of %d bytes exceeds %d", n, MaxMessage))
			return
		}
		m := message{sent: int64(binary.BigEndian.Uint64(h[8:16])), due: int64(binary.BigEndian.Uint64(h[16:24])),
			back: h[24] != 0}
		if n > 0 {
			m.b = getBuf(int(n))
			if _, err := io.ReadFull(r, m.b); err != nil {
				c.readErr(l, err)
				return
			}
		}
		switch tag {
		case tagGoodbye:
			// The peer says goodbye on each of its connections with this
			// rank; its inbox is gone once every one has delivered all.
			c.linkMu.Lock()
			if !l.ended {
				l.ended = true
				s := c.slotOf(l)
				if s == nil {
					l.in.setGone(c.errorf("recv from rank %d: %w", l.peer, ErrPeerClosed))
				} else if s.ended++; s.ended >= len(s.links) {
					l.in.setGone(c.errorf("recv from rank %d: %w", l.peer, ErrPeerClosed))
				}
			}
			c.linkMu.Unlock()
			continue
		case tagAbort:
			err := c.errorf("rank %d: %w: %s", l.peer, ErrPeerAborted, m.b)
			c.linkMu.Lock()
			l.ended = true
			c.linkMu.Unlock()
			l.in.setGone(err)
			c.fail(err)
			continue
		}
		if m.sent != 0 {
			m.arrived = fidelity.Mono()
		}
		if dr != nil {
			m.hold = dr.due
		}
		m.via = l
		c.msgsRecv.Add(1)
		c.bytesRecv.Add(int64(n))
		l.in.deliver(tag, m)
	}
}

// dueReader reads a held connection and remembers the delivery time of the
// last byte it returned.
type dueReader struct {
	h   netem.HeldReader
	due int64
}

func (r *dueReader) Read(p []byte) (int, error) {
	n, due, err := r.h.ReadHeld(p)
	if n > 0 {
		r.due = due
	}
	return n, err
}

// settle finishes a receive: it holds m until the shaper's delivery time
// and records its lateness. called is when the receiver started waiting
// (Mono): a message whose time came while the rank was busy elsewhere is
// judged by when the reader had it, one the rank waited for by when the
// rank resumed.
func (c *Comm) settle(ctx context.Context, m message, called int64) ([]byte, error) {
	l := m.via
	if m.hold != 0 {
		if err := l.held.Hold(ctx, m.hold); err != nil {
			return nil, c.errorf("recv from rank %d: %w", l.peer, err)
		}
	}
	if m.sent != 0 && c.opts.Probe != nil {
		at := max(m.due, m.arrived)
		if called <= at {
			at = fidelity.Mono()
		}
		c.opts.Probe.Frame(l.pair, m.sent, m.due, at, m.back)
	}
	return m.b, nil
}

// slotOf returns the slot l belongs to in the current table (nil once a
// shrink dropped it). The caller holds c.linkMu.
func (c *Comm) slotOf(l *link) *slot {
	t := c.t()
	if l.peer < len(t.slots) && t.slots[l.peer] != nil && t.slots[l.peer].in == l.in {
		return t.slots[l.peer]
	}
	return nil
}

func (c *Comm) readErr(l *link, err error) {
	c.linkMu.Lock()
	ended := l.ended
	c.linkMu.Unlock()
	if ended {
		return // goodbye or abort seen on it: the end of the stream is expected
	}
	select {
	case <-l.in.gone:
		return // the peer's goodbye or abort already seen
	default:
	}
	if c.closing.Load() {
		l.in.setGone(ErrClosed)
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("connection closed without goodbye: %w", err)
	}
	e := c.errorf("rank %d (%s, cluster %s): %w: %w", l.peer, l.addr, l.dst, ErrPeerLost, err)
	l.in.setGone(e)
	c.fail(e)
}

func (c *Comm) peerCheck(to int) error {
	if n := c.Size(); to < 0 || to >= n {
		return c.errorf("rank %d out of range [0,%d)", to, n)
	}
	return nil
}

func userTag(tag int) error {
	if tag < 0 || tag > math.MaxInt32 {
		return fmt.Errorf("comm: tag %d: user tags are in [0, %d]", tag, math.MaxInt32)
	}
	return nil
}

func (c *Comm) timed(start time.Time) {
	c.commNs.Add(int64(time.Since(start)))
}

// Send sends b to rank to with a tag >= 0. It returns once b has been
// handed to the (shaped) connection; b may be reused afterwards.
func (c *Comm) Send(ctx context.Context, to, tag int, b []byte) error {
	if err := userTag(tag); err != nil {
		return err
	}
	defer c.timed(time.Now())
	return c.send(ctx, to, int32(tag), b)
}

// Recv receives the next message from rank from with the tag, in the order
// sent. Messages with other tags or from other ranks are kept for later.
func (c *Comm) Recv(ctx context.Context, from, tag int) ([]byte, error) {
	if err := userTag(tag); err != nil {
		return nil, err
	}
	defer c.timed(time.Now())
	return c.recv(ctx, from, int32(tag))
}

// Sendrecv sends b to rank to and receives from rank from (which may be the
// same rank). Sends are eager, so pairs of ranks calling Sendrecv toward
// each other do not deadlock.
func (c *Comm) Sendrecv(ctx context.Context, to, sendTag int, b []byte, from, recvTag int) ([]byte, error) {
	if err := userTag(sendTag); err != nil {
		return nil, err
	}
	if err := userTag(recvTag); err != nil {
		return nil, err
	}
	defer c.timed(time.Now())
	if err := c.send(ctx, to, int32(sendTag), b); err != nil {
		return nil, err
	}
	return c.recv(ctx, from, int32(recvTag))
}

func (c *Comm) send(ctx context.Context, to int, tag int32, b []byte) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if err := c.peerCheck(to); err != nil {
		return err
	}
	if len(b) > MaxMessage {
		return c.errorf("send %d bytes to rank %d: larger than %d", len(b), to, MaxMessage)
	}
	if to == c.rank {
		var cp []byte
		if len(b) > 0 {
			cp = append([]byte(nil), b...)
		}
		c.self.deliver(tag, message{b: cp})
		return nil
	}
	l, err := c.outLink(ctx, c.t().slots[to])
	if err != nil {
		if c.closing.Load() {
			return ErrClosed
		}
		return err
	}
	if err := c.writeFrame(ctx, l, tag, b); err != nil {
		if c.closing.Load() {
			return ErrClosed
		}
		if cerr := ctx.Err(); cerr != nil {
			return c.errorf("send to rank %d: %w", to, cerr)
		}
		select {
		case <-l.in.gone: // the peer left (or failed): say so, do not blame the link
			l.in.mu.Lock()
			gerr := l.in.goneErr
			l.in.mu.Unlock()
			if errors.Is(gerr, ErrPeerClosed) {
				return c.errorf("send to rank %d: %w", to, ErrPeerClosed)
			}
			return gerr
		default:
		}
		e := c.errorf("send to rank %d (%s): %w: %w", to, l.addr, ErrPeerLost, err)
		c.fail(e)
		return e
	}
	c.msgsSent.Add(1)
	c.bytesSent.Add(int64(len(b)))
	return nil
}

// writeFrame writes one frame; small frames leave in a single write.
func (c *Comm) writeFrame(ctx context.Context, l *link, tag int32, b []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if len(b) <= inlineMax {
		need := headerLen + len(b)
		if cap(l.wbuf) < need {
			l.wbuf = make([]byte, need, max(need, 2*cap(l.wbuf), 256))
		}
		buf := l.wbuf[:need]
		c.header(buf[:headerLen], l, tag, len(b))
		copy(buf[headerLen:], b)
		_, err := l.w.Write(buf)
		return err
	}
	// Large payload: a blocked write must give way to ctx.
	stop := context.AfterFunc(ctx, func() { _ = l.w.SetWriteDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			_ = l.w.SetWriteDeadline(time.Time{})
		}
	}()
	var h [headerLen]byte
	c.header(h[:], l, tag, len(b))
	if _, err := l.w.Write(h[:]); err != nil {
		return err
	}
	_, err := l.w.Write(b)
	return err
}

// header fills a data frame's header; the caller holds l.wmu, so frames
// are stamped in the order they leave.
func (c *Comm) header(h []byte, l *link, tag int32, n int) {
	binary.BigEndian.PutUint32(h[0:4], uint32(n))
	binary.BigEndian.PutUint32(h[4:8], uint32(tag))
	var sent, due int64
	var backlogged bool
	if c.model != nil {
		now := fidelity.Mono()
		if d, back, ok := c.model.Stamp(l.dst, headerLen+n, now); ok {
			sent, due, backlogged = now, d, back
		}
	}
	binary.BigEndian.PutUint64(h[8:16], uint64(sent))
	binary.BigEndian.PutUint64(h[16:24], uint64(due))
	h[24] = 0
	if backlogged {
		h[24] = 1
	}
}

// linkModel builds the rank's model of its links from Options.Targets,
// dilated, at the shapers' wire rate; nil without a probe or targets.
func linkModel(o Options) *fidelity.LinkModel {
	if o.Probe == nil || len(o.Targets) == 0 {
		return nil
	}
	t := make(map[string]fidelity.Target, len(o.Targets))
	for dst, l := range o.Targets {
		if l.Unavailable {
			continue
		}
		dl := l.Dilate(o.Dilation)
		t[dst] = fidelity.Target{Latency: dl.Latency, Rate: netem.WireRate(dl)}
	}
	return fidelity.NewLinkModel(t)
}

func (c *Comm) recv(ctx context.Context, from int, tag int32) ([]byte, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if err := c.peerCheck(from); err != nil {
		return nil, err
	}
	called := fidelity.Mono()
	in := c.self
	if from != c.rank {
		in = c.t().slots[from].in
	}
	in.mu.Lock()
	q := in.queue(tag)
	if len(q.msgs) > 0 {
		m := q.msgs[0]
		q.msgs[0] = message{}
		q.msgs = q.msgs[1:]
		in.mu.Unlock()
		return c.settle(ctx, m, called)
	}
	select {
	case <-in.gone:
		err := in.goneErr
		in.mu.Unlock()
		return nil, err
	default:
	}
	w := waiterPool.Get().(*waiter)
	q.waiters = append(q.waiters, w)
	in.mu.Unlock()

	var err error
	select {
	case m := <-w.ch:
		waiterPool.Put(w)
		return c.settle(ctx, m, called)
	case <-ctx.Done():
		err = c.errorf("recv from rank %d tag %d: %w", from, tag, ctx.Err())
	case <-c.failed:
		err = c.Err()
	case <-in.gone:
		in.mu.Lock()
		err = in.goneErr
		in.mu.Unlock()
	}
	in.mu.Lock()
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			in.mu.Unlock()
			waiterPool.Put(w)
			return nil, err
		}
	}
	in.mu.Unlock()
	// The message arrived while giving up: take it.
	m := <-w.ch
	waiterPool.Put(w)
	return c.settle(ctx, m, called)
}

// Preconnect opens the connections to the given ranks now, as the first
// sends to them would (a connection the peer opened already is taken as
// it is). Measurements use it so that their first step does not pay the
// connections' set-up; programs need not call it.
func (c *Comm) Preconnect(ctx context.Context, ranks ...int) error {
	for _, to := range ranks {
		if err := c.check(ctx); err != nil {
			return err
		}
		if err := c.peerCheck(to); err != nil {
			return err
		}
		if to == c.rank {
			continue
		}
		if _, err := c.outLink(ctx, c.t().slots[to]); err != nil {
			return err
		}
	}
	return nil
}

// ConnectPeers opens this rank's connections with the given ranks before a
// program's first exchange, one per pair: it dials the higher ranks among
// them (as Preconnect) and waits until each lower one has connected to it.
// Every rank named must call ConnectPeers naming this rank in turn (the
// sets are symmetric), or the wait lasts until ctx ends. Set-up then
// happens before the program starts, as MPI libraries that open their
// connections at MPI_Init do, not inside its first timed exchange.
func (c *Comm) ConnectPeers(ctx context.Context, ranks ...int) error {
	var higher, lower []int
	for _, p := range ranks {
		if err := c.peerCheck(p); err != nil {
			return err
		}
		switch {
		case p > c.rank:
			higher = append(higher, p)
		case p < c.rank:
			lower = append(lower, p)
		}
	}
	if err := c.Preconnect(ctx, higher...); err != nil {
		return err
	}
	for _, p := range lower {
		select {
		case <-c.t().slots[p].linked:
		case <-ctx.Done():
			return c.errorf("connect peers: rank %d has not connected: %w", p, ctx.Err())
		case <-c.failed:
			return c.Err()
		}
	}
	return nil
}

// Isend starts sending b to rank to in the background (for instance to
// feed links to two clusters at once) and returns a function that waits for
// the send and reports its error. b must not change until then.
func (c *Comm) Isend(ctx context.Context, to, tag int, b []byte) (wait func() error) {
	if err := userTag(tag); err != nil {
		return func() error { return err }
	}
	done := make(chan error, 1)
	go func() { done <- c.send(ctx, to, int32(tag), b) }()
	return func() error {
		defer c.timed(time.Now())
		return <-done
	}
}

// Compute emulates work of the given reference-processor time: it waits
// work / (Speed x Processors) x Dilation x the node's load factor (read
// when the call starts: a load that changes during one call applies from
// the next). The wait is precise in total:
// lateness of the timer on one call is paid back on the next ones.
func (c *Comm) Compute(ctx context.Context, work time.Duration) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if work <= 0 {
		return nil
	}
	d := c.ComputeTime(work)
	c.computeNs.Add(int64(d))
	c.computeMu.Lock()
	defer c.computeMu.Unlock()
	target := d - c.debt
	if target <= 0 {
		c.debt -= d
		c.opts.Probe.Compute(d, 0, 0)
		return nil
	}
	start := time.Now()
	err := c.opts.Sleep(ctx, target)
	took := time.Since(start)
	c.debt = max(0, took-target)
	if err == nil {
		c.opts.Probe.Compute(d, target, took)
	}
	if err != nil {
		c.debt = 0
		return c.errorf("compute: %w", err)
	}
	return nil
}

// WorkFor is the reference-processor work that takes d on this rank at
// dilation 1 and without load: d x Speed x Processors.
func (c *Comm) WorkFor(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.opts.Speed * float64(c.opts.Processors))
}

// ComputeTime returns how long Compute waits for work on this rank.
func (c *Comm) ComputeTime(work time.Duration) time.Duration {
	return time.Duration(float64(work) / (c.opts.Speed * float64(c.opts.Processors)) * c.opts.Dilation * c.opts.Load.Factor())
}

// Close ends the communicator gracefully: it tells every peer goodbye, waits
// (at most Options.CloseTimeout) for theirs so nothing in flight is lost,
// closes the connections and waits for its goroutines. Pending operations
// fail with ErrClosed. Close is idempotent.
func (c *Comm) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	var firstErr error
	broken := c.Err() != nil
	// From now on no new connection: peers that never talked to this rank
	// get ErrPeerClosed when they try.
	c.linkMu.Lock()
	c.accepting = false
	links, connected := c.t().allLinks()
	c.linkMu.Unlock()
	if !broken {
		// Goodbye on every connection, whichever side opened it, so that
		// each of the peer's readers sees the end of its stream.
		for _, l := range links {
			if err := c.control(l, tagGoodbye, nil); err != nil && firstErr == nil {
				firstErr = c.errorf("goodbye to rank %d: %w", l.peer, err)
			}
		}
		timer := time.NewTimer(c.opts.CloseTimeout)
	wait:
		for _, s := range connected {
			select {
			case <-s.in.gone:
			case <-c.failed:
				break wait
			case <-timer.C:
				break wait
			}
		}
		timer.Stop()
	}
	c.shutdown(ErrClosed, !broken)
	return firstErr
}

// Abort ends the communicator at once and tells every peer why; their
// pending and later operations fail with ErrPeerAborted and the reason.
func (c *Comm) Abort(reason error) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return
	}
	c.done = true
	msg := "aborted"
	if reason != nil {
		msg = reason.Error()
	}
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	c.linkMu.Lock()
	c.accepting = false
	links, _ := c.t().allLinks()
	c.linkMu.Unlock()
	for _, l := range links {
		// A writer blocked on a stuck peer must not stop the abort.
		if l.wmu.TryLock() {
			_ = c.controlLocked(l, tagAbort, []byte(msg))
			l.wmu.Unlock()
		}
	}
	c.shutdown(c.errorf("aborted: %s", msg), false)
}

// control writes a control frame with a short deadline.
func (c *Comm) control(l *link, tag int32, b []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return c.controlLocked(l, tag, b)
}

func (c *Comm) controlLocked(l *link, tag int32, b []byte) error {
	_ = l.w.SetWriteDeadline(time.Now().Add(time.Second))
	defer func() { _ = l.w.SetWriteDeadline(time.Time{}) }()
	buf := make([]byte, headerLen+len(b))
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(b)))
	binary.BigEndian.PutUint32(buf[4:8], uint32(tag))
	copy(buf[headerLen:], b)
	_, err := l.w.Write(buf)
	return err
}

// shutdown closes the endpoint and every connection. Graceful: the shaped
// side first, so what it still holds is delivered; otherwise the socket
// first, so nothing waits for a stuck peer.
func (c *Comm) shutdown(err error, graceful bool) {
	c.closing.Store(true)
	c.fail(err)
	c.linkMu.Lock()
	c.accepting = false
	c.linkMu.Unlock()
	if c.ep != nil {
		// Waits for handshakes in progress; they find the Comm closed.
		_ = c.ep.Close()
	}
	c.linkMu.Lock()
	links, _ := c.t().allLinks()
	parked := c.parked
	c.parked = nil
	c.linkMu.Unlock()
	for _, p := range parked {
		// Its dialer sees a lost peer: this rank ends before the grow it
		// was dialed for.
		_ = p.c.Close()
	}
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func(l *link) {
			defer wg.Done()
			if graceful {
				_ = l.w.Close()
				_ = l.raw.Close()
			} else {
				_ = l.raw.Close()
				_ = l.w.Close()
			}
		}(l)
	}
	wg.Wait()
	c.readers.Wait()
	c.self.setGone(ErrClosed)
}
