package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// DefaultStartStall is how long a start may go without progress before it
// fails (Config.StartStall).
const DefaultStartStall = 2 * time.Minute

// Config holds what the grid backends need beyond wiring.Options.
type Config struct {
	// Platform starts the hosts; nil means a DockerPlatform with Docker.
	Platform Platform
	// Docker configures the default DockerPlatform.
	Docker DockerOptions
	// StartStall is how long the start may go without progress (another
	// host started, or more hosts in the membership than ever before)
	// before the run fails; default DefaultStartStall. The start as a whole
	// is bounded only by the context: a slow machine makes it slower, not
	// failed.
	StartStall time.Duration
	// OnEvent is called for every event the recorder receives (tests).
	OnEvent func(*msg.Event)
	// OnNodeDown is called when a node host fails or leaves mid-run.
	OnNodeDown func(name string)
}

// Run runs a plan on a platform: the scheduler (or the malleability
// manager), the information service, every cluster manager, every compute
// node and every runner site are actor hosts started by the platform; this
// process hosts the recorder and the submitter. The roles are built by
// launch/wiring as on every backend.
func Run(ctx context.Context, plan *scenarios.Plan, opts wiring.Options, cfg Config) (res *wiring.Result, err error) {
	opts = opts.WithDefaults()
	if cfg.StartStall <= 0 {
		cfg.StartStall = DefaultStartStall
	}
	r := &gridRun{plan: plan, opts: opts, cfg: cfg, began: time.Now()}
	r.plat = orDocker(cfg.Platform, cfg.Docker, opts.Progress, 0)
	r.backend = backendOf(r.plat)
	var undo wiring.Undo
	defer func() { err = errors.Join(err, undo.Run()) }()
	rs, err := wiring.OpenResults(plan, opts.Out, &undo)
	if err != nil {
		return nil, err
	}
	if cfg.OnEvent != nil {
		rs.OnEvent(cfg.OnEvent)
	}
	if err := r.up(ctx, &undo, rs); err != nil {
		return nil, err
	}
	manifest, err := r.shape(ctx)
	if err != nil {
		return nil, err
	}
	if err := rs.WriteManifest(manifest, opts.Progress); err != nil {
		return nil, err
	}
	r.reportFailures()
	if err := r.activate(ctx); err != nil {
		return nil, err
	}
	// Scenario time 0 for every host at once.
	epoch := time.Now().Add(200 * time.Millisecond)
	if err := r.l.setEpoch(ctx, epoch); err != nil {
		return nil, err
	}
	clk := clock.NewScaled(r.l.grid.Factor())
	clk.RestartAt(epoch)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go r.l.submit(runCtx, plan, clk)
	faultsDone := r.faults(runCtx, clk).Start(runCtx)
	out := rs.Await(ctx, clk, opts, stopRun)
	faultsDone()
	// The faults timeline's record of its last fault and the launcher's own
	// events may still wait in the recorder's mailbox (as on inproc); events
	// from the hosts that are still on the wire are not covered.
	if err := rs.Recorder().Sync(r.l.system.Root, r.l.system.NewLocalPID(wiring.ActorRecorder), wiring.SettleTimeout); err != nil {
		return nil, err
	}
	if plan.Policy.Malleability != nil {
		r.collectInvariants(ctx, rs)
	}
	out.Backend, out.Shaper, out.Manifest = r.backend, r.info.Mechanism, manifest
	out.Extra = r.extra(ctx, out.Jobs)
	return rs.Finish(ctx, out)
}

// faults is the run's faults timeline: the grid's applier, and the
// information service told of partitions and heals (its host found in the
// membership, as every role's is).
func (r *gridRun) faults(ctx context.Context, clk *clock.Scaled) wiring.FaultRun {
	f := wiring.FaultRun{Plan: r.plan, Applier: newGridFaults(ctx, r.plat, r.l, r.plan.Links),
		Env: actors.Env{System: r.l.system, Clock: clk, Recorder: r.l.system.NewLocalPID(wiring.ActorRecorder)}}
	if kis := r.l.hostsByRole(membership.RoleKIS); len(kis) > 0 {
		f.KIS = pidOf(kis[0], wiring.ActorKIS)
	}
	return f
}

