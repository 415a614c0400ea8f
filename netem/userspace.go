package netem

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// Userspace shaper defaults.
const (
	// DefaultSegmentSize is the largest piece a Write is cut into; each
	// piece is one release on the delay line.
	DefaultSegmentSize = 64 << 10
	// DefaultInlineSpin: a single-segment Write on an idle connection whose
	// delivery time is at most this far away spins in the writing goroutine
	// and writes directly, instead of a round trip through the timer thread
	// (whose wake-up costs tens of µs on small virtual machines).
	DefaultInlineSpin = 20 * time.Microsecond
	// DefaultFlushTimeout bounds how long Close waits, past the last
	// segment's delivery time, for queued data to reach the socket.
	DefaultFlushTimeout = 5 * time.Second
	// BandwidthMsgSize is the message size of the bandwidth figures in Link
	// (1 MB ping-pong, SPEC §1).
	BandwidthMsgSize = 1_000_000
	// tcpMSS is the payload of one TCP segment at MTU 1500 (loss model).
	tcpMSS = 1448
	// backlogSlack is added to the bandwidth-delay product to bound the
	// bytes queued per connection.
	backlogSlack = 1 << 20
)

// WireRate is the serialisation rate that makes a ping-pong with
// BandwidthMsgSize messages report l.Bandwidth. The DAS-3 figures are
// msg_size / (RTT/2) with full-size echo, so they include the one-way
// latency: one way takes Latency + msg/rate, and
// rate = msg / (msg/Bandwidth - Latency). It returns 0 (unlimited) when
// Bandwidth is 0, and also when the latency alone already exceeds the time
// the bandwidth allows for a message (the bandwidth is then unreachable and
// the link is latency-bound).
func WireRate(l Link) float64 {
	if l.Bandwidth <= 0 {
		return 0
	}
	t := BandwidthMsgSize/l.Bandwidth - l.Latency.Seconds()
	if t <= 0 {
		return 0
	}
	return BandwidthMsgSize / t
}

// serialise is the token bucket of one (node, destination cluster) link,
// with depth zero: a link that is free from time free (ns) on, asked at time
// now to carry n bytes at rate bytes/s, starts at max(now, free) and finishes
// n/rate later. rate 0 is unlimited: the bytes finish at once and do not
// queue behind earlier ones.
func serialise(now, free int64, n int, rate float64) (start, finish int64) {
	if rate <= 0 {
		return now, now
	}
	start = max(now, free)
	return start, start + int64(math.Ceil(float64(n)*1e9/rate))
}

// UserspaceStats counts what a userspace shaper released.
type UserspaceStats struct {
	Segments int64
	Bytes    int64
	// Lateness of releases: time the segment became writable on the timer
	// thread (or inline) minus its delivery deadline.
	Lateness ptimer.Stats
	// Drops counts bytes discarded: only on a write error or when Close
	// gives up flushing. Shaping itself never drops; Write blocks instead.
	Drops int64
}

