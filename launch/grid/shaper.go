package grid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// MechanismNone removes a host's shaping (GridShape.mechanism).
const MechanismNone = "none"

// MechanismOptions parametrise the candidate mechanisms of a host.
type MechanismOptions struct {
	// Model is the rate and delay model (floor, delay line overhead).
	Model kernel.Model
	// DivertAll sends every delayed destination through the delay line.
	DivertAll bool
	// Dilation is the run's time dilation (the userspace shaper applies it
	// itself; kernel plans arrive dilated).
	Dilation float64
	// Spin is the delay line's spin margin (kernel.HTB.Spin): 0 adapts,
	// negative never spins.
	Spin time.Duration
	// Exempt are the host's control-plane ports, which the kernel
	// mechanisms leave unshaped (kernel.HTB.Exempt).
	Exempt []uint16
}

// Candidates returns the shaping mechanisms an actor host selects from, in
// preference order.
type Candidates func(MechanismOptions) []netem.Mechanism

// DefaultCandidates is the candidate list of a container: the kernel's
// netem qdisc, HTB with the NFQUEUE delay line, and the userspace shaper
// (which wraps the ranks' connections; it needs nothing from the kernel
// and is picked by auto only when both kernel mechanisms fail their
// probes, which the manifest and the progress output then say).
func DefaultCandidates(o MechanismOptions) []netem.Mechanism {
	return []netem.Mechanism{
		kernel.Netem{Model: o.Model, Exempt: o.Exempt},
		kernel.HTB{Model: o.Model, DivertAll: o.DivertAll, Spin: o.Spin, Exempt: o.Exempt},
		netem.Userspace{Dilation: o.Dilation},
	}
}

// swapEgress is the egress of a host's ranks and probes: it forwards to the
// installation in effect, or passes connections through unshaped. The
// userspace mechanism wraps connections when they open, so an installation
// applies to connections opened after it.
type swapEgress struct {
	mu sync.RWMutex
	e  netem.Egress
}

func (s *swapEgress) set(e netem.Egress) {
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
}

func (s *swapEgress) Wrap(c net.Conn, dst string) net.Conn {
	s.mu.RLock()
	e := s.e
	s.mu.RUnlock()
	if e == nil {
		return c
	}
	return e.Wrap(c, dst)
}

// shaper owns the shaping of one actor host.
type shaper struct {
	name, cluster string
	grid          *Grid
	candidates    Candidates
	egress        swapEgress

	// shared is set for a host without a network stack of its own (the
	// tests' processes on the loopback address): it refuses cuts, which
	// would drop the machine's own traffic.
	shared bool
	// keep are the host's control-plane ports (protoactor remoting,
	// memberlist), which a cut leaves alone.
	keep []uint16

	mu   sync.Mutex
	inst netem.Installed
	mech string
	// impl and plan are the installed mechanism and its plan, undilated,
	// and dilation is what the plan was installed with: the run's for the
	// grid's plan, 1 for links given in the request (SetLink changes the
	// plan and installs it again when it must).
	impl     netem.Mechanism
	plan     netem.EgressPlan
	dilation float64
	cut      bool // InstallCut in effect
}

func newShaper(name, cluster string, g *Grid, c Candidates) *shaper {
	if c == nil {
		c = DefaultCandidates
	}
	return &shaper{name: name, cluster: cluster, grid: g, candidates: c}
}

// destinations maps each cluster to its prefixes.
func (s *shaper) destinations() map[string][]netip.Prefix {
	out := map[string][]netip.Prefix{}
	for c, ps := range s.grid.Subnets {
		out[c] = append([]netip.Prefix(nil), ps...)
	}
	return out
}