// orDocker is p, or a DockerPlatform configured by d whose notices go to
// log; realtime is the containers' real-time budget unless d sets one.
func orDocker(p Platform, d DockerOptions, log io.Writer, realtime time.Duration) Platform {
	if p != nil {
		return p
	}
	if d.Log == nil {
		d.Log = log
	}
	if d.Realtime == 0 {
		d.Realtime = realtime
	}
	return NewDockerPlatform(d)
}

// gridRun is one run of a grid backend.
type gridRun struct {
	plan    *scenarios.Plan
	opts    wiring.Options
	cfg     Config
	plat    Platform
	backend string
	began   time.Time
	hosts   []HostSpec
	l       *launcher
	times   StartupTimes
	info    ShapeInfo
	shaped  time.Duration
	ready   time.Duration
	// probeWait bounds the first probe round (wiring.Spec.ProbeTimeouts).
	probeWait time.Duration
}

// up starts the launcher (network, actor system, membership), spawns the
// recorder and starts every host.
func (r *gridRun) up(ctx context.Context, undo *wiring.Undo, rs *wiring.Results) error {
	g := GridFromPlan(r.plan, r.opts.ProbeBytes)
	_, r.probeWait = g.Spec.ProbeTimeouts()
	r.hosts = hostsOf(g)
	if hp, ok := r.plat.(hostPlanner); ok {
		hp.planHosts(r.hosts)
	}
	unit := hostUnit(r.backend)
	fmt.Fprintf(r.opts.Progress, r.backend+": %d clusters, %d nodes, %d cluster managers, scheduler, information service, %d runner sites: %d %s\n",
		len(g.Clusters), r.plan.TotalNodes(), len(g.Clusters), len(g.Sites), len(r.hosts), unit)
	l, err := newLauncher(ctx, r.plat, g, r.opts.Progress)
	if err != nil {
		return err
	}
	r.l = l
	undo.Push(func() error {
		fmt.Fprintf(r.opts.Progress, r.backend+": removing %d %s and the network\n", len(r.hosts), unit)
		return l.Close()
	})
	if _, err := l.system.Root.SpawnNamed(rs.Recorder().Props(), wiring.ActorRecorder); err != nil {
		return fmt.Errorf("spawn recorder: %w", err)
	}
	if r.times, err = l.startHosts(ctx, r.hosts, r.cfg.StartStall); err != nil {
		return err
	}
	fmt.Fprintf(r.opts.Progress, r.backend+": all %d %s up and in the membership after %.1f s\n", len(r.hosts), unit, r.times.Joined.Seconds())
	return nil
}

// shape selects the mechanism in one node host, measures the floor (and
// the delay line's overhead) between two of them, installs the shaping in
// every node and cluster-manager host and returns the manifest.
func (r *gridRun) shape(ctx context.Context) (netem.Manifest, error) {
	nodes := r.l.hostsByRole(membership.RoleNode)
	a, b := pairFor(nodes)
	// Delay lines never spin in a run: hundreds of them share the machine's
	// cores with the applications, and spinning ones starve the rest.
	began := time.Now()
	info, err := r.l.model(ctx, r.opts.Shaper, -1, a, b, netem.PingPongOptions{}, r.plan.Links.MaxLatency(r.plan.Dilation))
	if err != nil {
		return netem.Manifest{}, err
	}
	measured := time.Now()
	shaped := r.l.hostsByRole(membership.RoleNode, membership.RoleCluster)
	fmt.Fprintf(r.opts.Progress, r.backend+": mechanism and its model measured between %s and %s in %.1f s; installing it on %d hosts\n",
		a.Name, b.Name, measured.Sub(began).Seconds(), len(shaped))
	if err := r.l.shapeAll(ctx, &info, shaped); err != nil {
		return netem.Manifest{}, err
	}
	r.info, r.shaped = info, time.Since(r.began)
	fmt.Fprintf(r.opts.Progress, r.backend+": shaping in effect after %.1f s (installed in %.1f s): %s\n", r.shaped.Seconds(),
		time.Since(measured).Seconds(), info.describe())
	manifest := info.Manifest(r.backend, r.plan.Links, r.plan.Dilation, nodes)
	manifest.Backend = r.backend
	return manifest, nil
}