// UserspaceEgress shapes a node's TCP connections in the process: per
// destination cluster one zero-depth token bucket shared by all of the
// node's connections to that cluster, and a one-way delay. Writes are cut
// into segments of at most SegmentSize; each segment gets a serialisation
// finish time from the bucket (max(now, bucket free) + len/rate) and a
// delivery deadline finish + delay, where delay is the link latency minus
// the latency the transport already adds (see Overhead). The rate is WireRate(link): the link's bandwidth is a 1 MB
// ping-pong figure that includes one latency. The timer thread of a
// ptimer.Line writes each segment to the socket at its deadline, in order,
// with a non-blocking write; when the socket buffer is full, a per-connection
// goroutine finishes the segment with a blocking write (and the segments
// behind it as they fall due). A single-segment Write on an idle connection
// due within InlineSpin is written by the calling goroutine itself. Reads
// are not shaped: the sender shapes.
//
// Backpressure: at most rate x delay + 1 MiB is queued per connection;
// Write blocks beyond that (honouring the write deadline). Close delivers
// what is queued, then closes.
//
// Jitter adds a uniform offset in [-Jitter, +Jitter] to each segment's delay;
// TCP keeps order, so a segment is never released before the previous one.
// TCP cannot lose bytes: Loss is modelled as retransmission, each lost
// MTU-sized packet (probability Loss per packet) costs its bytes again on
// the bucket and a segment with any loss is delayed by one extra round trip
// (2 x Latency). Loss is clamped to [0, 0.99].
//
// A connection to a cluster that is not in the plan passes through unshaped
// and is counted in Unknown.
//
// Set the exported fields before the first Wrap.
type UserspaceEgress struct {
	// Overhead is the one-way latency the shaped transport adds by itself,
	// as a function of the delay the shaper adds (see Overhead). The delay
	// for a link of latency L is the d with d + Overhead.At(d) = L, or 0
	// when Overhead.At(0) >= L (the link is at the floor). NewUserspace sets
	// it to DefaultOverhead(), measured once per process.
	Overhead Overhead
	// Baseline, when > 0, replaces Overhead by a constant: every link's
	// delay is its latency minus Baseline.
	Baseline time.Duration
	// SegmentSize is the largest release unit (default DefaultSegmentSize).
	SegmentSize int
	// InlineSpin: see DefaultInlineSpin. Negative disables inline writes.
	InlineSpin time.Duration
	// FlushTimeout: see DefaultFlushTimeout.
	FlushTimeout time.Duration

	plan     EgressPlan // dilated
	dilation float64
	line     *ptimer.Line
	base     time.Time
	seed     uint64

	mu      sync.Mutex
	frozen  bool
	paths   map[string]*path
	unknown map[string]int
	closed  bool

	// Settings frozen at the first Wrap.
	segSize      int
	inlineSpin   time.Duration
	flushTimeout time.Duration

	segments atomic.Int64
	bytes    atomic.Int64
	drops    atomic.Int64
	handoffs atomic.Int64 // socket buffer full: release finished by the writer goroutine
	lat      ptimer.Histogram
}

// NewUserspace returns the userspace shaper of one node. Every link of the
// plan is dilated by dilation (latency x d, bandwidth / d). line is the
// delay line that releases segments; nil means ptimer.Default().
func NewUserspace(plan EgressPlan, line *ptimer.Line, dilation float64) *UserspaceEgress {
	e := newUserspace(plan, line, dilation)
	e.Overhead = DefaultOverhead()
	return e
}

// newUserspace is NewUserspace with zero baselines (no measurement).
func newUserspace(plan EgressPlan, line *ptimer.Line, dilation float64) *UserspaceEgress {
	if line == nil {
		line = ptimer.Default()
	}
	if dilation <= 0 {
		dilation = 1
	}
	p := EgressPlan{Node: plan.Node, Cluster: plan.Cluster, To: make(map[string]Link, len(plan.To))}
	for dst, l := range plan.To {
		p.To[dst] = l.Dilate(dilation)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(plan.Node + "/" + plan.Cluster))
	return &UserspaceEgress{
		SegmentSize:  DefaultSegmentSize,
		InlineSpin:   DefaultInlineSpin,
		FlushTimeout: DefaultFlushTimeout,
		plan:         p,
		dilation:     dilation,
		line:         line,
		base:         time.Now(),
		seed:         h.Sum64(),
		paths:        make(map[string]*path),
		unknown:      make(map[string]int),
	}
}

// path is the shaping state towards one destination cluster.
type path struct {
	dst    string
	link   Link    // dilated target
	rate   float64 // wire rate, bytes/s; 0 unlimited
	delay  time.Duration
	jitter time.Duration
	loss   float64
	rtt    time.Duration // retransmission penalty

	mu   sync.Mutex
	free int64 // ns since UserspaceEgress.base when the link is next idle
	rng  *rand.Rand
}

