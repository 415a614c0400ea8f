package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// Mechanism names.
const (
	NameNetem = "netem"
	NameHTB   = "htb"
)

// Defaults of the rate and delay model (see Model).
const (
	// DefaultMTU is the link MTU the payload factor assumes when the
	// interface cannot be asked.
	DefaultMTU = 1500
	// tcpOverhead is IPv4 + TCP headers with the timestamp option.
	tcpOverhead = 52
	// ethHeader is what HTB counts beyond the IP packet on Ethernet.
	ethHeader = 14
	// DefaultQueueBase is the first NFQUEUE queue number a delay line uses
	// (one queue per destination cluster, per namespace).
	DefaultQueueBase = 1000
	// minBurst and burstTime set the HTB burst: the bytes a class may send
	// back to back after being idle, burstTime worth of its rate but at
	// least minBurst. A burst of about 64 KB is needed at 4-5 Gbit/s so
	// that the qdisc's timer does not throttle the class (FACTS); smaller
	// bursts keep low rates precise.
	minBurst  = 16 << 10
	burstTime = 120 * time.Microsecond
	// lineHeadroom is how much faster than the delay line's serialiser a
	// diverted destination's HTB class runs: enough that the class's
	// frame accounting (PayloadFactor is an estimate) never makes it the
	// bottleneck, little enough that the line holds few packets beyond
	// the link's own queue. (The class keeps its burst: with two frames
	// instead of 16 KB, das3-smoke's all-gather on netns took 587 s
	// against 359 s and 358 s on inproc.)
	lineHeadroom = 1.05
	// MaxLineRate is the fastest link the delay line serialises. Above it
	// what the class lets leave at once (its burst and one GSO packet,
	// about 80 KB) is a small part of a message's wire time, which the
	// class's model (the burst subtracted) already gets right, and the
	// line's reading of packets one by one is what sets the pace:
	// measured on the docker backend at dilation 1, the 185 MB/s pairs of
	// DAS-3 came out 6-7 % slow with the serialiser and within 0.4 %
	// without (TestDockerCalibrate, 2026-12-03). Dilated links, where the
	// early frames were (0.2-1 MB/s at dilation 500-1000), are far below.
	MaxLineRate = 20e6
	// minDelay: a needed extra latency up to this gets no delay line. The
	// line's smallest latency (its own overhead, 35-90 µs measured here)
	// varies by tens of microseconds with the machine's load, and sending
	// Gbit/s traffic through it costs bandwidth; within 20 µs (the
	// calibration's absolute latency tolerance) the floor is the better
	// answer. DAS-3's intra-cluster 0.03 ms sits 20 µs above this
	// machine's 10 µs floor.
	minDelay = 20 * time.Microsecond
)

// PayloadFactor is the share of the bytes HTB counts (Ethernet frames)
// that is TCP payload at a given MTU: (mtu-52)/(mtu+14), 0.9564 at 1500,
// which matches the 0.956 measured over veth (FACTS).
func PayloadFactor(mtu int) float64 {
	if mtu <= tcpOverhead {
		mtu = DefaultMTU
	}
	return float64(mtu-tcpOverhead) / float64(mtu+ethHeader)
}

// Model turns a target link (as a 1 MB ping-pong reports it) into kernel
// parameters. The targets are ping-pong figures: one way takes
// Latency + msg/rate (netem.WireRate), every message starts with a full
// token bucket (the reverse transfer lets it refill), so the first Burst
// bytes leave at the path's own speed, and HTB counts link-layer bytes.
type Model struct {
	// Floor is the one-way latency of the unshaped path between two nodes,
	// measured by the caller; delays are reduced by it and a target at or
	// below it gets no delay (the floor is in effect). 0: unknown, delays
	// are applied in full.
	Floor time.Duration
	// Overhead is the one-way latency the delay line adds by itself (the
	// trip through userspace and the wake-ups at both ends), as a function
	// of the delay it adds, measured by the caller (CalibrateNetns and the
	// grid launcher measure it at OverheadProbes); the delay for a link is
	// the d with d + Overhead.At(d) = what the link needs beyond Floor.
	// Its point at delay 0 is the line's cost when its thread spins from
	// arrival to release. Empty: no overhead. Not used by the netem
	// mechanism.
	//
	// It is not a constant: measured here (a 2-core virtual machine), the
	// line added about 18 µs one way at zero delay, 25 µs at 100 µs,
	// 40 µs at 300 µs, 70-85 µs at 1.5 ms and 115-135 µs at 4.5 ms, with
	// releases on time (p50 lateness 1 µs): the longer both ends of a
	// ping-pong idle, the longer their wake-ups take (an idle virtual CPU
	// halts and its wake-up goes through the hypervisor). A single figure
	// measured at 300 µs cut the delays of the 0.12 ms links by 20 µs too
	// many and failed them (measured 88-100 µs).
	Overhead netem.Overhead
	// MTU of the egress interface; 0: ask the interface.
	MTU int
	// MsgOverhead is a fixed time per message beyond latency and
	// serialisation (TCP's ramp at the start of a message, the last
	// packet's trip); it is subtracted from the time the target allows
	// for serialisation. 0: none.
	MsgOverhead time.Duration
	// LineMsgOverhead is the time per 1 MB message the delay line adds
	// when it holds packets for no time or only its spin margin (the
	// undelayed intra-cluster links at Gbit rates, where its per-packet
	// work shows in the message time), measured by the caller
	// (CalibrateNetns); added to MsgOverhead for such links. 0: none.
	LineMsgOverhead time.Duration
}

