package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// ReasonNodeDown starts the failure reason of a job that had a rank on a
// node that failed or left (the runner's reason continues "... went down").
const ReasonNodeDown = "node "

// DefaultStartStall is how long a start may go without progress before it
// fails (Config.StartStall).
const DefaultStartStall = 2 * time.Minute

// Config holds what the docker backend needs beyond launch.Options.
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

// RunDocker runs a plan with every actor host in its own Docker container;
// the results are those of launch.RunInproc with backend "docker".
func RunDocker(ctx context.Context, plan *scenarios.Plan, opts launch.Options) (*launch.Result, error) {
	return Run(ctx, plan, opts, Config{})
}

// Run runs a plan on a platform: the scheduler, the information service,
// every cluster manager, every compute node and every runner site are
// actor hosts started by the platform; this process hosts the recorder
// and the submitter.
func Run(ctx context.Context, plan *scenarios.Plan, opts launch.Options, cfg Config) (res *launch.Result, err error) {
	switch opts.Shaper {
	case "", netem.Auto, "netem", "htb", "userspace":
	default:
		return nil, fmt.Errorf("docker backend: unknown shaper %q (known: auto, netem, htb, userspace)", opts.Shaper)
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 10 * time.Second
	}
	if opts.Drain <= 0 {
		opts.Drain = 4 * time.Hour
	}
	if opts.ProbeBytes == 0 {
		opts.ProbeBytes = 256 << 10
	}
	if cfg.StartStall <= 0 {
		cfg.StartStall = DefaultStartStall
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	plat := cfg.Platform
	if plat == nil {
		d := cfg.Docker
		if d.Log == nil {
			d.Log = progress
		}
		plat = NewDockerPlatform(d)
	}
	began := time.Now()

	var cleanup []func() error
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			if cerr := cleanup[i](); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	var events io.Writer
	if opts.Out != "" {
		if err := os.MkdirAll(opts.Out, 0o755); err != nil {
			return nil, fmt.Errorf("results directory: %w", err)
		}
		f, err := os.Create(filepath.Join(opts.Out, "events.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("events.jsonl: %w", err)
		}
		cleanup = append(cleanup, f.Close)
		events = f
	}

	g := GridFromPlan(plan, opts.ProbeBytes)
	hosts := hostsOf(g)
	if hp, ok := plat.(hostPlanner); ok {
		hp.planHosts(hosts)
	}
	backend := backendOf(plat)
	unit := hostUnit(backend)
	fmt.Fprintf(progress, backend+": %d clusters, %d nodes, %d cluster managers, scheduler, information service, %d runner sites: %d %s\n",
		len(g.Clusters), plan.TotalNodes(), len(g.Clusters), len(g.Sites), len(hosts), unit)
	l, err := newLauncher(ctx, plat, g, progress)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() error {
		fmt.Fprintf(progress, backend+": removing %d %s and the network\n", len(hosts), unit)
		return l.Close()
	})

	clk := clock.NewScaled(g.Factor())
	rec := results.NewRecorder(events, len(plan.Jobs), launch.Nominal)
	if cfg.OnEvent != nil {
		rec.OnEvent(cfg.OnEvent)
	}
	recPID, err := l.system.Root.SpawnNamed(rec.Props(), actorRecorder)
	if err != nil {
		return nil, fmt.Errorf("spawn recorder: %w", err)
	}
	_ = recPID

	times, err := l.startHosts(ctx, hosts, cfg.StartStall)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, backend+": all %d %s up and in the membership after %.1f s\n", len(hosts), unit, times.Joined.Seconds())

	// Shaping: select in one node container, measure the floor (and the
	// delay line's overhead) between two of them, install everywhere.
	nodes := l.hostsByRole(membership.RoleNode)
	a, b := pairFor(nodes)
	// Delay lines never spin in a run: hundreds of them share the machine's
	// cores with the applications, and spinning ones starve the rest.
	info, err := l.model(ctx, opts.Shaper, -1, a, b, netem.PingPongOptions{}, plan.Links.MaxLatency(plan.Dilation))
	if err != nil {
		return nil, err
	}
	if err := l.shapeAll(ctx, &info, l.hostsByRole(membership.RoleNode, membership.RoleCluster)); err != nil {
		return nil, err
	}
	shaped := time.Since(began)
	fmt.Fprintf(progress, backend+": shaping in effect after %.1f s: %s\n", shaped.Seconds(), info.describe())
	manifest := info.Manifest(backend, plan.Links, plan.Dilation, nodes)
	manifest.Backend = backend
	manifest.Print(progress)
	if opts.Out != "" {
		if err := manifest.WriteJSON(filepath.Join(opts.Out, "manifest.json")); err != nil {
			return nil, err
		}
	}

	// Node failures from now on are reported.
	l.mu.Lock()
	l.onFail = func(ev membership.Event) {
		if ev.Member.Role == membership.RoleNode {
			fmt.Fprintf(progress, backend+": node %s of %s %s (membership)\n", ev.Member.Name, ev.Member.Cluster, ev.Kind)
			if cfg.OnNodeDown != nil {
				cfg.OnNodeDown(ev.Member.Name)
			}
		} else {
			fmt.Fprintf(progress, backend+": host %s (%s) %s (membership)\n", ev.Member.Name, ev.Member.Role, ev.Kind)
		}
	}
	l.mu.Unlock()

	// The role actors, in dependency order: cluster managers publish to the
	// information service at once, which starts probing when all have.
	if err := l.activate(ctx, membership.RoleScheduler, membership.RoleKIS, membership.RoleRunner, membership.RoleCluster); err != nil {
		return nil, err
	}
	fmt.Fprint(progress, backend+": scheduler, information service, runner sites and cluster managers active; probing links...\n")
	select {
	case <-l.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("interrupted while probing links: %w", ctx.Err())
	case <-time.After(2 * time.Minute):
		return nil, errors.New("information service: first probe round did not complete within 2 minutes")
	}
	ready := time.Since(began)
	fmt.Fprintf(progress, backend+": grid ready after %.1f s; replaying %d jobs over %s of scenario time (time scale %g, dilation %g)\n",
		ready.Seconds(), len(plan.Jobs), plan.Duration, plan.TimeScale, plan.Dilation)

	// Scenario time 0 for every host at once.
	epoch := time.Now().Add(200 * time.Millisecond)
	if err := l.setEpoch(ctx, epoch); err != nil {
		return nil, err
	}
	clk.RestartAt(epoch)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go l.submit(runCtx, plan, clk)

	jobs, wall, interrupted := launch.AwaitJobs(ctx, rec, clk, plan, opts.Drain, opts.ProgressEvery, progress, stopRun)
	if err := rec.Flush(); err != nil {
		return nil, err
	}
	sum := results.Summarize(results.Meta{
		Scenario: plan.Name, Backend: backend, Policy: plan.Policy.Placement, Shaper: info.Mechanism, Seed: plan.Seed,
		TimeScale: plan.TimeScale, Dilation: plan.Dilation, WallS: wall.Seconds(), TotalNodes: plan.TotalNodes(),
		DurationS: plan.Duration.Seconds(), TargetNetUtilizationPct: 100 * plan.NetUtilization,
	}, jobs)
	extra := map[string]any{}
	if interrupted != "" {
		extra["interrupted"] = interrupted
	}
	var down []string
	for _, m := range l.Failed() {
		if m.Role == membership.RoleNode {
			down = append(down, m.Name)
		}
	}
	sort.Strings(down)
	byNode := 0
	for _, j := range jobs {
		if j.Status == "failed" && failedByNode(j.Reason, down) {
			byNode++
		}
	}
	extra["node_failures"] = len(down)
	if len(down) > 0 {
		extra["nodes_down"] = down
	}
	extra["jobs_failed_by_node_failure"] = byNode
	extra["containers"] = len(hosts)
	extra["startup_s"] = map[string]float64{
		"containers_started": round1(times.Started), "all_joined": round1(times.Joined),
		"shaped": round1(shaped), "ready": round1(ready),
	}
	if ms, ok := plat.(interface {
		NodeMemory(ctx context.Context) (map[string]float64, error)
	}); ok && os.Getenv("TMP_NO_MEM") == "" {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if mem, err := ms.NodeMemory(mctx); err == nil {
			extra["node_memory_mib"] = mem
			fmt.Fprintf(progress, backend+": node container memory (MiB): %v\n", mem)
		} else {
			fmt.Fprintf(progress, backend+": node container memory not sampled: %v\n", err)
		}
		cancel()
	}
	sum.Extra = extra
	if opts.Out != "" {
		if err := sum.WriteJSON(opts.Out); err != nil {
			return nil, err
		}
		if err := results.WriteJobsCSV(opts.Out, jobs); err != nil {
			return nil, err
		}
	}
	res = &launch.Result{Summary: sum, Jobs: jobs, Manifest: manifest}
	if interrupted == "interrupted" {
		return res, fmt.Errorf("run interrupted: %w", ctx.Err())
	}
	return res, nil
}

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