// reserve books n bytes on the link at time now and returns the delivery
// deadline (ns since base).
func (p *path) reserve(now int64, n int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	wire := n
	var extra time.Duration
	if p.loss > 0 {
		pkts := (n + tcpMSS - 1) / tcpMSS
		lost := 0
		for range pkts {
			if p.rng.Float64() < p.loss {
				lost++
			}
		}
		if lost > 0 {
			wire += lost * tcpMSS
			extra = p.rtt
		}
	}
	_, finish := serialise(now, p.free, wire, p.rate)
	if p.rate > 0 {
		p.free = finish
	}
	d := p.delay + extra
	if p.jitter > 0 {
		d += time.Duration((p.rng.Float64()*2 - 1) * float64(p.jitter))
		d = max(d, 0)
	}
	return finish + int64(d)
}

func (e *UserspaceEgress) now() int64 { return int64(time.Since(e.base)) }

// overhead is the transport's own latency model in effect.
func (e *UserspaceEgress) overhead() Overhead {
	if e.Baseline > 0 {
		return Overhead{{Overhead: e.Baseline}}
	}
	return e.Overhead
}

// freeze builds the per-destination paths from the exported settings; it
// runs once, at the first Wrap or Effective.
func (e *UserspaceEgress) freeze() {
	if e.frozen {
		return
	}
	e.frozen = true
	if e.SegmentSize <= 0 {
		e.SegmentSize = DefaultSegmentSize
	}
	if e.FlushTimeout <= 0 {
		e.FlushTimeout = DefaultFlushTimeout
	}
	e.segSize, e.inlineSpin, e.flushTimeout = e.SegmentSize, e.InlineSpin, e.FlushTimeout
	i := uint64(0)
	for dst, l := range e.plan.To {
		i++
		loss := min(max(l.Loss, 0), 0.99)
		e.paths[dst] = &path{
			dst:    dst,
			link:   l,
			rate:   WireRate(l),
			delay:  e.overhead().DelayFor(l.Latency),
			jitter: l.Jitter,
			loss:   loss,
			rtt:    2 * l.Latency,
			rng:    rand.New(rand.NewPCG(e.seed, i)),
		}
	}
}

// Plan returns the (dilated) plan the shaper applies.
func (e *UserspaceEgress) Plan() EgressPlan { return e.plan }

// Wrap implements Egress. Connections to an unknown cluster, and all
// connections after Close, are returned unchanged.
func (e *UserspaceEgress) Wrap(c net.Conn, dstCluster string) net.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.freeze()
	if e.closed {
		return c
	}
	p, ok := e.paths[dstCluster]
	if !ok {
		e.unknown[dstCluster]++
		return c
	}
	sc := &shapedConn{
		Conn:    c,
		e:       e,
		p:       p,
		limit:   int(p.rate*p.delay.Seconds()) + backlogSlack,
		changed: make(chan struct{}),
	}
	if p.rate == 0 {
		sc.limit = backlogSlack + 64*e.segSize
	}
	if scc, ok := c.(syscall.Conn); ok {
		if raw, err := scc.SyscallConn(); err == nil {
			sc.raw = raw
		}
	}
	return sc
}

// Unknown returns the destination clusters that Wrap was asked for but the
// plan does not know, with how many connections passed through unshaped.
func (e *UserspaceEgress) Unknown() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.unknown))
	for k, v := range e.unknown {
		out[k] = v
	}
	return out
}

// Stats returns what the shaper has released so far.
func (e *UserspaceEgress) Stats() UserspaceStats {
	return UserspaceStats{
		Segments: e.segments.Load(),
		Bytes:    e.bytes.Load(),
		Lateness: e.lat.Stats(),
		Drops:    e.drops.Load(),
	}
}

// LatenessHistogram exposes the release lateness histogram (for merging).
func (e *UserspaceEgress) LatenessHistogram() *ptimer.Histogram { return &e.lat }

// DelayStats implements Installed.
func (e *UserspaceEgress) DelayStats() DelayStats {
	s := e.Stats()
	return DelayStats{Released: s.Segments, Drops: s.Drops, Lateness: s.Lateness}
}

