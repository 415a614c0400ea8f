package grid

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
)

// ShapeInfo is what the launcher learned while setting up the shaping.
type ShapeInfo struct {
	Mechanism, Reason string
	// Floor is the unshaped one-way latency between two node containers,
	// FloorBandwidth their unshaped 1 MB ping-pong bandwidth.
	Floor          time.Duration
	FloorBandwidth float64
	// Overhead is the delay line's own one-way cost as a function of the
	// delay it adds (htb only; kernel.Model.Overhead).
	Overhead netem.Overhead
	// Effective is, per host, the link in effect towards each cluster.
	Effective map[string]map[string]netem.Link
	// Hosts is how many hosts shape their egress.
	Hosts int
	// Spin is the delay lines' spin margin (see MechanismOptions.Spin).
	Spin time.Duration
}

// probeAddr is where a host's probe endpoint listens.
func probeAddr(m membership.Member) (string, error) {
	a := m.Meta[metaProbe]
	if a == "" {
		return "", fmt.Errorf("%s has no probe endpoint", m.Name)
	}
	return a, nil
}

// pingPong asks host a to measure a ping-pong to host b.
func (l *launcher) pingPong(ctx context.Context, a, b membership.Member, pp netem.PingPongOptions) (netem.PingPongResult, error) {
	addr, err := probeAddr(b)
	if err != nil {
		return netem.PingPongResult{}, err
	}
	res, err := askFor[*msg.GridPingPongResult](ctx, l, a, &msg.GridPingPong{DstCluster: b.Cluster, Addr: addr,
		LatencyRounds: int32(pp.LatencyRounds), LatencyWarmup: int32(pp.LatencyWarmup), BandwidthRounds: int32(pp.BandwidthRounds),
		MsgSize: int32(pp.MsgSize)}, 90*time.Second)
	if err != nil {
		return netem.PingPongResult{}, err
	}
	return netem.PingPongResult{Latency: time.Duration(res.LatencyNs), Bandwidth: res.Bandwidth,
		RTTP50: time.Duration(res.RttP50Ns), RTTP99: time.Duration(res.RttP99Ns)}, nil
}

// shapeHost asks one host to install a shaping.
func (l *launcher) shapeHost(ctx context.Context, m membership.Member, req *msg.GridShape) (*msg.GridShaped, error) {
	return askFor[*msg.GridShaped](ctx, l, m, req, 2*time.Minute)
}

// askFor asks host m's control actor and returns the reply as a T; a reply
// of another type, or one that carries an error, is an error.
func askFor[T interface{ GetError() string }](ctx context.Context, l *launcher, m membership.Member, req interface{}, timeout time.Duration) (T, error) {
	var zero T
	r, err := l.ask(ctx, m, req, timeout)
	if err != nil {
		return zero, err
	}
	t, ok := r.(T)
	if !ok {
		return zero, fmt.Errorf("%s: unexpected reply %T", m.Name, r)
	}
	if e := t.GetError(); e != "" {
		return zero, errors.New(e)
	}
	return t, nil
}

// model selects the mechanism (probes run in host a) and measures the floor
// between hosts a and b and, for htb, the delay line's own overhead at the
// delays up to maxLatency less the floor (kernel.OverheadProbes).
func (l *launcher) model(ctx context.Context, want string, spin time.Duration, a, b membership.Member, pp netem.PingPongOptions,
	maxLatency time.Duration) (ShapeInfo, error) {
	info := ShapeInfo{Spin: spin}
	if want == "" {
		want = netem.Auto
	}
	sel, err := l.shapeHost(ctx, a, &msg.GridShape{Mechanism: want, SelectOnly: true})
	if err != nil {
		return info, fmt.Errorf("grid: shaping: %w", err)
	}
	info.Mechanism, info.Reason = sel.Mechanism, sel.Reason
	if err := l.unshape(ctx, a, b); err != nil {
		return info, err
	}
	base, err := l.quietest(ctx, a, b, pp)
	if err != nil {
		return info, fmt.Errorf("grid: floor: %w", err)
	}
	info.Floor, info.FloorBandwidth = base.Latency, base.Bandwidth
	if info.Mechanism != kernel.NameHTB {
		return info, nil
	}
	if info.Overhead, err = l.overhead(ctx, info.Floor, spin, a, b, pp, kernel.OverheadProbes(max(maxLatency-info.Floor, 0))); err != nil {
		return info, err
	}
	return info, l.unshape(ctx, a, b)
}

