package kernel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// DelayLine holds the packets that netfilter diverts into NFQUEUE queues
// and releases each one at its deadline: the time it reached userspace plus
// its queue's one-way delay. (Kernel timestamps of queued packets are not
// used: TCP data carried none here, and the clock of those that carry one
// depends on where the packet came from.)
//
// One OS thread does everything: it is locked, runs with 1 ns timer slack,
// and loops over ppoll on the queue socket with a timeout at the next
// deadline, spinning the last few microseconds. Receiving, holding and
// releasing on one thread avoids the hand-offs between goroutines and
// threads that cost tens of microseconds each on a virtual machine (each
// cross-thread wake-up is an inter-processor interrupt; measured:
// releasing through a separate timer thread (ptimer.Line) and a netpoller
// reader added about 150 µs per packet here). Lateness is recorded with a
// ptimer.Histogram.
//
// Packets of one queue share one delay, so their deadlines are in arrival
// order, and one batch verdict ("accept every packet up to id N") releases
// all packets of a queue that are due.
type DelayLine struct {
	sock     *nfqSock
	qs       []*delayQueue
	byN      map[uint16]*delayQueue
	spin     atomic.Int64 // current spin margin, ns
	adapt    bool
	realtime bool
	over     [overshootWindow]int64 // recent wake-up overshoots (thread only)
	overN    int
	spinNs   atomic.Int64 // total time spent spinning
	tid      atomic.Int64 // the loop's OS thread
	isRT     atomic.Bool

	lateness    ptimer.Histogram // deadline to verdict issued
	verdictCost ptimer.Histogram // duration of the verdict system call
	received    atomic.Int64
	released    atomic.Int64
	bytes       atomic.Int64
	sendErrs    atomic.Int64

	proc   *os.File // the namespace's /proc/net/netfilter/nfnetlink_queue
	procMu sync.Mutex

	stopFd  int // eventfd: Close wakes the loop
	done    chan struct{}
	closed  atomic.Bool
	errMu   sync.Mutex
	err     error
	monoOff int64 // CLOCK_MONOTONIC ns = monoOff + time.Since(base)
	base    time.Time
}

// delayQueue is one NFQUEUE queue: one destination cluster.
type delayQueue struct {
	num     uint16
	cluster string
	delay   int64 // ns
	fifo    []held
	head    int
	lastID  uint32
	lastAt  int64
	any     bool
}

type held struct {
	id    uint32
	at    int64 // deadline, CLOCK_MONOTONIC ns
	bytes int
}

// DelayQueue configures one queue of a delay line.
type DelayQueue struct {
	Num     uint16
	Cluster string
	Delay   time.Duration
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
	// spins. 0 adapts it: the margin follows the p99 of the thread's recent
	// wake-up overshoot less LatenessAim, between MinSpin and MaxSpin,
	// starting at DefaultSpin. Positive fixes it; negative never spins.
	Spin time.Duration
	// Realtime runs the thread with SCHED_FIFO priority 1 (root only; falls
	// back silently to normal scheduling, see DelayLine.Realtime): it then
	// preempts ordinary threads when a packet or a deadline arrives.
	Realtime bool
	Queues   []DelayQueue
}

// DefaultSpin covers the kernel's wake-up overshoot of a sleeping thread
// with 1 ns timer slack on the machines measured (p99 20-80 µs, p50 under
// 20 µs); spinning costs CPU only in the last microseconds before a
// release.
const DefaultSpin = 40 * time.Microsecond