// overheadProbeSteps are the delays at which the delay line's Overhead
// curve is measured, as far as a matrix needs them (see OverheadProbes):
// dense where the cost changes fast (the first few hundred µs, where the
// line goes from spinning to sleeping), sparse beyond.
var overheadProbeSteps = []time.Duration{0, 50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
	400 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond}

// OverheadProbes are the delays at which to measure the Overhead curve for
// links whose delays reach maxDelay: the steps below it and maxDelay
// itself, or every step when maxDelay is beyond the last (the curve is
// constant past its last point). The top of the curve is measured where
// the links need it, not at the next step, which took up to 2.5 times as
// long (a 25 ms line was probed at 50 ms, 3.4 s of every pass).
func OverheadProbes(maxDelay time.Duration) []time.Duration {
	last := overheadProbeSteps[len(overheadProbeSteps)-1]
	var out []time.Duration
	for _, d := range overheadProbeSteps {
		if d >= min(maxDelay, last) {
			break
		}
		out = append(out, d)
	}
	return append(out, max(min(maxDelay, last), 0))
}

// OverheadProbeOptions is the ping-pong that measures the Overhead curve
// at a probe delay: pp's 8-byte round trips, but fewer for long delays, so
// that one probe takes about overheadProbeTime (at least 50 round trips
// below longProbeDelay, at least 12 from there on), after fewer warm-up
// round trips for long delays too, about overheadWarmupTime (at least
// 3; the default 20 took 2 s of every pass at 50 ms), and no bandwidth
// round trips: the curve needs only the latency, and three 1 MB round trips
// (one measured after two warm-ups) through a 50 ms line took 1.9 s of
// every pass.
func OverheadProbeOptions(pp netem.PingPongOptions, delay time.Duration) netem.PingPongOptions {
	if pp.LatencyRounds <= 0 {
		pp.LatencyRounds = netem.DefaultLatencyRounds
	}
	if pp.LatencyWarmup <= 0 {
		pp.LatencyWarmup = netem.DefaultLatencyWarmup
	}
	if delay > 0 {
		least := 50
		if delay >= longProbeDelay {
			least = 12
		}
		pp.LatencyRounds = min(pp.LatencyRounds, max(int(overheadProbeTime/(2*delay)), least))
		pp.LatencyWarmup = min(pp.LatencyWarmup, max(int(overheadWarmupTime/(2*delay)), 3))
	}
	pp.BandwidthRounds = -1
	return pp
}

// longProbeDelay is where the delay line's overhead is at most a few per
// cent of the delay (measured: 110-380 µs from 5 to 50 ms), so that the
// median of 12 round trips places it well inside the 10 % latency
// tolerance; 50 round trips at 50 ms took 5 s of every grid's start, 15 s
// over the curve's three passes.
const longProbeDelay = 5 * time.Millisecond

// OverheadPasses is how many passes over the probe delays measure the
// curve (netem.MeasureCurve keeps the median of each point).
const OverheadPasses = 3

const (
	overheadProbeTime  = 300 * time.Millisecond
	overheadWarmupTime = 100 * time.Millisecond
)

