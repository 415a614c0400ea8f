package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// CalibrateOptions configures CalibrateNetns.
type CalibrateOptions struct {
	PingPong netem.PingPongOptions
	// RunID names the namespaces (koala-<RunID>-...); "" picks one.
	RunID string
	// Dilation applied to every link (<= 1: none).
	Dilation float64
	// Log receives progress lines (nil: none).
	Log io.Writer
	// NoRealtime keeps the delay lines' threads in normal scheduling
	// (kernel.HTB.NoRealtime).
	NoRealtime bool
	// Attempts is how many times a pair is measured at most, as in
	// netem.CalibrateOptions: a pair that FAILs or whose p99 release
	// lateness exceeds netem.MaxReleaseLateness is measured again (fresh
	// connection, same installation) and the first good attempt, else the
	// first, is kept; the row says how many were made. Transient load
	// from other processes on a small shared machine otherwise fails pairs
	// the emulator reproduces when it gets the CPU. 0 means 3.
	Attempts int
}

// CalibrationInfo is what CalibrateNetns learned about the path besides
// the rows.
type CalibrationInfo struct {
	Mechanism string
	Reason    string
	// Floor is the unshaped one-way latency between two hosts.
	Floor time.Duration
	// FloorBandwidth is the unshaped 1 MB ping-pong bandwidth.
	FloorBandwidth float64
	// Overhead is the delay line's own one-way cost as a function of the
	// delay it adds (htb only; kernel.Model.Overhead).
	Overhead netem.Overhead
	// LineMsgOverhead is the delay line's cost per 1 MB message at zero
	// delay and LineProbeRate (htb only; kernel.Model.LineMsgOverhead).
	LineMsgOverhead time.Duration
	// Model is what was installed with.
	Model kernel.Model
}