// reportFailures reports node failures from now on.
func (r *gridRun) reportFailures() {
	progress, backend := r.opts.Progress, r.backend
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.onFail = func(ev membership.Event) {
		if ev.Member.Role != membership.RoleNode {
			fmt.Fprintf(progress, backend+": host %s (%s) %s (membership)\n", ev.Member.Name, ev.Member.Role, ev.Kind)
			return
		}
		fmt.Fprintf(progress, backend+": node %s of %s %s (membership)\n", ev.Member.Name, ev.Member.Cluster, ev.Kind)
		if r.cfg.OnNodeDown != nil {
			r.cfg.OnNodeDown(ev.Member.Name)
		}
	}
}

// activate activates the role actors in dependency order (cluster managers
// publish to the information service at once, which starts probing when
// all have) and waits for the first probe round.
func (r *gridRun) activate(ctx context.Context) error {
	if err := r.l.activate(ctx, membership.RoleScheduler, membership.RoleKIS, membership.RoleRunner, membership.RoleCluster); err != nil {
		return err
	}
	fmt.Fprint(r.opts.Progress, r.backend+": scheduler, information service, runner sites and cluster managers active; probing links...\n")
	if err := wiring.AwaitProbes(ctx, r.l.ready, r.probeWait); err != nil {
		return err
	}
	r.ready = time.Since(r.began)
	fmt.Fprintf(r.opts.Progress, r.backend+": grid ready after %.1f s; replaying %d jobs over %s of scenario time (time scale %g, dilation %g)\n",
		r.ready.Seconds(), len(r.plan.Jobs), r.plan.Duration, r.plan.TimeScale, r.plan.Dilation)
	return nil
}

// collectInvariants asks the scheduler host and every runner site for
// their invariant counters (wiring.KindInvariantReport) and hands the sum
// to the results; when a host does not answer, the results count the
// violation events instead.
func (r *gridRun) collectInvariants(ctx context.Context, rs *wiring.Results) {
	hosts := r.l.hostsByRole(membership.RoleScheduler, membership.RoleRunner)
	replies, err := r.l.askAll(context.WithoutCancel(ctx), hosts, func(membership.Member) interface{} {
		return &msg.Event{Kind: wiring.KindInvariantReport}
	}, 10*time.Second, 8)
	if err != nil {
		fmt.Fprintf(r.opts.Progress, r.backend+": invariant counters not collected (violations counted from events): %v\n", err)
		return
	}
	var inv invariant.Summary
	for _, rep := range replies {
		if ev, ok := rep.(*msg.Event); ok {
			inv = wiring.AddInvariantReport(inv, ev)
		}
	}
	rs.SetReported(inv)
}

// extra are the grid's own figures for results.json: node failures and
// the jobs they failed, the hosts, the start-up times and, on Docker, the
// node containers' memory.
func (r *gridRun) extra(ctx context.Context, jobs []results.Job) map[string]any {
	var down []string
	for _, m := range r.l.Failed() {
		if m.Role == membership.RoleNode {
			down = append(down, m.Name)
		}
	}
	sort.Strings(down)
	byNode := 0
	for _, j := range jobs {
		if j.Status == results.StatusFailed && j.Cause == msg.FailureCause_FAILURE_NODE_DOWN.Name() {
			byNode++
		}
	}
	extra := map[string]any{"node_failures": len(down), "jobs_failed_by_node_failure": byNode, "containers": len(r.hosts),
		"startup_s": map[string]float64{"containers_started": round1(r.times.Started), "all_joined": round1(r.times.Joined),
			"shaped": round1(r.shaped), "ready": round1(r.ready)}}
	if len(down) > 0 {
		extra["nodes_down"] = down
	}
	if mem, ok := r.nodeMemory(ctx); ok {
		extra["node_memory_mib"] = mem
	}
	return extra
}