// LineHotCost is the delay line's own one-way cost when its thread is
// awake as a packet arrives: receive and verdict without a wake-up
// (measured here: 5-6 µs over the floor, where a sleeping thread costs
// 30-45 µs). hotGuard keeps short delays this far inside the latency
// tolerance.
const (
	LineHotCost = 5 * time.Microsecond
	hotGuard    = 3 * time.Microsecond
)

// shape computes the shaping of one destination.
func (m Model) shape(dst string, target netem.Link, mtu int, withLine bool) Shaping {
	s := Shaping{Cluster: dst, Target: target}
	if target.Unavailable {
		return s
	}
	need := target.Latency - m.Floor
	switch {
	case target.Latency <= m.Floor:
		s.Floor = true
	case need <= minDelay:
		// close enough to the floor: nothing to add
	case !withLine:
		s.Delay = need
	default:
		// The delay line costs Overhead.At(d) by itself. For delays
		// within its spin margin the cost is two-valued: about the
		// measured curve when its thread was asleep as the packet arrived
		// (an idle virtual CPU wakes in tens of µs) and about LineHotCost
		// when the thread was awake (the machine busy, or another packet
		// just released). The delay aims at the target with the measured
		// cost, but is at least what keeps the awake case within the
		// calibration's latency tolerance. A need below the cost at zero
		// delay gets the line only if that lands nearer the target than
		// the floor does.
		o0 := m.Overhead.At(0)
		d := m.Overhead.DelayFor(need)
		tol := max(time.Duration(netem.LatencyTolerance*float64(target.Latency)), netem.LatencyToleranceAbs)
		awake := max(target.Latency-tol+hotGuard-m.Floor-LineHotCost, 0)
		switch {
		case d > DefaultSpin:
			s.Delay, s.Divert = d, true
		case need >= o0:
			s.Delay, s.Divert = max(d, awake), true
		case o0-need < need:
			s.Delay, s.Divert = min(awake, max(target.Latency+tol-hotGuard-m.Floor-o0, 0)), true
		}
		if s.Divert && s.Delay < LineHotCost {
			// Below the line's resolution: a packet held for no time is
			// released as soon as it is read, one held for a few µs waits
			// for the thread's next turn (behind a verdict of tens of µs
			// at Gbit rates).
			s.Delay = 0
		}
	}
	if target.Bandwidth > 0 {
		f := PayloadFactor(mtu)
		rate := target.Bandwidth / f // first guess, for the burst
		burst := math.Max(minBurst, rate*burstTime.Seconds())
		// One way: latency + (msg - burst) / payload rate (the burst leaves
		// at once), so the payload rate the target needs is
		// (msg - burst) / (msg/B - L - MsgOverhead).
		msg := float64(netem.BandwidthMsgSize)
		mo := m.MsgOverhead
		if s.Divert && s.Delay <= DefaultSpin {
			mo += m.LineMsgOverhead
		}
		t := msg/target.Bandwidth - target.Latency.Seconds() - mo.Seconds()
		payload := target.Bandwidth
		switch {
		case t > 0 && s.Divert && s.Delay > DefaultSpin && msg/t <= MaxLineRate:
			// The delay line serialises each sender's packets at the
			// rate the target needs (one way: latency + msg/LineRate,
			// whatever left the class at once), and the class runs
			// lineHeadroom faster: it paces the flow without being its
			// bottleneck. Lines that spin from arrival to release (no
			// delay to speak of, Gbit rates) and links faster than
			// MaxLineRate keep the class's rate alone.
			s.LineRate = msg / t
			payload = s.LineRate * lineHeadroom
		case t > 0 && msg > burst:
			payload = (msg - burst) / t
		}
		s.Rate = uint64(payload / f)
		s.Burst = uint32(burst)
	}
	return s
}

// effective is what a shaping is expected to give, as a ping-pong would
// report it.
func (m Model) effective(s Shaping) netem.Link {
	l := s.Target
	if l.Unavailable {
		return l
	}
	switch {
	case s.Floor:
		l.Latency = m.Floor
	case s.Divert:
		l.Latency = m.Floor + s.Delay + m.Overhead.At(s.Delay)
	case s.Delay > 0:
		l.Latency = m.Floor + s.Delay
	default:
		l.Latency = max(m.Floor, 0)
		if m.Floor == 0 {
			l.Latency = s.Target.Latency
		}
	}
	return l
}

