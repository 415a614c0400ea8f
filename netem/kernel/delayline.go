package kernel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// DelayLine holds the packets that netfilter diverts into NFQUEUE queues
// and releases each one at its deadline: the time it reached userspace plus
// its queue's one-way delay. (Kernel timestamps of queued packets are not
// used: TCP data carried none here, and the clock of those that carry one
// depends on where the packet came from.)
//
// Each delay line is served by its own thread (see lineThread for why not
// one thread for all): a locked OS thread with 1 ns timer slack that waits
// in ppoll on the line's queue socket with the line's earliest deadline as
// timeout, spins the last stretch before a deadline, and issues the
// verdicts itself. Receiving, holding and releasing on one thread avoids
// hand-offs between threads, which cost tens of microseconds each on a
// virtual machine (measured: releasing through a separate timer thread and
// a netpoller reader added about 150 µs per packet here). A line without
// packets costs nothing: its thread sleeps without a timeout.
//
// Packets of one sender share one delay and one serialiser, so their
// deadlines are in arrival order; where the packets due are the oldest of
// their queue, one batch verdict ("accept every packet up to id N")
// releases them all, else each gets its own verdict, in one write.
type DelayLine struct {
	sock     *nfqSock
	qs       []*delayQueue
	byN      map[uint16]*delayQueue
	spinCfg  time.Duration // DelayLineConfig.Spin: 0 adapt, > 0 fixed, < 0 never
	realtime bool
	th       *lineThread
	due      []held // release's scratch (thread only)
	vbuf     []byte // release's verdicts (thread only)

	lateness    ptimer.Histogram // deadline to verdict issued
	verdictCost ptimer.Histogram // duration of the verdict system call
	received    atomic.Int64
	released    atomic.Int64
	early       atomic.Int64 // released ahead of the deadline, within Coalesce
	oneByOne    atomic.Int64 // released by verdicts of their own
	bytes       atomic.Int64
	sendErrs    atomic.Int64
	lateWakes   atomic.Int64 // timed wake-ups that came after this line's deadline

	proc   *os.File // the namespace's /proc/net/netfilter/nfnetlink_queue
	procMu sync.Mutex

	closed atomic.Bool
	failed bool // thread only: the socket failed, the line is no longer polled
	err    atomic.Pointer[error]
}

// delayQueue is one NFQUEUE queue: the packets from one source cluster.
// Each sending node has its own line in it (see srcLine), so that one
// sender's serialised burst does not hold another's packets back.
type delayQueue struct {
	num     uint16
	cluster string
	delay   atomic.Int64  // ns; SetDelay changes it while the thread runs
	perByte atomic.Uint64 // math.Float64bits of ns per payload byte; 0: no serialiser
	srcs    map[[4]byte]*srcLine
	lines   []*srcLine // srcs in the order they were first seen
	lastID  uint32     // the latest packet id read (ids grow per queue)
	any     bool
}

// srcLine holds one sender's packets of a queue, in arrival (and id)
// order, their deadlines never decreasing.
type srcLine struct {
	fifo   []held
	head   int
	free   int64 // the sender's wire is busy until then (serialiser), ns
	lastAt int64
}

type held struct {
	id    uint32
	at    int64 // deadline, CLOCK_MONOTONIC ns
	bytes int
}

// serialised is the deadline of a packet of payload bytes that reached
// userspace at t, for a sender whose wire is free from free on, with
// nsPerByte of wire time per payload byte and a one-way delay: its wire
// time starts when both it and the wire are there, and it arrives delay
// after the wire time ends. It returns the deadline and when the wire is
// free again. nsPerByte 0 is no serialiser: the deadline is t + delay.
//
// Why at the receiver: the sender's HTB class lets its burst (at least
// 16 KB) and a whole GSO packet (up to 64 KB) leave at once after being
// idle, so a message of that size arrived without its wire time (at
// dilation 500 on GbE, 20 KB at 1.06 MB/s: 19 ms early). The serialiser
// charges every packet its wire time in the order the sender sent them;
// the sender's class, a little faster than the serialiser, only paces the
// flow so that the line does not hold more than it must.
func serialised(t, free int64, payload int, nsPerByte float64, delay int64) (at, busy int64) {
	if nsPerByte <= 0 {
		return t + delay, free
	}
	busy = max(t, free) + int64(float64(payload)*nsPerByte)
	return busy + delay, busy
}

// DelayQueue configures one queue of a delay line.
type DelayQueue struct {
	Num     uint16
	Cluster string
	Delay   time.Duration
	// Rate is the serialiser's rate in payload bytes/s per sender (0:
	// none, the line adds only Delay).
	Rate float64
}

