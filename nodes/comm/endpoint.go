package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// Peer is one rank of a job as the other ranks see it.
type Peer struct {
	Rank    int
	Addr    string // host:port of the rank's Endpoint
	Cluster string // cluster of the rank's node: selects the egress link
}

// Options configures one rank.
type Options struct {
	// JobID names the job; connections from another job are refused.
	JobID string
	// Rank of this process in the job, 0-based.
	Rank int
	// Cluster of this rank's node.
	Cluster string
	// Speed is the relative compute rate of the node (1.0 = reference
	// processor). Default 1.
	Speed float64
	// Processors the rank computes with (one rank per node uses all of the
	// node's processors). Default 1.
	Processors int
	// Dilation >= 1 multiplies compute time (the shaper dilates the links).
	// Default 1.
	Dilation float64
	// Egress shapes this node's outgoing connections per destination
	// cluster. Nil means netem.Passthrough.
	Egress netem.Egress
	// Sleep is the precise wait used by Compute. Default: DefaultSleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// CloseTimeout bounds how long Close waits for the peers' goodbyes.
	// Default 10 s.
	CloseTimeout time.Duration
	// Targets are the node's links by destination cluster as the scenario
	// states them (undilated; the rank dilates them by Dilation). With
	// Probe set, every frame carries the arrival time these links give it
	// and the receiver records how late it really came (package fidelity).
	Targets map[string]netem.Link
	// Links is the scenario's whole link matrix (undilated): the ideal
	// cost of a collective (IdealBcast, IdealGather, IdealAllreduce) over
	// the job's peers. Zero: every ideal cost is 0.
	Links netem.Matrix
	// Probe records the rank's fidelity figures: every Compute's stretch
	// and every received frame's lateness. Nil records nothing.
	Probe *fidelity.Probe
	// Load stretches every Compute by its factor: the competing load on
	// the node (loading programs time-sharing its processors). Nil: none.
	Load *Load
	// Dial opens this rank's connections to its peers ("tcp", the peer's
	// address). Nil: a net.Dialer of this process's network namespace. The
	// kernel-shaper host probe dials from inside a namespace of its own.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) withDefaults() Options {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Processors <= 0 {
		o.Processors = 1
	}
	if o.Dilation < 1 {
		o.Dilation = 1
	}
	if o.Egress == nil {
		o.Egress = netem.Passthrough{}
	}
	if o.Sleep == nil {
		o.Sleep = DefaultSleep
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 10 * time.Second
	}
	return o
}

// PreciseBelow is the wait below which DefaultSleep uses the precise delay
// line; longer waits use a Go timer.
const PreciseBelow = time.Millisecond

// DefaultSleep is the wait Compute uses when Options.Sleep is nil. Waits
// shorter than PreciseBelow go to the process-wide precise delay line (Go
// timers round them up to about a millisecond); longer ones use a Go timer,
// which is then about 0.1 ms late, and Compute pays that lateness back on
// the next call, so totals stay exact. Measured on the 2-core host with a
// 32-rank wave job: the same execution time either way, but the delay line
// spent about 0.27 cores spinning for it; at dilation 200, finishing 35 ms
// waits on the line made their lateness worse (p99 5.4-9.1 % against
// 4.5-6.6 % on Go timers): the line's thread spins before each deadline
// at real-time priority, taking a core from the ranks that woke.
func DefaultSleep(ctx context.Context, d time.Duration) error {
	if d < PreciseBelow {
		return ptimer.Default().Sleep(ctx, d)
	}
	return timerSleep(ctx, d)
}

// timerSleep waits d on a Go timer (dial back-off).
func timerSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Endpoint is a rank's listener. It accepts the connections of its peers
// from the moment it exists (before Connect they are kept for the Comm,
// after it they are handed to the Comm), so ranks may call Connect in any
// order and a fast peer may send first.
type Endpoint struct {
	opts Options
	ln   net.Listener

	mu      sync.Mutex
	pending map[int]acceptedConn // handshaken before Connect
	comm    *Comm                // set by Connect: takes the later connections
	claimed bool
	closed  bool
	conns   map[net.Conn]struct{} // in handshake
	wg      sync.WaitGroup
}

type acceptedConn struct {
	c    net.Conn
	size int
}