// HTB is the mechanism "htb": HTB classes per destination cluster for the
// rate and a delay line (NFQUEUE, see DelayLine) for the latency. It works
// on kernels without netem. Probe and Install act on the network namespace
// of the calling OS thread (lock the thread when switching namespaces).
type HTB struct {
	Model
	// Dev is the egress interface; "" finds it by route lookup.
	Dev string
	// QueueBase is the first NFQUEUE number; 0 means DefaultQueueBase.
	QueueBase uint16
	// MaxLen and Spin configure the delay line (DelayLineConfig).
	MaxLen uint32
	Spin   time.Duration
	// NoRealtime keeps the delay line's thread in normal scheduling. By
	// default it asks for SCHED_FIFO (granted to root): measured here
	// under load from other processes, normal scheduling left p99 release
	// lateness in milliseconds and the bandwidth of delayed links 5-15%
	// low; SCHED_FIFO brought both in line (see the package doc).
	NoRealtime bool
	// DivertAll sends every destination with a target latency through the
	// delay line even when no delay is needed (to measure Overhead).
	DivertAll bool
	// Exempt are ports whose TCP and UDP packets (to or from them) are
	// neither rate-limited nor delayed: the emulator's control plane
	// (protoactor remoting, memberlist), which is not part of the emulated
	// grid's traffic.
	Exempt []uint16
}

// Netem is the mechanism "netem": HTB classes per destination cluster for
// the rate, each with a netem qdisc for the latency (and jitter and loss).
// Probe and Install act on the namespace of the calling OS thread.
type Netem struct {
	Model
	Dev string
	// Exempt is HTB.Exempt.
	Exempt []uint16
}

var (
	_ netem.Mechanism = HTB{}
	_ netem.Mechanism = Netem{}
	_ netem.Installed = (*Installed)(nil)
)

// Name implements netem.Mechanism.
func (HTB) Name() string { return NameHTB }

// Name implements netem.Mechanism.
func (Netem) Name() string { return NameNetem }

// Candidates lists the kernel mechanisms in preference order, for
// netem.Select (the caller appends userspace where it applies).
func Candidates(m Model) []netem.Mechanism {
	return []netem.Mechanism{Netem{Model: m}, HTB{Model: m}}
}

// Installed is a plan in effect in one namespace.
type Installed struct {
	mech  string
	model Model
	mu    sync.Mutex
	in    *installation
	eff   map[string]netem.Link
	// mtu and adjust are what the installation computed its shaping with
	// (SetLink computes a changed link's the same way).
	mtu    int
	adjust func(int, *Shaping)
}

// Wrap implements netem.Egress: the kernel shapes, connections are
// returned unchanged.
func (i *Installed) Wrap(c net.Conn, _ string) net.Conn { return c }

// Effective implements netem.Installed: per destination cluster, the link
// the installed parameters are expected to give.
func (i *Installed) Effective() map[string]netem.Link {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[string]netem.Link, len(i.eff))
	for k, v := range i.eff {
		out[k] = v
	}
	return out
}

// Shaping returns the parameters installed per destination cluster.
func (i *Installed) Shaping() map[string]Shaping {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := map[string]Shaping{}
	if i.in != nil {
		for k, v := range i.in.shaping {
			out[k] = v
		}
	}
	return out
}

// DelayStats implements netem.Installed. Drops are the kernel's queue
// drops of the delay line; the netem mechanism reports none.
func (i *Installed) DelayStats() netem.DelayStats {
	st, _ := i.LineStats()
	return netem.DelayStats{Released: st.Released, Drops: st.Drops, Lateness: st.Lateness}
}

// LineStats returns the delay line's statistics (zero without a line).
func (i *Installed) LineStats() (LineStats, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in == nil || i.in.line == nil {
		return LineStats{}, nil
	}
	st, err := i.in.line.Stats()
	if lerr := i.in.line.Err(); lerr != nil {
		err = errors.Join(err, lerr)
	}
	return st, err
}

// Held returns the number of packets the delay line holds now.
func (i *Installed) Held() int64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in == nil || i.in.line == nil {
		return 0
	}
	return i.in.line.Held()
}

// LatenessHistogram is the delay line's live lateness histogram (an empty
// one without a line).
func (i *Installed) LatenessHistogram() *ptimer.Histogram {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in == nil || i.in.line == nil {
		return &ptimer.Histogram{}
	}
	return i.in.line.LatenessHistogram()
}

// ResetLateness clears the delay line's lateness histogram.
func (i *Installed) ResetLateness() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in != nil && i.in.line != nil {
		i.in.line.ResetLateness()
	}
}