// Effective implements Installed: per destination cluster, the link the
// shaper produces. Latency is never below Baseline (the transport's own
// floor); bandwidth is the requested figure, or for a link whose latency
// leaves no time for its bandwidth, what a 1 MB ping-pong at that latency
// over an unlimited wire would report at best.
func (e *UserspaceEgress) Effective() map[string]Link {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.freeze()
	out := make(map[string]Link, len(e.paths))
	for dst, p := range e.paths {
		l := p.link
		if l.Unavailable {
			out[dst] = l
			continue
		}
		l.Latency = max(l.Latency, e.overhead().At(0))
		if l.Bandwidth > 0 && p.rate == 0 {
			l.Bandwidth = BandwidthMsgSize / max(l.Latency.Seconds(), 1e-9)
		}
		out[dst] = l
	}
	return out
}

// Close implements Installed: connections wrapped later pass through
// unshaped; connections already wrapped keep their shaping until they are
// closed (they belong to the application).
func (e *UserspaceEgress) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}

// Describe renders the per-destination settings, for logs.
func (e *UserspaceEgress) Describe() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.freeze()
	dsts := make([]string, 0, len(e.paths))
	for d := range e.paths {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	s := fmt.Sprintf("userspace egress of %s (%s), overhead %v:", e.plan.Node, e.plan.Cluster, e.overhead())
	for _, d := range dsts {
		p := e.paths[d]
		s += fmt.Sprintf(" %s[wire %.1f MB/s, delay %v]", d, p.rate/1e6, p.delay)
	}
	return s
}

var segPool = sync.Pool{New: func() any { b := make([]byte, DefaultSegmentSize); return &b }}