// shape handles a GridShape.
func (s *shaper) shape(ctx context.Context, req *msg.GridShape) *msg.GridShaped {
	reply := &msg.GridShaped{Host: s.name}
	fail := func(err error) *msg.GridShaped {
		reply.Error = err.Error()
		return reply
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Mechanism == MechanismNone {
		if err := s.removeLocked(); err != nil {
			return fail(err)
		}
		reply.Mechanism = MechanismNone
		return reply
	}
	model := kernel.Model{Floor: time.Duration(req.FloorNs), Overhead: fromGridOverhead(req.Overhead)}
	d := s.grid.Dilation
	mech, reason, err := selectMech(ctx, req, s.candidates(MechanismOptions{Model: model, DivertAll: req.DivertAll,
		Dilation: d, Spin: time.Duration(req.SpinNs), Exempt: s.keep}))
	if err != nil {
		return fail(fmt.Errorf("%s: %w", s.name, err))
	}
	reply.Mechanism, reply.Reason = mech.Name(), reason
	if req.SelectOnly {
		return reply
	}
	plan, dilation := netem.EgressPlan{Node: s.name, Cluster: s.cluster, To: map[string]netem.Link{}}, 1.0
	if len(req.Links) > 0 {
		for _, l := range req.Links {
			plan.To[l.Cluster] = fromGridLink(l)
		}
	} else {
		if plan, err = s.grid.Links.PlanFor(s.name, s.cluster); err != nil {
			return fail(err)
		}
		dilation = d
	}
	if err := s.installLocked(ctx, mech, plan, dilation); err != nil {
		return fail(err)
	}
	eff := s.inst.Effective()
	keys := make([]string, 0, len(eff))
	for k := range eff {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		reply.Effective = append(reply.Effective, toGridLink(k, eff[k]))
	}
	return reply
}

// selectMech selects the mechanism of a GridShape among the candidates: by
// probes (netem.Select), or by name alone when another host probed it
// (req.Probed).
func selectMech(ctx context.Context, req *msg.GridShape, cands []netem.Mechanism) (netem.Mechanism, string, error) {
	if !req.Probed || req.Mechanism == netem.Auto || req.SelectOnly {
		return netem.Select(ctx, req.Mechanism, cands)
	}
	m, err := netem.Named(req.Mechanism, cands)
	if err != nil {
		return nil, "", err
	}
	return m, req.Mechanism + ": probed on another host of the grid", nil
}

// dilated is plan as mechanism mech installs it: a kernel mechanism gets
// its links dilated, the userspace shaper dilates them itself.
func dilated(mech string, plan netem.EgressPlan, dilation float64) netem.EgressPlan {
	out := netem.EgressPlan{Node: plan.Node, Cluster: plan.Cluster, To: make(map[string]netem.Link, len(plan.To))}
	for dst, l := range plan.To {
		if mech != "userspace" {
			l = l.Dilate(dilation)
		}
		out.To[dst] = l
	}
	return out
}

// installLocked installs plan (undilated; dilation applies) with mech in
// place of the installation in effect.
func (s *shaper) installLocked(ctx context.Context, mech netem.Mechanism, plan netem.EgressPlan, dilation float64) error {
	// One installation at a time: the kernel mechanisms own the egress
	// interface's root qdisc.
	if err := s.removeLocked(); err != nil {
		return err
	}
	inst, err := mech.Install(ctx, dilated(mech.Name(), plan, dilation), s.destinations())
	if err != nil {
		return fmt.Errorf("%s: install %s: %w", s.name, mech.Name(), err)
	}
	s.inst, s.mech, s.impl, s.plan, s.dilation = inst, mech.Name(), mech, plan, dilation
	s.egress.set(inst)
	return nil
}

func (s *shaper) removeLocked() error {
	if s.inst == nil {
		return nil
	}
	s.egress.set(nil)
	err := s.inst.Close()
	s.inst, s.mech = nil, ""
	if err != nil {
		return fmt.Errorf("%s: remove shaping: %w", s.name, err)
	}
	return nil
}

// close removes the shaping and the cut.
func (s *shaper) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cerr error
	if s.cut {
		cerr = s.setCutLocked(nil, false)
	}
	return errors.Join(s.removeLocked(), cerr)
}