// Divert reports how packets reach the delay line ("nft queue" or "xt
// NFQUEUE"), or "" without one.
func (i *Installed) Divert() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in == nil {
		return ""
	}
	return i.in.divert
}

// Close implements netem.Installed: removes the rules, the delay line and
// the qdiscs. It can be called from any goroutine, more than once.
func (i *Installed) Close() error {
	i.mu.Lock()
	in := i.in
	i.in = nil
	i.mu.Unlock()
	if in == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return in.close(ctx)
}

// Install implements netem.Mechanism.
func (h HTB) Install(ctx context.Context, plan netem.EgressPlan, dsts map[string][]netip.Prefix) (netem.Installed, error) {
	in, err := h.install(ctx, plan, dsts)
	if err != nil {
		return nil, err
	}
	return in, nil
}

func (h HTB) install(ctx context.Context, plan netem.EgressPlan, dsts map[string][]netip.Prefix) (*Installed, error) {
	base := h.QueueBase
	if base == 0 {
		base = DefaultQueueBase
	}
	return installPlan(ctx, NameHTB, h.Model, h.Dev, false, plan, dsts, h.Exempt, func(i int, s *Shaping) {
		if h.DivertAll && !s.Target.Unavailable && s.Target.Latency > 0 && !s.Divert {
			s.Divert, s.Delay, s.Floor = true, 0, false
		}
		if s.Divert {
			s.Queue = base + uint16(i)
		}
	}, DelayLineConfig{MaxLen: h.MaxLen, Spin: h.Spin, Realtime: !h.NoRealtime})
}

// Install implements netem.Mechanism.
func (n Netem) Install(ctx context.Context, plan netem.EgressPlan, dsts map[string][]netip.Prefix) (netem.Installed, error) {
	in, err := installPlan(ctx, NameNetem, n.Model, n.Dev, true, plan, dsts, n.Exempt, nil, DelayLineConfig{})
	if err != nil {
		return nil, err
	}
	return in, nil
}

func installPlan(ctx context.Context, name string, m Model, dev string, useNetem bool, plan netem.EgressPlan,
	dsts map[string][]netip.Prefix, exempt []uint16, adjust func(int, *Shaping), dl DelayLineConfig) (*Installed, error) {
	mtu := m.MTU
	var shaping []Shaping
	keys := sortedKeys(plan.To)
	for i, dst := range keys {
		prefixes := dsts[dst]
		if len(prefixes) == 0 {
			continue // no node of that cluster is reachable from here
		}
		if mtu == 0 {
			mtu = DefaultMTU // refined below once the interface is known
		}
		s := m.shape(dst, plan.To[dst], mtu, !useNetem)
		s.Prefixes = prefixes
		if adjust != nil {
			adjust(i, &s)
		}
		shaping = append(shaping, s)
	}
	if m.MTU == 0 && len(shaping) > 0 {
		// Ask the interface for its MTU and recompute the rates with it.
		if ifmtu, err := egressMTU(dev, dsts); err == nil && ifmtu != DefaultMTU {
			mtu = ifmtu
			for k := range shaping {
				s := m.shape(shaping[k].Cluster, shaping[k].Target, ifmtu, !useNetem)
				shaping[k].Rate, shaping[k].Burst, shaping[k].LineRate = s.Rate, s.Burst, s.LineRate
			}
		}
	}
	in, err := install(ctx, shaping, dev, useNetem, dsts, exempt, dl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	inst := &Installed{mech: name, model: m, in: in, eff: map[string]netem.Link{}, mtu: mtu, adjust: adjust}
	for _, s := range shaping {
		inst.eff[s.Cluster] = m.effective(s)
	}
	return inst, nil
}

// egressMTU is the MTU of the interface traffic to dsts leaves through, in
// the calling thread's namespace.
func egressMTU(dev string, dsts map[string][]netip.Prefix) (int, error) {
	ns, err := currentNamespace()
	if err != nil {
		return 0, err
	}
	defer ns.Close()
	h, err := handleAt(ns)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	l, err := egressLink(h, dev, dsts)
	if err != nil {
		return 0, err
	}
	return l.Attrs().MTU, nil
}

// ErrNoNetem is the probe failure of the netem mechanism on kernels without
// the netem qdisc.
var ErrNoNetem = errors.New("no netem qdisc in this kernel (ENOENT)")

// permission names a permission error as the probes report it.
func permission(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("no CAP_NET_ADMIN (EPERM): %w", err)
	}
	return err
}