// DelayLineConfig configures NewDelayLine.
type DelayLineConfig struct {
	// NetNS is an open handle (fd) of the namespace whose queues are served;
	// 0 means the calling thread's namespace.
	NetNS int
	// MaxLen is the kernel's limit of waiting packets per queue (beyond it
	// the kernel drops and counts); 0 means 4096.
	MaxLen uint32
	// RcvBuf is the netlink receive buffer in bytes; 0 means 8 MiB.
	RcvBuf int
	// Spin is how long before a deadline the thread stops sleeping and
	// spins. 0 adapts it: the margin follows the p99.5 of the thread's
	// recent wake-up overshoots plus SpinGuard, between MinSpin and
	// MaxSpin, starting at DefaultSpin, per class of sleep length
	// (ptimer.Margin). Positive fixes it; negative never
	// spins.
	Spin time.Duration
	// Realtime runs the thread with SCHED_FIFO priority 1 (root only; falls
	// back silently to normal scheduling, see DelayLine.Realtime): it then
	// preempts ordinary threads when a packet or a deadline arrives.
	Realtime bool
	Queues   []DelayQueue
}

// Coalesce is how far ahead of its deadline a packet may leave with a batch
// that is due, as the kernel's fq qdisc does with its timer_slack (10 µs by
// default). A verdict runs the released packets' kernel path inline (p99
// 35-57 µs measured here), and the packets of an HTB burst arrive
// microseconds apart: released one verdict each, the later ones of a burst
// waited for the earlier verdicts. Measured on the Delft calibration: with
// no coalescing the 2.5 MB/s pair had p99 release lateness 54-107 µs, with
// 10 µs 54-61 µs, with 20 µs 39-49 µs in three runs out of three.
const Coalesce = 20 * time.Microsecond

// DefaultSpin covers the kernel's wake-up overshoot of a sleeping thread
// with 1 ns timer slack on the machines measured (p99 20-80 µs, p50 under
// 20 µs); spinning costs CPU only in the last microseconds before a
// release.
const DefaultSpin = 40 * time.Microsecond

// Bounds of the adaptive spin margin. Measured here (a 2-core virtual
// machine), a SCHED_FIFO thread with 1 ns timer slack sleeping 400 µs in
// ppoll woke p50 17-38 µs, p99 60-110 µs and p99.9 up to 180 µs after its
// timeout (an idle virtual CPU halts and its wake-up goes through the
// hypervisor); a margin set to the p99 of the overshoot less 15 µs left
// about one wake-up in ten after the deadline and p99 release lateness of
// 50-110 µs. The margin now covers the p99.5 of the recent overshoots
// plus SpinGuard: spinning is what precision costs in CPU, and it is spent
// only in the last stretch before a release (an idle line never spins).
const (
	MinSpin   = 10 * time.Microsecond
	MaxSpin   = 300 * time.Microsecond
	SpinGuard = 10 * time.Microsecond
	// The margin of a class of sleep length (ptimer.MarginClasses) is
	// recomputed every adaptEvery wake-ups of that class.
	adaptEvery = 32
	// maxSpinRun bounds an uninterrupted run of spinning (deadlines back
	// to back): a realtime thread must not hold a core for long. Past it
	// the thread sleeps to the next deadline without a margin, and that
	// release is late by a wake-up; at 1 ms this happened often enough in
	// Gbit ping-pongs to show in the 99th percentile of lateness.
	maxSpinRun = 4 * time.Millisecond
)

// NewDelayLine binds the queues and starts the delay line's thread.
// Packets reach it once rules divert them (see installQueueRules). On
// failure nothing stays bound.
func NewDelayLine(cfg DelayLineConfig) (_ *DelayLine, err error) {
	if len(cfg.Queues) == 0 {
		return nil, errors.New("delay line: no queues")
	}
	if cfg.MaxLen == 0 {
		cfg.MaxLen = 4096
	}
	if cfg.RcvBuf == 0 {
		cfg.RcvBuf = 8 << 20
	}
	sock, err := openNFQ(cfg.NetNS, cfg.RcvBuf)
	if err != nil {
		return nil, err
	}
	d := &DelayLine{sock: sock, byN: map[uint16]*delayQueue{}, spinCfg: cfg.Spin, realtime: cfg.Realtime}
	defer func() {
		if err != nil {
			_ = sock.close() // the kernel unbinds the queues of a closed socket
			if d.proc != nil {
				_ = d.proc.Close()
			}
		}
	}()
	for _, q := range cfg.Queues {
		if _, dup := d.byN[q.Num]; dup {
			return nil, fmt.Errorf("delay line: queue %d configured twice", q.Num)
		}
		if q.Delay < 0 {
			return nil, fmt.Errorf("delay line: queue %d: negative delay %v", q.Num, q.Delay)
		}
		if err := checkRate(q.Num, q.Rate); err != nil {
			return nil, err
		}
		if err := sock.bind(q.Num, cfg.MaxLen); err != nil {
			return nil, err
		}
		dq := &delayQueue{num: q.Num, cluster: q.Cluster, srcs: map[[4]byte]*srcLine{}}
		dq.delay.Store(int64(q.Delay))
		dq.setRate(q.Rate)
		d.qs = append(d.qs, dq)
		d.byN[q.Num] = dq
	}
	if d.proc, err = openQueueStats(cfg.NetNS); err != nil {
		return nil, err
	}
	if d.th, err = attachLine(d); err != nil {
		return nil, err
	}
	return d, nil
}