func getBuf(n int) *[]byte {
	if n <= DefaultSegmentSize {
		b := segPool.Get().(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

func putBuf(b *[]byte) {
	if cap(*b) == DefaultSegmentSize {
		*b = (*b)[:cap(*b)]
		segPool.Put(b)
	}
}

// segment is one release: a copy of part of a Write, due at a deadline.
type segment struct {
	c       *shapedConn
	buf     *[]byte
	orphan  *[]byte // buf of a segment discarded while the timer thread wrote it
	off     int
	at      int64 // deadline, ns since UserspaceEgress.base
	due     bool
	retries int
}

// shapedConn is a connection whose writes go through the delay line.
type shapedConn struct {
	net.Conn
	e     *UserspaceEgress
	p     *path
	raw   syscall.RawConn // nil: every release goes through the writer goroutine
	limit int

	wmu sync.Mutex // serialises Write calls (each Write's bytes stay contiguous)

	mu      sync.Mutex
	q       []*segment // queued, in deadline order
	queued  int        // bytes in q
	last    int64      // deadline of the last segment queued
	writing bool       // the writer goroutine owns the socket
	// timerWriting: the timer thread is writing q[0] outside mu.
	timerWriting bool
	err          error // sticky: write error or closed
	closing      bool
	wdl          time.Time
	changed      chan struct{} // closed and replaced whenever q shrinks or err is set
	wg           sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// broadcast wakes everyone waiting for the queue to change. Call with mu.
func (c *shapedConn) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// pop removes the head segment after it was written. Call with mu.
func (c *shapedConn) pop() {
	s := c.q[0]
	c.q[0] = nil
	c.q = c.q[1:]
	n := len(*s.buf)
	c.queued -= n
	c.e.segments.Add(1)
	c.e.bytes.Add(int64(n))
	putBuf(s.buf)
	s.buf = nil
	c.broadcast()
}

// fail records a terminal error and discards what is queued. Call with mu.
func (c *shapedConn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	if c.queued > 0 {
		c.e.drops.Add(int64(c.queued))
	}
	for i, s := range c.q {
		if s.buf != nil {
			switch {
			case i == 0 && c.timerWriting:
				s.orphan = s.buf // the timer thread recycles it after its write
			case i == 0 && c.writing:
				// the writer goroutine may still be writing it: leave it to the GC
			default:
				putBuf(s.buf)
			}
			s.buf = nil
		}
		c.q[i] = nil
	}
	c.q = nil
	c.queued = 0
	c.broadcast()
}

// startWriter hands the socket to the writer goroutine. Call with mu.
func (c *shapedConn) startWriter() {
	if c.writing {
		return
	}
	if c.raw != nil {
		c.e.handoffs.Add(1)
	}
	c.writing = true
	c.wg.Add(1)
	go c.writer()
}

// writer writes due segments with ordinary blocking writes; it exits as
// soon as the head of the queue is not due yet (the timer thread then
// writes again).
func (c *shapedConn) writer() {
	defer c.wg.Done()
	c.mu.Lock()
	for c.err == nil && len(c.q) > 0 && c.q[0].due {
		s := c.q[0]
		b := (*s.buf)[s.off:]
		c.mu.Unlock()
		n, err := c.Conn.Write(b)
		c.mu.Lock()
		if c.err != nil { // closed meanwhile; fail already discarded the queue
			break
		}
		s.off += n
		if err != nil {
			c.fail(fmt.Errorf("netem: shaped write: %w", err))
			break
		}
		c.pop()
	}
	c.writing = false
	c.mu.Unlock()
}

// lockRetry is how long a release spins for the connection's lock before
// it steps aside and retries on the line (the holder is a goroutine that
// may have been descheduled; the timer thread must not wait for it). Each
// further retry waits twice as long, up to 64 x lockRetry.
const lockRetry = 10 * time.Microsecond

// release runs on the timer thread at s's deadline. The socket write
// happens outside mu (with timerWriting set), so goroutines that take mu
// never wait behind a system call, and the timer thread meets mu held only
// for the few instructions of a queue update.
func (s *segment) release() {
	c := s.c
	if !ptimer.TryLockFor(&c.mu, lockRetry) {
		s.retries++
		c.e.line.At(time.Now().Add(lockRetry<<min(s.retries, 6)), s.release)
		return
	}
	if s.buf == nil || c.err != nil {
		c.mu.Unlock()
		return
	}
	s.due = true
	c.e.lat.Record(time.Duration(c.e.now() - s.at))
	if c.raw == nil || c.writing || len(c.q) == 0 || c.q[0] != s {
		c.startWriter()
		c.mu.Unlock()
		return
	}
	c.timerWriting = true
	b := (*s.buf)[s.off:]
	c.mu.Unlock()

	n, err := rawWrite(c.raw, b)

	c.mu.Lock() // uncontended in practice: holders only update the queue
	defer c.mu.Unlock()
	c.timerWriting = false
	if s.buf == nil || c.err != nil { // failed or closed meanwhile
		if s.orphan != nil {
			putBuf(s.orphan)
			s.orphan = nil
		}
		return
	}
	s.off += n
	switch {
	case s.off == len(*s.buf):
		c.pop()
		if len(c.q) > 0 && c.q[0].due { // cannot happen on one timer thread; be safe
			c.startWriter()
		}
	case err == nil: // socket buffer full: finish with a blocking write
		c.startWriter()
	default:
		c.fail(fmt.Errorf("netem: shaped write: %w", err))
	}
}

// rawWrite writes what the socket takes now without blocking. A full
// socket buffer is not an error (it returns the count written).
func rawWrite(raw syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			m, e := syscall.Write(int(fd), b)
			if m > 0 {
				n += m
				b = b[m:]
			}
			if e == syscall.EINTR {
				continue
			}
			if e != nil {
				if e != syscall.EAGAIN {
					werr = e
				}
				break
			}
			if m == 0 {
				break
			}
		}
		return true
	})
	if err != nil {
		return n, err
	}
	return n, werr
}

// writeErr is the error a Write returns now: net.ErrClosed once Close has
// begun, else the sticky delivery error. Call with mu.
func (c *shapedConn) writeErr() error {
	if c.closing {
		return net.ErrClosed
	}
	return c.err
}

// waitSpace blocks until n more bytes fit in the backlog.
func (c *shapedConn) waitSpace(n int) error {
	for {
		c.mu.Lock()
		if err := c.writeErr(); err != nil {
			c.mu.Unlock()
			return err
		}
		if c.queued == 0 || c.queued+n <= c.limit {
			c.mu.Unlock()
			return nil
		}
		ch, dl := c.changed, c.wdl
		c.mu.Unlock()
		if dl.IsZero() {
			<-ch
			continue
		}
		d := time.Until(dl)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return os.ErrDeadlineExceeded
		}
	}
}