// nodeMemory samples the node containers' memory on platforms that can
// (Docker); EnvNoMemorySample turns it off.
func (r *gridRun) nodeMemory(ctx context.Context) (map[string]float64, bool) {
	ms, ok := r.plat.(interface {
		NodeMemory(ctx context.Context) (map[string]float64, error)
	})
	if !ok || os.Getenv(EnvNoMemorySample) != "" {
		return nil, false
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	mem, err := ms.NodeMemory(mctx)
	if err != nil {
		fmt.Fprintf(r.opts.Progress, r.backend+": node container memory not sampled: %v\n", err)
		return nil, false
	}
	fmt.Fprintf(r.opts.Progress, r.backend+": node container memory (MiB): %v\n", mem)
	return mem, true
}

// EnvNoMemorySample, when set (to anything) in the launcher's environment,
// skips sampling the node containers' memory at the end of a docker run
// (30 s at most on a large grid).
const EnvNoMemorySample = "KOALA_EMU_NO_MEMORY_SAMPLE"

// hostPlanner is a platform that must know the hosts before Setup (the
// netns platform makes their namespaces there).
type hostPlanner interface{ planHosts([]HostSpec) }

// backendOf names a platform's backend in results: "docker" unless the
// platform says otherwise.
func backendOf(p Platform) string {
	if b, ok := p.(interface{ backend() string }); ok {
		return b.backend()
	}
	return "docker"
}

func round1(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}

// hostsOf lists a grid's actor hosts: scheduler, information service,
// runner sites, then per cluster its manager and nodes.
func hostsOf(g *Grid) []HostSpec {
	hs := []HostSpec{{Name: hostScheduler, Role: membership.RoleScheduler}, {Name: hostKIS, Role: membership.RoleKIS}}
	for _, s := range g.Sites {
		hs = append(hs, HostSpec{Name: siteHost(s), Role: membership.RoleRunner, Cluster: s})
	}
	for _, c := range g.Clusters {
		hs = append(hs, HostSpec{Name: clusterHost(c.Name), Role: membership.RoleCluster, Cluster: c.Name})
		for i := 0; i < c.Nodes; i++ {
			hs = append(hs, HostSpec{Name: NodeName(c.Name, i), Role: membership.RoleNode, Cluster: c.Name})
		}
	}
	return hs
}

// pairFor picks the two node hosts the floor is measured between: the
// first nodes of the first two clusters, or two nodes of the only one.
func pairFor(nodes []membership.Member) (membership.Member, membership.Member) {
	if len(nodes) == 0 {
		return membership.Member{}, membership.Member{}
	}
	a := nodes[0]
	for _, n := range nodes[1:] {
		if n.Cluster != a.Cluster {
			return a, n
		}
	}
	if len(nodes) > 1 {
		return a, nodes[1]
	}
	return a, a
}

// submit replays the workload: at each job's submission time the job's
// runner site spawns its runner.
func (l *launcher) submit(ctx context.Context, plan *scenarios.Plan, clk *clock.Scaled) {
	sites := map[string]membership.Member{}
	for _, m := range l.hostsByRole(membership.RoleRunner) {
		sites[m.Cluster] = m
	}
	env := actors.Env{System: l.system, Clock: clk, Recorder: l.system.NewLocalPID(wiring.ActorRecorder)}
	for i, j := range plan.Jobs {
		if err := clk.Sleep(ctx, j.Submit-clk.Now()); err != nil {
			return
		}
		site := SiteOf(j, i, l.grid.Sites)
		m, ok := sites[site]
		if !ok {
			wiring.FailJob(env, j.ID, "runner site "+site+" is not up")
			continue
		}
		// Sent as the launcher, so that the site's host can tell it from an
		// earlier run's (fromLauncher).
		l.system.Root.RequestWithCustomSender(pidOf(m, actorCtl), &msg.SpawnRunner{Job: wiring.JobSpec(j, site)},
			l.system.NewLocalPID(actorLauncher))
	}
}

// hostUnit names what a host is on a backend, for progress lines.
func hostUnit(backend string) string {
	if backend == "netns" {
		return "host processes"
	}
	return "containers"
}