// unshape removes the shaping of the hosts ms, one after the other.
func (l *launcher) unshape(ctx context.Context, ms ...membership.Member) error {
	for _, m := range ms {
		if _, err := l.shapeHost(ctx, m, &msg.GridShape{Mechanism: MechanismNone}); err != nil {
			return fmt.Errorf("grid: shaping: %w", err)
		}
	}
	return nil
}

// overhead measures the delay line's own cost between hosts a and b at the
// probe delays (increasing; kernel.Model.Overhead): both ends divert all
// their traffic to each other through the line, installed once at the
// first probe delay without probing the mechanism again, as the run's
// hosts install it; every later probe changes the line's delay in place
// (GridSetLink; a host that cannot installs the whole shaping again, as it
// does for a fault). A line changed in place costs what one freshly
// installed at that delay costs (measured on netns, docs/docker-netns.md),
// and the model phase no longer installs the shaping twice per probe.
func (l *launcher) overhead(ctx context.Context, floor, spin time.Duration, a, b membership.Member, pp netem.PingPongOptions,
	probes []time.Duration) (netem.Overhead, error) {
	peer := map[string]string{a.Name: b.Cluster, b.Name: a.Cluster}
	link := func(m membership.Member, delay time.Duration) *msg.GridLink {
		return &msg.GridLink{Cluster: peer[m.Name], LatencyNs: int64(floor + delay)}
	}
	ends := []membership.Member{a, b}
	replies, err := l.askAll(ctx, ends, func(m membership.Member) interface{} {
		return &msg.GridShape{Mechanism: kernel.NameHTB, Probed: true, FloorNs: int64(floor), DivertAll: true, SpinNs: int64(spin),
			Links: []*msg.GridLink{link(m, probes[0])}}
	}, 2*time.Minute, len(ends))
	if err := errors.Join(err, ackError(replies)); err != nil {
		return nil, fmt.Errorf("grid: delay line overhead: %w", err)
	}
	return netem.MeasureCurve(probes, kernel.OverheadPasses, func(delay time.Duration) (time.Duration, error) {
		replies, err := l.askAll(ctx, ends, func(m membership.Member) interface{} {
			return &msg.GridSetLink{Link: link(m, delay)}
		}, 2*time.Minute, len(ends))
		if err := errors.Join(err, ackError(replies)); err != nil {
			return 0, fmt.Errorf("grid: delay line overhead at %v: %w", delay, err)
		}
		res, err := l.pingPong(ctx, a, b, kernel.OverheadProbeOptions(pp, delay))
		if err != nil {
			return 0, fmt.Errorf("grid: delay line overhead at %v: %w", delay, err)
		}
		return res.Latency - floor - delay, nil
	})
}

// quietest measures each figure of the model netem.QuietRounds times and
// keeps the quietest (netem.Quietest).
func (l *launcher) quietest(ctx context.Context, a, b membership.Member, pp netem.PingPongOptions) (netem.PingPongResult, error) {
	return netem.Quietest(netem.QuietRounds, func() (netem.PingPongResult, error) { return l.pingPong(ctx, a, b, pp) })
}