// Write queues b for delivery and returns once every byte is queued (it
// blocks while the backlog is full). An error from an earlier delivery is
// returned by the next Write.
func (c *shapedConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	seg := c.e.segSize
	written := 0
	for len(b) > 0 {
		n := min(len(b), seg)
		if err := c.waitSpace(n); err != nil {
			return written, err
		}
		// The bucket is booked outside mu (wmu orders this connection's
		// writes), so that the timer thread rarely meets mu held.
		now := c.e.now()
		at := max(c.p.reserve(now, n), c.last)
		buf := getBuf(n)
		copy(*buf, b[:n])
		c.mu.Lock()
		if err := c.writeErr(); err != nil {
			c.mu.Unlock()
			putBuf(buf)
			return written, err
		}
		c.last = at
		if c.raw != nil && n == len(b) && len(c.q) == 0 && !c.writing && !c.timerWriting &&
			c.e.inlineSpin >= 0 && at-now <= int64(c.e.inlineSpin) {
			c.mu.Unlock()
			putBuf(buf)
			return written + c.writeInline(b, at), c.inlineErr()
		}
		s := &segment{c: c, buf: buf, at: at}
		c.q = append(c.q, s)
		c.queued += n
		c.mu.Unlock()
		c.e.line.At(c.e.base.Add(time.Duration(at)), s.release)
		written += n
		b = b[n:]
	}
	return written, nil
}

// writeInline spins until at and writes b directly. The queue is empty and
// wmu is held, so nothing else writes to the socket meanwhile.
func (c *shapedConn) writeInline(b []byte, at int64) int {
	now := c.e.now()
	for now < at {
		now = c.e.now()
	}
	c.e.lat.Record(time.Duration(now - at))
	n, err := c.Conn.Write(b)
	c.e.segments.Add(1)
	c.e.bytes.Add(int64(n))
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("netem: shaped write: %w", err)
			c.broadcast()
		}
		c.mu.Unlock()
	}
	return n
}

func (c *shapedConn) inlineErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil && !errors.Is(c.err, net.ErrClosed) {
		return c.err
	}
	return nil
}

// flush waits until the queue is empty, an error ends it, or until.
func (c *shapedConn) flush(until time.Time) bool {
	for {
		c.mu.Lock()
		if len(c.q) == 0 || c.err != nil {
			c.mu.Unlock()
			return true
		}
		ch := c.changed
		c.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
		}
	}
}

// Close delivers what is queued (waiting at most FlushTimeout past the last
// deadline; what is left then counts as dropped) and closes the connection.
func (c *shapedConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		last := c.last
		c.broadcast()
		c.mu.Unlock()
		c.flush(c.e.base.Add(time.Duration(last)).Add(c.e.flushTimeout))
		c.mu.Lock()
		c.fail(net.ErrClosed)
		c.mu.Unlock()
		c.closeErr = c.Conn.Close()
		c.wg.Wait()
	})
	return c.closeErr
}

// CloseWrite flushes and half-closes the connection when the underlying
// connection supports it.
func (c *shapedConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("netem: %T cannot half-close", c.Conn)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	c.flush(c.e.base.Add(time.Duration(last)).Add(c.e.flushTimeout))
	return cw.CloseWrite()
}

// SetNoDelay forwards to the underlying TCP connection if it has one.
func (c *shapedConn) SetNoDelay(noDelay bool) error {
	if t, ok := c.Conn.(interface{ SetNoDelay(bool) error }); ok {
		return t.SetNoDelay(noDelay)
	}
	return nil
}

// SetDeadline sets the read deadline and the write deadline.
func (c *shapedConn) SetDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline bounds both the wait for backlog space in Write and the
// underlying socket writes.
func (c *shapedConn) SetWriteDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *shapedConn) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	c.wdl = t
	c.broadcast()
	c.mu.Unlock()
}

// Unwrap returns the underlying connection.
func (c *shapedConn) Unwrap() net.Conn { return c.Conn }

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