// Bounds of the adaptive spin margin. Measured here, with other processes
// loading both cores, an SCHED_FIFO thread sleeping in ppoll with 1 ns
// slack woke p50 38 µs and p99 124 µs after its timeout: a fixed 40 µs
// margin left p99 lateness near 100 µs.
// Spinning is what precision costs in CPU (at 1 Gbit/s it was most of the
// line's CPU time), so the margin aims at a p99 lateness of LatenessAim
// rather than zero.
const (
	MinSpin     = 10 * time.Microsecond
	MaxSpin     = 200 * time.Microsecond
	LatenessAim = 15 * time.Microsecond
	// overshootWindow wake-ups are kept to estimate the p99 overshoot.
	overshootWindow = 128
	// maxSpinRun bounds an uninterrupted run of spinning (deadlines back
	// to back): a realtime thread must not hold a core.
	maxSpinRun = 1000 * time.Microsecond
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
	spin, adapt := cfg.Spin, false
	if spin == 0 {
		spin, adapt = DefaultSpin, true
	}
	if spin < 0 {
		spin = 0
	}
	sock, err := openNFQ(cfg.NetNS, cfg.RcvBuf)
	if err != nil {
		return nil, err
	}
	d := &DelayLine{sock: sock, byN: map[uint16]*delayQueue{}, adapt: adapt, realtime: cfg.Realtime, stopFd: -1, done: make(chan struct{})}
	d.spin.Store(int64(spin))
	defer func() {
		if err != nil {
			_ = sock.close() // the kernel unbinds the queues of a closed socket
			if d.proc != nil {
				_ = d.proc.Close()
			}
			if d.stopFd >= 0 {
				_ = unix.Close(d.stopFd)
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
		if err := sock.bind(q.Num, cfg.MaxLen); err != nil {
			return nil, err
		}
		dq := &delayQueue{num: q.Num, cluster: q.Cluster, delay: int64(q.Delay)}
		d.qs = append(d.qs, dq)
		d.byN[q.Num] = dq
	}
	if d.proc, err = openQueueStats(cfg.NetNS); err != nil {
		return nil, err
	}
	if d.stopFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("delay line: eventfd: %w", err)
	}
	if d.base, d.monoOff, err = monoBase(); err != nil {
		return nil, err
	}
	go d.loop()
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

func (d *DelayLine) now() int64 { return d.monoOff + int64(time.Since(d.base)) }

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

func (d *DelayLine) fail(err error) {
	d.errMu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.errMu.Unlock()
}

// loop is the delay line's thread. It never unlocks its OS thread (the
// thread's timer slack was changed), so the runtime discards the thread
// when the loop ends.
func (d *DelayLine) loop() {
	defer close(d.done)
	runtime.LockOSThread()
	d.tid.Store(int64(unix.Gettid()))
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort
	if d.realtime {
		attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
		attr.Size = uint32(unsafe.Sizeof(attr))
		d.isRT.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
	}
	buf := make([]byte, 1<<18)
	var pk []qpacket
	pfd := []unix.PollFd{{Fd: int32(d.sock.fd), Events: unix.POLLIN}, {Fd: int32(d.stopFd), Events: unix.POLLIN}}
	var spinSince int64 // start of the current run of spinning, 0: none
	for {
		now := d.now()
		d.release(now)
		next := int64(-1)
		for _, q := range d.qs {
			if q.head < len(q.fifo) && (next < 0 || q.fifo[q.head].at < next) {
				next = q.fifo[q.head].at
			}
		}
		var ts *unix.Timespec
		var tmo int64
		if next >= 0 {
			wait := next - now - d.spin.Load()
			if wait <= 0 && spinSince == 0 {
				spinSince = now
			}
			if wait <= 0 && now-spinSince < int64(maxSpinRun) {
				// Spin to the deadline, still taking packets in.
				pk = d.drain(buf, pk)
				if t := d.now(); t < next {
					d.spinNs.Add(t - now)
				}
				continue
			}
			if wait <= 0 {
				// Deadlines back to back kept the thread spinning: sleep
				// to this one exactly (precision yields to the rest of the
				// machine, the thread being realtime).
				wait = max(next-now, 1)
			}
			spinSince = 0
			tmo = wait
			t := unix.NsecToTimespec(wait)
			ts = &t
		}
		pfd[0].Revents, pfd[1].Revents = 0, 0
		_, err := unix.Ppoll(pfd, ts, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			d.fail(fmt.Errorf("delay line: poll: %w", err))
			return
		}
		if err == nil && ts != nil && pfd[0].Revents == 0 && pfd[1].Revents == 0 {
			d.observeWake(d.now() - now - tmo)
		}
		if pfd[1].Revents != 0 {
			return
		}
		if pfd[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			d.fail(errors.New("delay line: socket error"))
			return
		}
		if pfd[0].Revents&unix.POLLIN != 0 {
			pk = d.drain(buf, pk)
		}
	}
}

// observeWake records how late a timed sleep ended and, every 32 wake-ups,
// sets the spin margin to the p99 of the recent ones less LatenessAim.
func (d *DelayLine) observeWake(over int64) {
	if !d.adapt {
		return
	}
	d.over[d.overN%overshootWindow] = max(over, 0)
	d.overN++
	if d.overN%32 != 0 || d.overN < overshootWindow/2 {
		return
	}
	n := min(d.overN, overshootWindow)
	var buf [overshootWindow]int64
	w := buf[:n]
	copy(w, d.over[:n])
	slices.Sort(w)
	p99 := w[min(n-1, n*99/100)]
	d.spin.Store(min(max(p99-int64(LatenessAim), int64(MinSpin)), int64(MaxSpin)))
}

// CPUTime returns the CPU time the delay line's thread has used so far,
// including the kernel work done in its verdicts (0 once it has ended).
func (d *DelayLine) CPUTime() time.Duration {
	tid := d.tid.Load()
	if tid == 0 || d.closed.Load() {
		return 0
	}
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of linux/posix-timers.h.
	clock := int32(^uint32(tid)<<3) | 6
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Held returns the number of packets the line holds now.
func (d *DelayLine) Held() int64 { return d.received.Load() - d.released.Load() }

// Spin returns the current spin margin.
func (d *DelayLine) Spin() time.Duration { return time.Duration(d.spin.Load()) }

// drain takes every waiting packet in and gives it its deadline.
func (d *DelayLine) drain(buf []byte, pk []qpacket) []qpacket {
	for {
		var err error
		pk, err = d.sock.recv(buf, pk[:0])
		if errors.Is(err, errAgain) {
			return pk
		}
		if err != nil {
			d.fail(err)
			return pk
		}
		now := d.now()
		for _, p := range pk {
			q := d.byN[p.queue]
			if q == nil {
				continue // not a queue of ours: cannot happen on this socket
			}
			at := now + q.delay
			if q.any && at < q.lastAt {
				at = q.lastAt // keep deadlines in id order
			}
			q.lastAt, q.lastID, q.any = at, p.id, true
			if q.head > 0 && q.head == len(q.fifo) {
				q.fifo, q.head = q.fifo[:0], 0
			}
			q.fifo = append(q.fifo, held{id: p.id, at: at, bytes: p.len})
			d.received.Add(1)
		}
	}
}

// release sends one batch verdict per queue for the packets that are due.
func (d *DelayLine) release(now int64) {
	for _, q := range d.qs {
		i := q.head
		for i < len(q.fifo) && q.fifo[i].at <= now {
			i++
		}
		if i == q.head {
			continue
		}
		// Lateness is taken when the verdict is issued: what the verdict
		// then costs is the packet's own trip through the kernel (qdisc,
		// veth, the receiver's stack run inline), which the unshaped path
		// pays as well; it is recorded separately.
		issued := d.now()
		if err := d.sock.verdictBatch(q.num, q.fifo[i-1].id, nfAccept); err != nil {
			d.sendErrs.Add(1)
			d.fail(err)
		}
		d.verdictCost.Record(time.Duration(d.now() - issued))
		var b int64
		for _, h := range q.fifo[q.head:i] {
			d.lateness.Record(time.Duration(issued - h.at))
			b += int64(h.bytes)
		}
		d.released.Add(int64(i - q.head))
		d.bytes.Add(b)
		q.head = i
		if q.head == len(q.fifo) {
			q.fifo, q.head = q.fifo[:0], 0
		}
	}
}

// Realtime reports whether the thread runs with SCHED_FIFO.
func (d *DelayLine) Realtime() bool { return d.isRT.Load() }

// Err returns the first error of the delay line's thread, if any.
func (d *DelayLine) Err() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
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
	// Lateness is verdict issued minus deadline, per packet.
	Lateness ptimer.Stats
	// Spin is the current spin margin; SpinTime the total time spent
	// spinning; CPU the thread's CPU time (spinning and verdicts included).
	Spin, SpinTime, CPU time.Duration
	// VerdictCost is the duration of the verdict system call, per batch:
	// the kernel runs the released packet's path (qdisc, veth, bridge, the
	// receiver's stack) inside it.
	VerdictCost ptimer.Stats
}

// Stats returns the counters so far.
func (d *DelayLine) Stats() (LineStats, error) {
	drops, err := d.kernelDrops()
	return LineStats{
		Received:    d.received.Load(),
		Released:    d.released.Load(),
		Bytes:       d.bytes.Load(),
		Drops:       drops,
		SendErrors:  d.sendErrs.Load(),
		Lateness:    d.lateness.Stats(),
		Spin:        d.Spin(),
		SpinTime:    time.Duration(d.spinNs.Load()),
		CPU:         d.CPUTime(),
		VerdictCost: d.verdictCost.Stats(),
	}, err
}

// LatenessHistogram is the live histogram of release lateness (deadline
// to verdict sent); callers may Merge it.
func (d *DelayLine) LatenessHistogram() *ptimer.Histogram { return &d.lateness }

// ResetLateness clears the lateness histogram (between measurements).
func (d *DelayLine) ResetLateness() { d.lateness.Reset(); d.verdictCost.Reset() }

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
	var one [8]byte
	one[0] = 1
	if _, err := unix.Write(d.stopFd, one[:]); err != nil {
		errs = append(errs, fmt.Errorf("delay line: stop: %w", err))
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("delay line: stop: %w", ctx.Err()))
		<-d.done // the loop wakes on the eventfd; it cannot stay blocked
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
	if err := unix.Close(d.stopFd); err != nil {
		errs = append(errs, fmt.Errorf("delay line: %w", err))
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