// lineStats handles a GridLineStats.
func (s *shaper) lineStats(req *msg.GridLineStats) *msg.GridLineStatsResult {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	out := &msg.GridLineStatsResult{}
	if inst == nil {
		return out
	}
	st := inst.DelayStats()
	out.Released, out.Drops = st.Released, st.Drops
	out.Count, out.P50Ns, out.P99Ns, out.MaxNs = st.Lateness.Count, int64(st.Lateness.P50), int64(st.Lateness.P99), int64(st.Lateness.Max)
	if ls, ok := inst.(interface {
		LineStats() (kernel.LineStats, error)
	}); ok {
		if _, err := ls.LineStats(); err != nil {
			out.Error = err.Error()
		}
	}
	if req.ResetLateness {
		if r, ok := inst.(interface{ ResetLateness() }); ok {
			r.ResetLateness()
		} else if h, ok := inst.(interface{ LatenessHistogram() *ptimer.Histogram }); ok {
			h.LatenessHistogram().Reset()
		}
	}
	return out
}

// pingPong measures a ping-pong from this host to the probe endpoint at
// req.Addr through the host's egress. The connection opens with the probe
// hello (this host's cluster on one line), as launch's probe endpoints
// expect.
func (s *shaper) pingPong(ctx context.Context, req *msg.GridPingPong) *msg.GridPingPongResult {
	out := &msg.GridPingPongResult{}
	res, err := measure(ctx, &s.egress, s.cluster, req.DstCluster, req.Addr, netem.PingPongOptions{
		LatencyRounds: int(req.LatencyRounds), LatencyWarmup: int(req.LatencyWarmup), BandwidthRounds: int(req.BandwidthRounds),
		MsgSize: int(req.MsgSize)})
	if err != nil {
		out.Error = fmt.Sprintf("%s -> %s (%s): %v", s.name, req.DstCluster, req.Addr, err)
		return out
	}
	out.LatencyNs, out.Bandwidth = int64(res.Latency), res.Bandwidth
	out.RttP50Ns, out.RttP99Ns = int64(res.RTTP50), int64(res.RTTP99)
	return out
}

func measure(ctx context.Context, egress netem.Egress, self, dst, addr string, opts netem.PingPongOptions) (netem.PingPongResult, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return netem.PingPongResult{}, err
	}
	defer raw.Close()
	if tc, ok := raw.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			return netem.PingPongResult{}, err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := raw.SetDeadline(dl); err != nil {
			return netem.PingPongResult{}, err
		}
	}
	if _, err := fmt.Fprintf(raw, "%s\n", self); err != nil {
		return netem.PingPongResult{}, err
	}
	res, err := netem.MeasurePingPong(ctx, egress.Wrap(raw, dst), opts)
	if err != nil {
		return netem.PingPongResult{}, err
	}
	return res, nil
}

func toGridLink(cluster string, l netem.Link) *msg.GridLink {
	return &msg.GridLink{Cluster: cluster, LatencyNs: int64(l.Latency), Bandwidth: l.Bandwidth,
		JitterNs: int64(l.Jitter), Loss: l.Loss, Unavailable: l.Unavailable}
}

func toGridOverhead(o netem.Overhead) []*msg.GridOverheadPoint {
	out := make([]*msg.GridOverheadPoint, len(o))
	for i, p := range o {
		out[i] = &msg.GridOverheadPoint{DelayNs: int64(p.Delay), OverheadNs: int64(p.Overhead)}
	}
	return out
}

func fromGridOverhead(ps []*msg.GridOverheadPoint) netem.Overhead {
	out := make(netem.Overhead, len(ps))
	for i, p := range ps {
		out[i] = netem.OverheadPoint{Delay: time.Duration(p.DelayNs), Overhead: time.Duration(p.OverheadNs)}
	}
	return out
}

func fromGridLink(l *msg.GridLink) netem.Link {
	return netem.Link{Latency: time.Duration(l.LatencyNs), Bandwidth: l.Bandwidth, Jitter: time.Duration(l.JitterNs),
		Loss: l.Loss, Unavailable: l.Unavailable}
}