// CalibrateNetns measures every unordered cluster pair of m (a cluster with
// itself included, unavailable pairs skipped) over the project's own test
// hosts: two namespaces per cluster on one bridge, the selected mechanism
// installed in each with that host's egress plan. want is
// auto|netem|htb|userspace (see netem.Select; candidates in order netem,
// htb, userspace). An explicitly requested mechanism that cannot run here
// fails at once with the probe's reason (for netem on this project's CI
// kernel: "no netem qdisc in this kernel (ENOENT)").
//
// Before the pairs it measures the unshaped one-way latency (the floor:
// targets at or below it get no delay and are judged FLOOR) and, for htb,
// the delay line's own cost, which is subtracted from the delays it adds.
// A pair that fails is measured again (opts.Attempts). Every namespace is
// removed before it returns, also on error. The lead's command prints the
// rows with netem.PrintCalibration; info says what was measured on the way.
func CalibrateNetns(ctx context.Context, m netem.Matrix, want string, opts CalibrateOptions) (_ []netem.CalibrationRow, _ netem.CalibrationSummary, info CalibrationInfo, err error) {
	logf := func(format string, a ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", a...)
		}
	}
	d := opts.Dilation
	if d <= 1 {
		d = 1
	}
	var spec Spec
	spec.RunID = opts.RunID
	spec.Clusters = m.Clusters
	for _, c := range m.Clusters {
		spec.Hosts = append(spec.Hosts, HostSpec{Name: c + "-0", Cluster: c}, HostSpec{Name: c + "-1", Cluster: c})
	}
	if len(m.Clusters) == 0 {
		return nil, netem.CalibrationSummary{}, info, errors.New("netns: calibrate: no clusters")
	}
	topo, err := Setup(ctx, spec)
	if err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	defer func() {
		if cerr := topo.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	first := topo.HostsOf(m.Clusters[0])[0]

	// Select (probes run in a host's namespace).
	var mech netem.Mechanism
	err = topo.Run(first, func() error {
		var err error
		mech, info.Reason, err = netem.Select(ctx, want, []netem.Mechanism{
			kernel.Netem{}, kernel.HTB{}, netem.Userspace{},
		})
		return err
	})
	if err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	info.Mechanism = mech.Name()
	logf("mechanism %s: %s", mech.Name(), info.Reason)

	// The floor: unshaped, between hosts of two clusters (or two hosts of
	// the only cluster).
	other := topo.Hosts[1]
	if len(m.Clusters) > 1 {
		other = topo.HostsOf(m.Clusters[1])[1]
	}
	model, base, err := PathModel(ctx, topo, first, other, mech.Name(), max(m.MaxLatency(d), 0), opts, logf)
	if err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	info.Floor, info.FloorBandwidth = base.Latency, base.Bandwidth
	info.Overhead, info.LineMsgOverhead = model.Overhead, model.LineMsgOverhead
	mech = Mechanism(mech.Name(), model, opts.NoRealtime)
	info.Model = model

	// Install every host's plan.
	insts := map[*Host]netem.Installed{}
	defer func() {
		for _, in := range insts {
			if cerr := in.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	dm := dilate(m, d)
	for _, h := range topo.Hosts {
		plan, err := dm.PlanFor(h.Name, h.Cluster)
		if err != nil {
			return nil, netem.CalibrationSummary{}, info, err
		}
		var in netem.Installed
		if err := topo.Run(h, func() error {
			var err error
			in, err = mech.Install(ctx, plan, topo.Destinations())
			return err
		}); err != nil {
			return nil, netem.CalibrationSummary{}, info, fmt.Errorf("netns: install on %s: %w", h.Name, err)
		}
		insts[h] = in
	}

	attempts := opts.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var rows []netem.CalibrationRow
	for i, src := range m.Clusters {
		for j := i; j < len(m.Clusters); j++ {
			dst := m.Clusters[j]
			target := dm.Links[i][j]
			if target.Unavailable {
				continue
			}
			a, b := topo.HostsOf(src)[0], topo.HostsOf(dst)[1]
			row, err := netem.BestOf(attempts, func(try int) (netem.CalibrationRow, error) {
				r, err := measurePair(ctx, topo, insts, a, b, src, dst, target, info.Floor, mech.Name(), opts.PingPong)
				if err != nil {
					return r, err
				}
				logf("%s-%s attempt %d: %.1f MB/s %v, p99 lateness %v -> %s", src, dst, try, r.Measured.Bandwidth/1e6, r.Measured.Latency, r.Lateness.P99, r.Verdict)
				if !netem.RowGood(r) {
					// Where the lateness came from, per end of the pair.
					for _, h := range []*Host{a, b} {
						if k, ok := insts[h].(*kernel.Installed); ok {
							st, _ := k.LineStats()
							logf("  %s: %d releases (%d early, within %v), lateness p99 %v max %v; timed wake-ups late p50 %v p99 %v, %d after a deadline; verdict p99 %v; spin margin %v; %d yields, p99 %v",
								h.Name, st.Lateness.Count, st.Early, kernel.Coalesce, st.Lateness.P99, st.Lateness.Max, st.WakeOvershoot.P50, st.WakeOvershoot.P99,
								st.LateWakes, st.VerdictCost.P99, st.Spin, st.Yields.Count, st.Yields.P99)
						}
					}
				}
				return r, nil
			})
			if err != nil {
				return rows, netem.CalibrationSummary{}, info, fmt.Errorf("netns: calibrate %s-%s: %w", src, dst, err)
			}
			rows = append(rows, row)
		}
	}
	return rows, netem.SummarizeCalibration(rows), info, nil
}

// PathModel measures what the kernel shapers' Model needs between hosts a
// and b of topo: the unshaped floor (the quietest of netem.QuietRounds
// ping-pongs, returned whole) and, for the htb mechanism, the delay line's
// own cost at delays up to maxLatency less the floor and per message.
func PathModel(ctx context.Context, topo *Topology, a, b *Host, mechanism string, maxLatency time.Duration, opts CalibrateOptions,
	logf func(string, ...any)) (kernel.Model, netem.PingPongResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	base, err := netem.Quietest(netem.QuietRounds, func() (netem.PingPongResult, error) {
		return measure(ctx, topo, a, b, nil, nil, "", "", opts.PingPong)
	})
	if err != nil {
		return kernel.Model{}, base, fmt.Errorf("netns: calibrate: floor: %w", err)
	}
	logf("floor: one-way %v, 1 MB ping-pong %.0f MB/s unshaped", base.Latency, base.Bandwidth/1e6)
	model := kernel.Model{Floor: base.Latency}
	if mechanism == kernel.NameHTB {
		if model.Overhead, model.LineMsgOverhead, err = lineOverhead(ctx, topo, a, b, model.Floor, max(maxLatency-model.Floor, 0), opts, logf); err != nil {
			return model, base, err
		}
		logf("delay line overhead (delay:overhead one way): %v; %v per 1 MB message at zero delay and %.0f MB/s",
			model.Overhead, model.LineMsgOverhead, LineProbeRate/1e6)
	}
	return model, base, nil
}

// Mechanism is the named mechanism with model (kernel.NameHTB,
// kernel.NameNetem; anything else is the userspace shaper, whose plans are
// dilated already).
func Mechanism(name string, model kernel.Model, noRealtime bool) netem.Mechanism {
	switch name {
	case kernel.NameHTB:
		return kernel.HTB{Model: model, NoRealtime: noRealtime}
	case kernel.NameNetem:
		return kernel.Netem{Model: model}
	}
	return netem.Userspace{}
}

// measurePair measures one pair over installed mechanisms: a ping-pong
// from a (cluster src) to b (cluster dst), with the delay lines' lateness
// and drops of both ends over that measurement.
func measurePair(ctx context.Context, topo *Topology, insts map[*Host]netem.Installed, a, b *Host, src, dst string,
	target netem.Link, floor time.Duration, mech string, pp netem.PingPongOptions) (netem.CalibrationRow, error) {
	quiesce(ctx, insts)
	before := map[*Host]netem.DelayStats{}
	for _, h := range []*Host{a, b} {
		before[h] = insts[h].DelayStats()
		if r, ok := insts[h].(interface{ ResetLateness() }); ok {
			r.ResetLateness()
		}
	}
	res, err := measure(ctx, topo, a, b, insts[a], insts[b], src, dst, pp)
	if err != nil {
		return netem.CalibrationRow{}, err
	}
	var hist ptimer.Histogram
	var drops, released int64
	for _, h := range []*Host{a, b} {
		st := insts[h].DelayStats()
		drops += st.Drops - before[h].Drops
		released += st.Released - before[h].Released
		if lh, ok := insts[h].(interface{ LatenessHistogram() *ptimer.Histogram }); ok {
			hist.Merge(lh.LatenessHistogram())
		}
	}
	var delay time.Duration
	if k, ok := insts[a].(*kernel.Installed); ok {
		delay = k.Shaping()[dst].Delay
	}
	v, bwErr, latErr := netem.Verdict(target, res, floor)
	return netem.CalibrationRow{
		Src: src, Dst: dst, Target: target, Measured: res, BwErr: bwErr, LatErr: latErr,
		Mechanism: mech, Verdict: v, Segments: released, Drops: drops,
		Lateness: hist.Stats(), Baseline: floor, Delay: delay,
	}, nil
}

// quiesce waits (up to 50 ms) until no delay line holds a packet, so that
// the teardown of the previous pair's connection is not counted in the next
// pair's statistics.
func quiesce(ctx context.Context, insts map[*Host]netem.Installed) {
	deadline := time.Now().Add(50 * time.Millisecond)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		held := int64(0)
		for _, in := range insts {
			if h, ok := in.(interface{ Held() int64 }); ok {
				held += h.Held()
			}
		}
		if held == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func dilate(m netem.Matrix, d float64) netem.Matrix {
	out := netem.Matrix{Clusters: m.Clusters, Links: make([][]netem.Link, len(m.Links))}
	for i := range m.Links {
		out.Links[i] = make([]netem.Link, len(m.Links[i]))
		for j, l := range m.Links[i] {
			out.Links[i][j] = l.Dilate(d)
		}
	}
	return out
}

// LineProbeRate is the rate at which lineOverhead measures the delay
// line's cost per message at zero delay: about DAS-3's intra-cluster
// Myri-10G ping-pong bandwidth, the links that use the line that way.
const LineProbeRate = 530e6

// lineOverhead measures the one-way latency the delay line adds by itself
// as a function of the delay it adds (kernel.Model.Overhead): at each of
// kernel.OverheadProbes(maxDelay), the htb mechanism installed on two
// hosts with a plan that only delays (no rate), every packet diverted to
// the line at zero delay. It also measures what the line at zero delay
// costs per 1 MB message at LineProbeRate: the time the ping-pong's
// message takes beyond what the rate model expects and beyond the latency
// the line adds.
func lineOverhead(ctx context.Context, topo *Topology, a, b *Host, floor, maxDelay time.Duration, opts CalibrateOptions,
	logf func(string, ...any)) (curve netem.Overhead, perMsg time.Duration, err error) {
	run := func(link netem.Link, divertAll bool, pp netem.PingPongOptions) (_ netem.PingPongResult, err error) {
		mech := kernel.HTB{Model: kernel.Model{Floor: floor}, DivertAll: divertAll, NoRealtime: opts.NoRealtime}
		var ia, ib netem.Installed
		defer func() {
			for _, in := range []netem.Installed{ia, ib} {
				if in != nil {
					if cerr := in.Close(); cerr != nil {
						err = errors.Join(err, cerr)
					}
				}
			}
		}()
		for _, x := range []struct {
			h    *Host
			peer *Host
			in   *netem.Installed
		}{{a, b, &ia}, {b, a, &ib}} {
			plan := netem.EgressPlan{Node: x.h.Name, Cluster: x.h.Cluster, To: map[string]netem.Link{x.peer.Cluster: link}}
			if err := topo.Run(x.h, func() error {
				var err error
				*x.in, err = mech.Install(ctx, plan, topo.Destinations())
				return err
			}); err != nil {
				return netem.PingPongResult{}, err
			}
		}
		return measure(ctx, topo, a, b, nil, nil, "", "", pp)
	}
	probes := kernel.OverheadProbes(maxDelay)
	logf("delay line overhead: measuring at %d delays up to %v, %d passes", len(probes), probes[len(probes)-1], kernel.OverheadPasses)
	curve, err = netem.MeasureCurve(probes, kernel.OverheadPasses, func(d time.Duration) (time.Duration, error) {
		res, err := run(netem.Link{Latency: floor + d}, d == 0, kernel.OverheadProbeOptions(opts.PingPong, d))
		if err != nil {
			return 0, fmt.Errorf("netns: delay line overhead at %v: %w", d, err)
		}
		return res.Latency - floor - d, nil
	})
	if err != nil {
		return nil, 0, err
	}
	// Three tries, the median kept: one try is at the mercy of what else
	// the machine does at that moment.
	var v []time.Duration
	msg := float64(netem.BandwidthMsgSize)
	for range 3 {
		r, err := run(netem.Link{Latency: floor, Bandwidth: LineProbeRate}, true, opts.PingPong)
		if err != nil {
			return nil, 0, fmt.Errorf("netns: delay line cost per message: %w", err)
		}
		if r.Bandwidth <= 0 {
			v = append(v, 0)
			continue
		}
		// Beyond the one latency the line adds, which the rate model
		// already counts (it uses the link's target latency).
		v = append(v, time.Duration((msg/r.Bandwidth-msg/LineProbeRate)*1e9)-(r.Latency-floor))
	}
	slices.Sort(v)
	return curve, max(v[1], 0), nil
}

// measure runs a ping-pong from a to b: a server in b's namespace, a
// client in a's. ea and eb wrap the connections (userspace mechanism;
// kernel mechanisms return them unchanged); nil means unshaped.
func measure(ctx context.Context, topo *Topology, a, b *Host, ea, eb netem.Egress, aCluster, bCluster string, pp netem.PingPongOptions) (netem.PingPongResult, error) {
	ln, err := topo.Listen(ctx, b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
	if err != nil {
		return netem.PingPongResult{}, err
	}
	var sln net.Listener = ln
	if eb != nil {
		sln = netem.WrapListener(ln, eb, aCluster)
	}
	sctx, cancel := context.WithCancel(ctx)
	serr := make(chan error, 1)
	go func() { serr <- netem.ServePingPong(sctx, sln) }()
	stop := func() error {
		cancel()
		return <-serr
	}
	conn, err := topo.Dial(ctx, a, "tcp", ln.Addr().String())
	if err != nil {
		return netem.PingPongResult{}, errors.Join(err, stop())
	}
	if ea != nil {
		conn = ea.Wrap(conn, bCluster)
	}
	res, err := netem.MeasurePingPong(ctx, conn, pp)
	cerr := conn.Close()
	if err != nil {
		return netem.PingPongResult{}, errors.Join(err, stop())
	}
	if err := errors.Join(cerr, stop()); err != nil {
		return netem.PingPongResult{}, err
	}
	return res, nil
}