// Listen opens the endpoint of one rank on addr ("127.0.0.1:0", "ip:0").
// ctx bounds the listen operation only; the endpoint lives until Close (or
// until the Comm obtained from it is closed).
func Listen(ctx context.Context, opts Options, addr string) (*Endpoint, error) {
	opts = opts.withDefaults()
	if opts.Rank < 0 {
		return nil, fmt.Errorf("comm: rank %d: must be >= 0", opts.Rank)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("comm: job %s rank %d: listen on %s: %w", opts.JobID, opts.Rank, addr, err)
	}
	e := &Endpoint{
		opts:    opts,
		ln:      ln,
		pending: make(map[int]acceptedConn),
		conns:   make(map[net.Conn]struct{}),
	}
	e.wg.Add(1)
	go e.acceptLoop()
	return e, nil
}

// Addr returns the host:port peers dial.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// Close stops accepting and closes the connections no Comm has taken. It
// does not close a Comm obtained from Connect (close that with Comm.Close,
// which closes the endpoint too), but that Comm can no longer be reached by
// peers it has no connection with yet: their sends fail with ErrPeerClosed.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	err := e.ln.Close()
	for c := range e.conns {
		_ = c.Close()
	}
	for r, a := range e.pending {
		_ = a.c.Close()
		delete(e.pending, r)
	}
	e.mu.Unlock()
	e.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("comm: close listener: %w", err)
	}
	return nil
}

func (e *Endpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			_ = c.Close()
			return
		}
		e.conns[c] = struct{}{}
		e.wg.Add(1)
		e.mu.Unlock()
		go e.handshake(c)
	}
}

const (
	magic         = "KCM1"
	handshakeWait = 10 * time.Second
	maxJobID      = 1024
	statusOK      = 0
	statusRefused = 1
	statusClosed  = 2 // the endpoint or its Comm is closed
)

// errPeerGone marks a dial to a peer that is gone: its endpoint refused
// the handshake because its Comm is closed, or nothing listens any more.
var errPeerGone = errors.New("peer's endpoint is closed")

// handshake reads the dialer's greeting and parks the connection until
// Connect, or hands it to the Comm.
func (e *Endpoint) handshake(c net.Conn) {
	defer e.wg.Done()
	keep := false
	defer func() {
		e.mu.Lock()
		delete(e.conns, c)
		e.mu.Unlock()
		if !keep {
			_ = c.Close()
		}
	}()
	_ = c.SetDeadline(time.Now().Add(handshakeWait))
	rank, size, job, err := readGreeting(c)
	if err != nil {
		return
	}
	if job != e.opts.JobID {
		refuse(c, statusRefused, fmt.Sprintf("job %q, not %q", job, e.opts.JobID))
		return
	}
	if rank == e.opts.Rank || rank < 0 || size <= rank {
		refuse(c, statusRefused, fmt.Sprintf("rank %d of %d must not dial rank %d", rank, size, e.opts.Rank))
		return
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		refuse(c, statusClosed, "endpoint closed")
		return
	}
	if cm := e.comm; cm != nil {
		// The Comm owns the connection from now on (Close must not close
		// it under a link); refused, it is closed below.
		delete(e.conns, c)
		e.mu.Unlock()
		keep = cm.adopt(rank, size, c)
		return
	}
	if e.claimed {
		e.mu.Unlock()
		refuse(c, statusClosed, "endpoint closed")
		return
	}
	if _, dup := e.pending[rank]; dup {
		e.mu.Unlock()
		refuse(c, statusRefused, fmt.Sprintf("rank %d already connected", rank))
		return
	}
	if _, err := c.Write([]byte{statusOK}); err != nil {
		e.mu.Unlock()
		return
	}
	_ = c.SetDeadline(time.Time{})
	e.pending[rank] = acceptedConn{c: c, size: size}
	delete(e.conns, c) // from now on the connection belongs to pending (or a Comm)
	keep = true
	e.mu.Unlock()
}

// refuse answers a greeting with a refusal and its reason.
func refuse(c net.Conn, status byte, msg string) {
	b := append([]byte{status}, msg...)
	_, _ = c.Write(b[:min(len(b), 255)])
}

func readGreeting(r io.Reader) (rank, size int, job string, err error) {
	var h [4 + 4 + 4 + 2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, 0, "", err
	}
	if string(h[:4]) != magic {
		return 0, 0, "", errors.New("bad magic")
	}
	rank = int(int32(binary.BigEndian.Uint32(h[4:8])))
	size = int(int32(binary.BigEndian.Uint32(h[8:12])))
	n := int(binary.BigEndian.Uint16(h[12:14]))
	if n > maxJobID {
		return 0, 0, "", errors.New("job id too long")
	}
	b := make([]byte, n)
	if _, err = io.ReadFull(r, b); err != nil {
		return 0, 0, "", err
	}
	return rank, size, string(b), nil
}

