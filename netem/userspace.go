package netem

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// Userspace shaper defaults.
const (
	// DefaultSegmentSize is the largest piece a Write is cut into; each
	// piece is one frame on the wire and one release at the receiver.
	DefaultSegmentSize = 64 << 10
	// DefaultInlineSpin: a receiver whose next segment is due at most this
	// far away spins in its own goroutine until then, instead of a round
	// trip through the delay line's thread (whose wake-up of a goroutine
	// costs tens of µs on small virtual machines).
	DefaultInlineSpin = 20 * time.Microsecond
	// BandwidthMsgSize is the message size of the bandwidth figures in Link
	// (1 MB ping-pong, SPEC §1).
	BandwidthMsgSize = 1_000_000
	// tcpMSS is the payload of one TCP segment at MTU 1500 (loss model).
	tcpMSS = 1448
	// backlogSlack is added to the bandwidth-delay product to bound the
	// bytes a sender may have on the wire ahead of their delivery time.
	backlogSlack = 1 << 20
	// HoldTolerance is the share of a link's (dilated) latency by which the
	// delay line may wake a held reader late rather than spin before the
	// delivery time (ptimer.Line.AtWithin): 2 %, a fifth of what the
	// fidelity monitor allows a link (10 %). On DAS-3's 30 µs cluster links
	// at dilation 1 it is under a µs (the line spins, as it must); at
	// dilation 200 it is 120 µs, more than the machine's wake-up overshoot,
	// and the line sleeps to each deadline, leaving the cores to the ranks
	// a lock-step burst wakes.
	HoldTolerance = 0.02
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
	// Segments and Bytes the shaper's connections released to their
	// readers (the receiving side of the shaper's connections).
	Segments int64
	Bytes    int64
	// Lateness of releases: the time the reading goroutine resumed with a
	// segment minus the segment's delivery time.
	Lateness ptimer.Stats
	// Drops counts bytes a Write could not put on the wire (a write
	// error). Shaping itself never drops; Write blocks instead.
	Drops int64
}

// UserspaceEgress shapes a node's TCP connections in the process: per
// destination cluster one zero-depth token bucket shared by all of the
// node's connections to that cluster, and a one-way delay.
//
// How. Writes are cut into segments of at most SegmentSize; each segment
// gets a serialisation finish time from the bucket (max(now, bucket free) +
// len/rate) and a delivery time finish + delay, where delay is the link
// latency minus the latency the transport already adds (see Overhead). The
// rate is WireRate(link): the link's bandwidth is a 1 MB ping-pong figure
// that includes one latency. The sender writes each segment at once, framed
// with its delivery time (CLOCK_MONOTONIC, shared by every process of the
// kernel); the receiving end, wrapped by the shaper of its own node, holds
// it until that time and only then lets the reader have it. Both ends of a
// connection must therefore be wrapped by a UserspaceEgress (each with its
// own node's plan: every end shapes what it sends). A reader whose peer
// does not frame its bytes receives them unshaped.
//
// Why the receiver. The work of a write (a system call, the kernel's
// loopback path) happens before the delivery time, in the sender's own
// goroutine, on whichever core is free; at the delivery time only the
// reader's wake-up remains. A lock-step exchange of a parallel job puts
// tens of frames due at one instant: released by one thread writing each to
// its socket (11-15 µs apiece here), the last left about a millisecond late;
// held at the receivers, they resume within tens of µs (docs/fidelity.md).
//
// Holding. A hold due within InlineSpin spins in the reading goroutine;
// one due within CoarseThreshold waits on the delay line (a ptimer.Line
// callback wakes the reader); a longer one sleeps on a Go timer until
// CoarseGuard before the delivery time, then on the line.
//
// Backpressure: a sender runs at most rate x delay + 1 MiB of bytes ahead
// of their delivery times (their transmission ends no later than delay +
// 1 MiB / rate from now); beyond that Write waits (honouring the write
// deadline). TCP's own flow control bounds what the receiver buffers.
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
	// SegmentSize is the largest frame (default DefaultSegmentSize).
	SegmentSize int
	// InlineSpin: see DefaultInlineSpin. Negative: never spin.
	InlineSpin time.Duration

	plan     EgressPlan // dilated
	dilation float64
	line     *ptimer.Line
	seed     uint64

	mu      sync.Mutex
	frozen  bool
	paths   map[string]*path
	unknown map[string]int
	closed  bool

	// Settings frozen at the first Wrap.
	segSize    int
	inlineSpin time.Duration

	segments atomic.Int64
	bytes    atomic.Int64
	drops    atomic.Int64
	lat      ptimer.Histogram
}

// NewUserspace returns the userspace shaper of one node. Every link of the
// plan is dilated by dilation (latency x d, bandwidth / d). line is the
// delay line that wakes holding readers; nil means ptimer.Default().
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
		SegmentSize: DefaultSegmentSize,
		InlineSpin:  DefaultInlineSpin,
		plan:        p,
		dilation:    dilation,
		line:        line,
		seed:        h.Sum64(),
		paths:       make(map[string]*path),
		unknown:     make(map[string]int),
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
	ahead  int64         // ns a sender may run ahead of the bucket (backpressure)
	// tolerance: how late the delay line may wake a reader held for this
	// link (HoldTolerance of its latency).
	tolerance time.Duration

	mu   sync.Mutex
	free int64 // Mono ns when the link is next idle
	rng  *rand.Rand
	cut  chan struct{} // non-nil while the destination is cut off (Cut)
}

// reserve books n bytes on the link at time now (Mono ns) and returns the
// delivery time.
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

// backlog is how far (ns) the link's bucket is booked beyond now.
func (p *path) backlog(now int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free - now
}

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
	e.segSize, e.inlineSpin = min(e.SegmentSize, maxFrame), e.InlineSpin
	i := uint64(0)
	for dst, l := range e.plan.To {
		i++
		p := &path{dst: dst, rng: rand.New(rand.NewPCG(e.seed, i))}
		p.set(l, e.overhead())
		e.paths[dst] = p
	}
}

// Plan returns the (dilated) plan the shaper applies.
func (e *UserspaceEgress) Plan() EgressPlan { return e.plan }

// Wrap implements Egress: what c sends is shaped by this node's link to
// dstCluster, and what it receives is held until the delivery times its
// peer (wrapped by the peer's own egress) stamped. Connections to an
// unknown cluster, and all connections after Close, are returned unchanged.
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
	return newShapedConn(c, e, p)
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