// scratchVeth creates a veth pair with random koala-prefixed names in the
// calling thread's namespace, for probes, and returns it with its remover.
func scratchVeth(h *netlink.Handle) (netlink.Link, func() error, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	name := "koalap" + hex.EncodeToString(b[:])
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name + "a"}, PeerName: name + "b"}
	if err := h.LinkAdd(v); err != nil {
		return nil, nil, fmt.Errorf("probe: create veth pair: %w", permission(err))
	}
	l, err := h.LinkByName(name + "a")
	if err != nil {
		_ = h.LinkDel(v)
		return nil, nil, fmt.Errorf("probe: veth: %w", err)
	}
	return l, func() error {
		if err := h.LinkDel(l); err != nil {
			return fmt.Errorf("probe: remove veth %s: %w", l.Attrs().Name, err)
		}
		return nil
	}, nil
}

func probeHandle() (*netlink.Handle, func(), error) {
	ns, err := currentNamespace()
	if err != nil {
		return nil, nil, err
	}
	h, err := handleAt(ns)
	if err != nil {
		_ = ns.Close()
		return nil, nil, fmt.Errorf("probe: netlink: %w", permission(err))
	}
	return h, func() { h.Close(); _ = ns.Close() }, nil
}

// Probe implements netem.Mechanism: it adds a netem qdisc on a throwaway
// veth pair in the caller's namespace and removes it. On a kernel without
// netem the error wraps ErrNoNetem.
func (Netem) Probe(ctx context.Context) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, done, err := probeHandle()
	if err != nil {
		return err
	}
	defer done()
	l, remove, err := scratchVeth(h)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, remove()) }()
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Latency: 100})
	if err := h.QdiscAdd(q); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %w", ErrNoNetem, err)
		}
		return fmt.Errorf("netem qdisc: %w", permission(err))
	}
	if err := h.QdiscDel(q); err != nil {
		return fmt.Errorf("probe: remove netem qdisc: %w", err)
	}
	return nil
}

// Probe implements netem.Mechanism: on a throwaway veth pair it adds an
// HTB root, a class and a u32 filter; it binds and unbinds an NFQUEUE
// queue; it adds and deletes an nftables table with an NFQUEUE rule (in a
// chain no packet reaches). Errors name what is missing.
func (HTB) Probe(ctx context.Context) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, done, err := probeHandle()
	if err != nil {
		return err
	}
	defer done()
	l, remove, err := scratchVeth(h)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, remove()) }()
	spec := classSpec{cluster: "probe", minor: 0x10, rate: 1e6, burst: minBurst, quantum: htbQuantum,
		prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	if err := installHTB(h, l, []classSpec{spec}, nil); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("no htb qdisc or u32 classifier in this kernel (ENOENT): %w", err)
		}
		return permission(err)
	}
	if err := removeHTB(h, l); err != nil {
		return err
	}
	s, err := openNFQ(0, 0)
	if err != nil {
		return fmt.Errorf("no nfnetlink_queue: %w", permission(err))
	}
	q := uint16(60000 + int(time.Now().UnixNano()%5000))
	berr := s.bind(q, 16)
	if berr == nil {
		berr = s.unbind(q)
	}
	if cerr := s.close(); cerr != nil {
		berr = errors.Join(berr, cerr)
	}
	if berr != nil {
		return fmt.Errorf("no NFQUEUE support (nfnetlink_queue): %w", permission(berr))
	}
	c, err := nftOpen(0)
	if err != nil {
		return fmt.Errorf("no nftables: %w", permission(err))
	}
	if _, err := probeNftables(c, "koala_probe"+hex.EncodeToString([]byte{byte(q >> 8), byte(q)})); err != nil {
		return permission(err)
	}
	return nil
}

// CleanProbeLinks deletes, in the calling thread's namespace, the scratch
// veth pairs a probe creates (names starting with "koalap") that a crash
// during a probe may have left. It returns the names removed.
func CleanProbeLinks() ([]string, error) {
	h, done, err := probeHandle()
	if err != nil {
		return nil, err
	}
	defer done()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var removed []string
	var errs []error
	for _, l := range links {
		name := l.Attrs().Name
		if len(name) < 6 || name[:6] != "koalap" || l.Type() != "veth" {
			continue
		}
		if err := h.LinkDel(l); err != nil {
			if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
				continue // its peer's removal took it along
			}
			errs = append(errs, fmt.Errorf("remove %s: %w", name, err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