func greeting(job string, rank, size int) []byte {
	b := make([]byte, 0, 14+len(job))
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint32(b, uint32(int32(rank)))
	b = binary.BigEndian.AppendUint32(b, uint32(int32(size)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(job)))
	return append(b, job...)
}

// Connect makes this rank part of the job whose ranks peers lists (every
// rank, this one included, in any order) and returns its Comm at once: it
// dials nobody. Connections are lazy, as in MPI over TCP: a rank's
// connection to a peer is opened the first time it sends to that peer
// (either rank may dial; a rank that already accepted a connection from the
// peer sends over that one), so a job opens only the connections its
// communication pattern uses instead of the full mesh (n(n-1)/2 at once,
// 2,016 for 64 ranks: start-up storms that delayed the other jobs' messages).
// Receiving from a peer not connected yet just waits. The endpoint keeps
// accepting until the Comm is closed (closing the Comm closes the
// endpoint); connections accepted before Connect are handed to the Comm.
// The Comm's connections are shaped by the endpoint's Egress. An Endpoint
// connects once.
func (e *Endpoint) Connect(ctx context.Context, peers []Peer) (*Comm, error) {
	ps, err := sortPeers(e.opts.JobID, peers)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("comm: job %s rank %d: connect: %w", e.opts.JobID, e.opts.Rank, err)
	}
	me := e.opts.Rank
	n := len(ps)
	if me >= n {
		return nil, fmt.Errorf("comm: job %s: rank %d not among %d peers", e.opts.JobID, me, n)
	}
	e.mu.Lock()
	if e.closed || e.claimed {
		e.mu.Unlock()
		return nil, fmt.Errorf("comm: job %s rank %d: endpoint closed or already connected", e.opts.JobID, me)
	}
	e.claimed = true
	pending := e.pending
	e.pending = make(map[int]acceptedConn)
	var bad error
	for j, a := range pending {
		if a.size != n || j >= n {
			bad = fmt.Errorf("comm: job %s rank %d: rank %d believes the job has %d ranks, not %d", e.opts.JobID, me, j, a.size, n)
		}
	}
	if bad != nil {
		e.mu.Unlock()
		for _, a := range pending {
			_ = a.c.Close()
		}
		return nil, bad
	}
	c := newComm(e.opts, ps, e)
	// Taking the pending connections and handing later ones to the Comm
	// happen under e.mu together, so none is lost in between.
	c.linkMu.Lock()
	for j, a := range pending {
		c.install(c.t().slots[j], a.c)
	}
	c.linkMu.Unlock()
	e.comm = c
	e.mu.Unlock()
	return c, nil
}

// dial connects to a peer and performs the handshake. Dial errors (the
// peer's node unreachable for now) are retried with backoff until ctx ends;
// a refused handshake is final, and so is a refused connection: the peer
// listened before its address was published, so nothing listening means
// the peer is gone (both wrap errPeerGone).
func dial(ctx context.Context, dialer func(ctx context.Context, network, addr string) (net.Conn, error), addr, job string, rank, size int) (net.Conn, error) {
	if dialer == nil {
		var d net.Dialer
		dialer = d.DialContext
	}
	backoff := 5 * time.Millisecond
	for {
		c, err := dialer(ctx, "tcp", addr)
		if err == nil {
			if err = hello(ctx, c, job, rank, size); err == nil {
				return c, nil
			}
			_ = c.Close()
			return nil, err
		}
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return nil, err // a malformed address never gets better
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %w", errPeerGone, err)
		}
		if serr := timerSleep(ctx, backoff); serr != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", serr, err)
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func hello(ctx context.Context, c net.Conn, job string, rank, size int) error {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	dl := time.Now().Add(handshakeWait)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(greeting(job, rank, size)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("handshake: %w", err)
	}
	if st[0] != statusOK {
		msg, _ := io.ReadAll(io.LimitReader(c, 254))
		if st[0] == statusClosed {
			return fmt.Errorf("handshake refused: %s: %w", msg, errPeerGone)
		}
		return fmt.Errorf("handshake refused: %s", msg)
	}
	return c.SetDeadline(time.Time{})
}