// monoBase maps Go's monotonic clock to CLOCK_MONOTONIC: it brackets a
// time.Now between two clock_gettime calls and keeps the tightest try.
func monoBase() (time.Time, int64, error) {
	var best time.Time
	var off int64
	bestW := int64(-1)
	for range 8 {
		var a, b unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &a); err != nil {
			return time.Time{}, 0, fmt.Errorf("delay line: clock: %w", err)
		}
		t := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
			return time.Time{}, 0, fmt.Errorf("delay line: clock: %w", err)
		}
		if w := b.Nano() - a.Nano(); bestW < 0 || w < bestW {
			bestW, best, off = w, t, a.Nano()+w/2
		}
	}
	return best, off, nil
}

// openQueueStats opens the kernel's per-queue counters of the namespace.
// The file shows the namespace of the thread that opened it.
func openQueueStats(nsFd int) (*os.File, error) {
	var f *os.File
	open := func() error {
		var err error
		f, err = os.Open("/proc/thread-self/net/netfilter/nfnetlink_queue")
		return err
	}
	var err error
	if nsFd > 0 {
		err = inNamespace(nsFd, open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, fmt.Errorf("delay line: queue statistics: %w", err)
	}
	return f, nil
}

// fail records the line's first error. It never blocks: the line's
// thread calls it pinned (see lineThread).
func (d *DelayLine) fail(err error) {
	d.err.CompareAndSwap(nil, &err)
}

// CPUTime returns the CPU time the thread serving the delay line has used
// so far, including the kernel work done in its verdicts (0 once the line
// is closed).
func (d *DelayLine) CPUTime() time.Duration {
	if d.closed.Load() {
		return 0
	}
	return d.th.cpuTime()
}

// Held returns the number of packets the line holds now.
func (d *DelayLine) Held() int64 { return d.received.Load() - d.released.Load() }

// Spin returns the spin margin in effect for the latest sleep.
func (d *DelayLine) Spin() time.Duration { return time.Duration(d.th.spin.Load()) }

// drainBatch is how many reads of the queue socket drain makes at most
// before the thread looks at its deadlines again. The kernel sends one
// message per queued packet, one read each: a thread that drained a
// backlog whole under a stream of small packets released nothing
// meanwhile (measured with 1400-byte datagrams at 1 Gbit/s: p99 release
// lateness 66 µs to 3.6 ms in four runs; with batches of 32, 15-264 µs in
// three, see BenchmarkDelayLineUDP).
const drainBatch = 32

// drain takes up to drainBatch waiting packets in and gives each its
// deadline (thread only).
func (d *DelayLine) drain(buf []byte, pk []qpacket, now func() int64) []qpacket {
	for range drainBatch {
		var err error
		pk, err = d.sock.recv(buf, pk[:0])
		if errors.Is(err, errAgain) {
			return pk
		}
		if err != nil {
			d.fail(err)
			d.failed = true
			return pk
		}
		t := now()
		for _, p := range pk {
			q := d.byN[p.queue]
			if q == nil {
				continue // not a queue of ours: cannot happen on this socket
			}
			q.hold(p, t)
			d.received.Add(1)
		}
	}
	return pk
}

// hold gives the packet p, read at t, its deadline in its sender's line
// (thread only).
func (q *delayQueue) hold(p qpacket, t int64) {
	s := q.srcs[p.src]
	if s == nil {
		s = &srcLine{}
		q.srcs[p.src] = s
		q.lines = append(q.lines, s)
	}
	at, busy := serialised(t, s.free, p.payload, math.Float64frombits(q.perByte.Load()), q.delay.Load())
	s.free = busy
	if len(s.fifo) > s.head && at < s.lastAt {
		at = s.lastAt // keep a sender's deadlines in id order (SetDelay)
	}
	s.lastAt = at
	q.lastID, q.any = p.id, true
	if s.head > 0 && s.head == len(s.fifo) {
		s.fifo, s.head = s.fifo[:0], 0
	}
	s.fifo = append(s.fifo, held{id: p.id, at: at, bytes: p.len})
}

// next is the queue's earliest deadline, or -1 when it holds nothing.
func (q *delayQueue) next() int64 {
	next := int64(-1)
	for _, s := range q.lines {
		if s.head < len(s.fifo) && (next < 0 || s.fifo[s.head].at < next) {
			next = s.fifo[s.head].at
		}
	}
	return next
}

func (q *delayQueue) setRate(rate float64) {
	var nb float64
	if rate > 0 {
		nb = 1e9 / rate
	}
	q.perByte.Store(math.Float64bits(nb))
}

// release sends the verdicts of the packets that are due, one write per
// queue (thread only): a batch verdict when they are the queue's oldest
// packets (always so with one sender), else one verdict each.
func (d *DelayLine) release(now int64, clock func() int64) {
	for _, q := range d.qs {
		if n := q.next(); n < 0 || n > now {
			continue
		}
		// The verdicts also take the packets due within Coalesce: a
		// verdict runs the released packets' kernel path inline (tens of
		// µs), and a packet due a few µs after the batch's would otherwise
		// wait for all of it.
		due := d.due[:0]
		blocked := false // a packet stays whose id is below a released one
		var oldestLeft uint32
		for _, s := range q.lines {
			i := s.head
			for i < len(s.fifo) && s.fifo[i].at <= now+int64(Coalesce) {
				i++
			}
			due = append(due, s.fifo[s.head:i]...)
			s.head = i
			if s.head == len(s.fifo) {
				s.fifo, s.head = s.fifo[:0], 0
			} else if id := s.fifo[s.head].id; !blocked || id < oldestLeft {
				blocked, oldestLeft = true, id
			}
		}
		d.due = due
		var top uint32
		for _, h := range due {
			top = max(top, h.id)
		}
		// Lateness is taken when the verdicts are issued: what they then
		// cost is the packets' own trip through the kernel (qdisc, veth,
		// the receiver's stack run inline), which the unshaped path pays
		// as well; it is recorded separately.
		b := d.vbuf[:0]
		if !blocked || top < oldestLeft {
			b = appendVerdict(b, q.num, top, nfAccept)
		} else {
			for _, h := range due {
				b = appendOneVerdict(b, q.num, h.id, nfAccept)
			}
			d.oneByOne.Add(int64(len(due)))
		}
		d.vbuf = b
		issued := clock()
		if err := d.sock.verdicts(q.num, b); err != nil {
			d.sendErrs.Add(1)
			d.fail(err)
		}
		d.verdictCost.Record(time.Duration(clock() - issued))
		var bytes int64
		for _, h := range due {
			if h.at > issued {
				d.early.Add(1)
			}
			d.lateness.Record(time.Duration(max(issued-h.at, 0)))
			bytes += int64(h.bytes)
		}
		d.released.Add(int64(len(due)))
		d.bytes.Add(bytes)
	}
}

// SetDelay changes the delay of queue num from now on: packets it already
// holds keep their deadlines, and a later packet never leaves before an
// earlier one of its sender (a shorter delay takes effect once the packets
// held under the longer one are out).
func (d *DelayLine) SetDelay(num uint16, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("delay line: queue %d: negative delay %v", num, delay)
	}
	q := d.byN[num]
	if q == nil {
		return fmt.Errorf("delay line: no queue %d", num)
	}
	q.delay.Store(int64(delay))
	return nil
}