// failedByNode reports whether a failure reason is a node failure: the
// runner's NodeDown reason, or a rank failure on a node that went down.
func failedByNode(reason string, down []string) bool {
	if strings.HasPrefix(reason, ReasonNodeDown) && strings.Contains(reason, "went down") {
		return true
	}
	for _, n := range down {
		if strings.Contains(reason, " on "+n+":") {
			return true
		}
	}
	return false
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
	recorder := l.system.NewLocalPID(actorRecorder)
	for i, j := range plan.Jobs {
		if err := clk.Sleep(ctx, j.Submit-clk.Now()); err != nil {
			return
		}
		site := SiteOf(j, i, l.grid.Sites)
		spec := &msg.JobSpec{Id: j.ID, App: j.App, Args: j.Args, Size: int32(j.Size), Request: j.Request,
			SubmitS: j.Submit.Seconds(), Site: site}
		for _, c := range j.Components {
			spec.Components = append(spec.Components, &msg.Component{Cluster: c.Cluster, Size: int32(c.Size)})
		}
		for _, f := range j.Files {
			spec.Files = append(spec.Files, &msg.File{Name: f.Name, Size: f.Size, Replicas: f.Replicas})
		}
		m, ok := sites[site]
		if !ok {
			l.system.Root.Send(recorder, &msg.Event{TS: clk.Now().Seconds(), WallS: clk.Wall().Seconds(), Kind: "end",
				JobId: j.ID, Source: "launcher", Fields: map[string]string{"status": "failed", "reason": "runner site " + site + " is not up"}})
			continue
		}
		l.system.Root.Send(pidOf(m, actorCtl), &msg.SpawnRunner{Job: spec})
	}
}

// hostUnit names what a host is on a backend, for progress lines.
func hostUnit(backend string) string {
	if backend == "netns" {
		return "host processes"
	}
	return "containers"
}