// shapeAll installs the mechanism of info with its model on every host of
// hs and records what each reports in effect. Every host must end up with
// the same mechanism; none probes it again (the model's host did).
func (l *launcher) shapeAll(ctx context.Context, info *ShapeInfo, hs []membership.Member) error {
	req := &msg.GridShape{Mechanism: info.Mechanism, Probed: true, FloorNs: int64(info.Floor), Overhead: toGridOverhead(info.Overhead),
		SpinNs: int64(info.Spin)}
	replies, err := l.askAll(ctx, hs, func(membership.Member) interface{} { return req }, 2*time.Minute, 16)
	info.Effective = map[string]map[string]netem.Link{}
	info.Hosts = 0
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for i, r := range replies {
		s, ok := r.(*msg.GridShaped)
		if !ok {
			continue
		}
		if s.Error != "" {
			errs = append(errs, errors.New(s.Error))
			continue
		}
		if s.Mechanism != info.Mechanism {
			errs = append(errs, fmt.Errorf("%s installed %s, not %s", hs[i].Name, s.Mechanism, info.Mechanism))
			continue
		}
		eff := map[string]netem.Link{}
		for _, gl := range s.Effective {
			eff[gl.Cluster] = fromGridLink(gl)
		}
		info.Effective[hs[i].Name] = eff
		info.Hosts++
	}
	if len(errs) > 0 {
		if len(errs) > 5 {
			errs = append(errs[:5], fmt.Errorf("and %d more errors", len(errs)-5))
		}
		return fmt.Errorf("grid: shaping: %w", errors.Join(errs...))
	}
	return nil
}

// Manifest builds the run's link manifest from what the node hosts report:
// per ordered cluster pair, the link in effect on the nodes of the source
// cluster (they agree: same model, same plan; a pair on which they do not
// says so in its reason). backend names the backend in the reason.
func (info *ShapeInfo) Manifest(backend string, m netem.Matrix, dilation float64, nodes []membership.Member) netem.Manifest {
	bySrc := map[string][]string{}
	for _, n := range nodes {
		if _, ok := info.Effective[n.Name]; ok {
			bySrc[n.Cluster] = append(bySrc[n.Cluster], n.Name)
		}
	}
	notes := map[[2]string]string{}
	eff := func(src, dst string) netem.Link {
		req, _ := m.Link(src, dst)
		req = req.Dilate(dilation)
		names := bySrc[src]
		if len(names) == 0 {
			notes[[2]string{src, dst}] = "no node of " + src + " reported"
			return req
		}
		sort.Strings(names)
		first, ok := info.Effective[names[0]][dst]
		if !ok {
			notes[[2]string{src, dst}] = "not shaped"
			return req
		}
		differ := 0
		for _, n := range names[1:] {
			if l := info.Effective[n][dst]; l != first {
				differ++
			}
		}
		note := fmt.Sprintf("%d nodes of %s shape it in their own egress", len(names), src)
		if differ > 0 {
			note += fmt.Sprintf("; %d of them report a different effective link", differ)
		}
		notes[[2]string{src, dst}] = note
		return first
	}
	reason := fmt.Sprintf("%s backend: every node and cluster-manager host shapes its own egress per destination cluster (%d hosts); %s; unshaped floor %.1f µs one way, %.0f MB/s",
		backend, info.Hosts, info.Reason, float64(info.Floor)/1e3, info.FloorBandwidth/1e6)
	if info.Mechanism == kernel.NameHTB {
		reason += fmt.Sprintf("; delay line overhead at delay:overhead %v", info.Overhead)
		if info.Spin < 0 {
			reason += ", delay lines never spin"
		}
	}
	man := netem.BuildManifest(m, info.Mechanism, reason, eff)
	for i := range man.Entries {
		e := &man.Entries[i]
		if e.Reason == "" {
			e.Reason = notes[[2]string{e.Src, e.Dst}]
		}
		if !e.Requested.Unavailable && dilation > 1 {
			e.Requested = e.Requested.Dilate(dilation)
		}
	}
	man.Backend = "docker"
	return man
}

// describe is a one-line summary of the shaping for progress output.
func (info *ShapeInfo) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mechanism %s on %d hosts (%s); floor %.1f µs", info.Mechanism, info.Hosts, info.Reason, float64(info.Floor)/1e3)
	if info.Mechanism == kernel.NameHTB {
		fmt.Fprintf(&b, ", delay line overhead at delay:overhead %v", info.Overhead)
	}
	return b.String()
}