// SetRate changes the serialiser's rate of queue num (payload bytes/s per
// sender, 0: none) from now on; packets it holds keep their deadlines.
func (d *DelayLine) SetRate(num uint16, rate float64) error {
	if err := checkRate(num, rate); err != nil {
		return err
	}
	q := d.byN[num]
	if q == nil {
		return fmt.Errorf("delay line: no queue %d", num)
	}
	q.setRate(rate)
	return nil
}

// checkRate refuses a serialiser rate that is negative or not finite.
func checkRate(num uint16, rate float64) error {
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return fmt.Errorf("delay line: queue %d: rate %v bytes/s", num, rate)
	}
	return nil
}

// Realtime reports whether the thread runs with SCHED_FIFO.
func (d *DelayLine) Realtime() bool { return d.th.isRT.Load() }

// Err returns the first error of the delay line's thread, if any.
func (d *DelayLine) Err() error {
	if p := d.err.Load(); p != nil {
		return *p
	}
	return nil
}

// LineStats is what a delay line reports.
type LineStats struct {
	Received, Released int64
	Bytes              int64
	// Drops are packets the kernel dropped: queue full, or the socket's
	// buffer full.
	Drops int64
	// SendErrors are verdicts that could not be sent.
	SendErrors int64
	// Lateness is verdict issued minus deadline, per packet (0 for a
	// packet that left early with a batch); Early counts those packets
	// (at most Coalesce early).
	Lateness ptimer.Stats
	Early    int64
	// OneByOne counts packets released by a verdict of their own: due
	// before an older packet of another sender of their queue.
	OneByOne int64
	// Spin is the current spin margin; SpinTime the total time spent
	// spinning; CPU the thread's CPU time (spinning and verdicts included).
	// All three belong to the line's thread.
	Spin, SpinTime, CPU time.Duration
	// VerdictCost is the duration of the verdict system call, per batch:
	// the kernel runs the released packet's path (qdisc, veth, bridge, the
	// receiver's stack) inside it.
	VerdictCost ptimer.Stats
	// WakeOvershoot is how much later than asked timed sleeps ended;
	// LateWakes counts wake-ups after the deadline itself.
	WakeOvershoot ptimer.Stats
	LateWakes     int64
	// Yields is how long the thread's own passes through the Go
	// scheduler took (see lineThread); Count is how many it made.
	Yields ptimer.Stats
}

// Stats returns the counters so far.
func (d *DelayLine) Stats() (LineStats, error) {
	drops, err := d.kernelDrops()
	return LineStats{
		Received:      d.received.Load(),
		Released:      d.released.Load(),
		Bytes:         d.bytes.Load(),
		Drops:         drops,
		SendErrors:    d.sendErrs.Load(),
		Lateness:      d.lateness.Stats(),
		Early:         d.early.Load(),
		OneByOne:      d.oneByOne.Load(),
		Spin:          d.Spin(),
		SpinTime:      time.Duration(d.th.spinNs.Load()),
		CPU:           d.CPUTime(),
		VerdictCost:   d.verdictCost.Stats(),
		WakeOvershoot: d.th.wakeOver.Stats(),
		LateWakes:     d.lateWakes.Load(),
		Yields:        d.th.yieldCost.Stats(),
	}, err
}

// LatenessHistogram is the live histogram of release lateness (deadline
// to verdict sent); callers may Merge it.
func (d *DelayLine) LatenessHistogram() *ptimer.Histogram { return &d.lateness }

// ResetLateness clears the lateness histogram (between measurements).
func (d *DelayLine) ResetLateness() {
	d.lateness.Reset()
	d.verdictCost.Reset()
	d.lateWakes.Store(0)
}

// kernelDrops sums queue_dropped and queue_user_dropped over our queues.
func (d *DelayLine) kernelDrops() (int64, error) {
	d.procMu.Lock()
	defer d.procMu.Unlock()
	if d.proc == nil {
		return 0, errors.New("delay line: closed")
	}
	if _, err := d.proc.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("delay line: queue statistics: %w", err)
	}
	return parseQueueDrops(d.proc, func(q uint16) bool { _, ok := d.byN[q]; return ok })
}

// parseQueueDrops reads /proc/net/netfilter/nfnetlink_queue: per line
// queue number, peer port id, queue total, copy mode, copy range,
// queue_dropped, queue_user_dropped, id sequence, 1.
func parseQueueDrops(r io.Reader, ours func(uint16) bool) (int64, error) {
	var total int64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		num, err := strconv.ParseUint(f[0], 10, 16)
		if err != nil || !ours(uint16(num)) {
			continue
		}
		for _, s := range f[5:7] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("delay line: queue statistics line %q: %w", sc.Text(), err)
			}
			total += v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("delay line: queue statistics: %w", err)
	}
	return total, nil
}

// Close stops the thread, releases every packet still held (early: nothing
// may stay stuck) and closes the socket, which unbinds the queues. Remove
// the rules that divert packets first, or later packets to delayed
// destinations are dropped.
func (d *DelayLine) Close(ctx context.Context) error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	if err := d.th.detach(ctx, d); err != nil {
		errs = append(errs, err)
	}
	for _, q := range d.qs {
		if q.any {
			if err := d.sock.verdictBatch(q.num, q.lastID, nfAccept); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, err)
			}
		}
	}
	if err := d.sock.close(); err != nil {
		errs = append(errs, err)
	}
	d.procMu.Lock()
	if d.proc != nil {
		if err := d.proc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("delay line: %w", err))
		}
		d.proc = nil
	}
	d.procMu.Unlock()
	return errors.Join(errs...)
}
