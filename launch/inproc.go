package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/kis"
	"github.com/koala-emu/koala-emu/actors/malleable"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
	"github.com/koala-emu/koala-emu/actors/runner"
	"github.com/koala-emu/koala-emu/actors/scheduler"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Options control a run.
type Options struct {
	// Out is the results directory; empty writes nothing.
	Out string
	// Shaper is auto or userspace on the inproc backend.
	Shaper string
	// Progress receives progress lines and the manifest; nil is silent.
	Progress io.Writer
	// ProgressEvery is the wall time between progress lines (default 10 s).
	ProgressEvery time.Duration
	// Drain bounds, in scenario time after the workload ends, how long the
	// run waits for jobs still queued or running; they then end failed with
	// ReasonDeadline. Default 4 h.
	Drain time.Duration
	// ProbeBytes is the message size of bandwidth probes (default 256 KiB).
	ProbeBytes int
}

// ReasonDeadline is the failure reason of jobs still unfinished when the
// run's drain time ran out.
const ReasonDeadline = "run ended before the job finished"

// Result is what a run produced.
type Result struct {
	Summary  results.Summary
	Jobs     []results.Job
	Manifest netem.Manifest
}

// Nominal is a job's single-cluster execution time in scenario seconds.
func Nominal(app string, size int) float64 {
	a, err := apps.Lookup(app)
	if err != nil {
		return 0
	}
	return a.Nominal(size).Seconds()
}

// RunInproc runs a plan with every actor in this process.
func RunInproc(ctx context.Context, plan *scenarios.Plan, opts Options) (res *Result, err error) {
	if opts.Shaper != "" && opts.Shaper != "auto" && opts.Shaper != "userspace" {
		return nil, fmt.Errorf("shaper %q is not available on the inproc backend: only userspace applies in one process (use --backend netns or docker for kernel shaping)", opts.Shaper)
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
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	policy, err := placement.New(plan.Policy.Placement)
	if err != nil {
		return nil, fmt.Errorf("policy.placement: %w", err)
	}

	var cleanup []func() error
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			if cerr := cleanup[i](); cerr != nil && err == nil {
				err = cerr
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

	factor := plan.TimeScale / plan.Dilation
	clk := clock.NewScaled(factor)
	system := actor.NewActorSystem(actors.QuietLogging())
	cleanup = append(cleanup, func() error { system.Shutdown(); return nil })
	line := ptimer.New()
	cleanup = append(cleanup, func() error { line.Close(); return nil })

	rec := results.NewRecorder(events, len(plan.Jobs), Nominal)
	recPID, err := system.Root.SpawnNamed(rec.Props(), "recorder")
	if err != nil {
		return nil, fmt.Errorf("spawn recorder: %w", err)
	}
	env := actors.Env{System: system, Clock: clk, Recorder: recPID}

	// Manifest: every link, what was asked, what is in effect.
	manifest := netem.BuildManifest(plan.Links, "userspace",
		"inproc backend: every actor shares this process, so links are shaped in userspace on every rank connection",
		func(src, dst string) netem.Link { l, _ := plan.Links.Link(src, dst); return l })
	manifest.Backend = "inproc"
	manifest.Print(progress)
	if opts.Out != "" {
		if err := manifest.WriteJSON(filepath.Join(opts.Out, "manifest.json")); err != nil {
			return nil, err
		}
	}

	// Actors are spawned under fixed names so they can know each other's
	// PIDs before they start.
	pid := func(name string) *actor.PID { return system.NewLocalPID(name) }
	schedPID, kisPID := pid("scheduler"), pid("kis")
	clusterPIDs := map[string]*actor.PID{}
	var order []string
	for _, c := range plan.Clusters {
		clusterPIDs[c.Name] = pid("cluster-" + c.Name)
		order = append(order, c.Name)
	}
	var stopPIDs []*actor.PID
	cleanup = append(cleanup, func() error {
		for i := len(stopPIDs) - 1; i >= 0; i-- {
			_ = system.Root.StopFuture(stopPIDs[i]).Wait() // waits for Stopping handlers to finish
		}
		return nil
	})
	spawn := func(props *actor.Props, name string) error {
		p, err := system.Root.SpawnNamed(props, name)
		if err != nil {
			return fmt.Errorf("spawn %s: %w", name, err)
		}
		stopPIDs = append(stopPIDs, p)
		return nil
	}

	var stats *malleable.Stats
	if m := plan.Policy.Malleability; m != nil {
		// The malleability manager takes the scheduler's place (and name),
		// so the information service and rigid runners reach it unchanged.
		stats = malleable.NewStats()
		props, err := malleable.ManagerProps(malleable.ManagerConfig{
			Approach: m.Approach, Policy: m.Policy, Threshold: m.Threshold, Thresholds: m.Thresholds,
			PollPeriod: m.PollPeriod, MaxTries: m.MaxTries, OpTimeout: m.OpTimeout,
			Clusters: clusterPIDs, Order: order, Stats: stats, Env: env,
		})
		if err != nil {
			return nil, fmt.Errorf("policy.malleability: %w", err)
		}
		if err := spawn(props, "scheduler"); err != nil {
			return nil, err
		}
	} else if err := spawn(scheduler.Props(scheduler.Config{
		Policy: policy, Options: placement.Options{MaxClusters: plan.Policy.MaxClusters, CAMetric: plan.Policy.CAMetric},
		ScanPeriod: plan.Policy.ScanPeriod, MaxTries: plan.Policy.PlacementTries, Clusters: clusterPIDs, Order: order, Env: env,
	}), "scheduler"); err != nil {
		return nil, err
	}
	unavailable := map[[2]string]bool{}
	for i, a := range plan.Links.Clusters {
		for j, b := range plan.Links.Clusters {
			if plan.Links.Links[i][j].Unavailable {
				unavailable[[2]string{a, b}] = true
			}
		}
	}
	ready := make(chan struct{})
	if err := spawn(kis.Props(kis.Config{Order: order, Clusters: clusterPIDs, Unavailable: unavailable,
		Scheduler: schedPID, ProbePeriod: plan.Policy.ProbePeriod, BandwidthBytes: opts.ProbeBytes, Ready: ready, Env: env}), "kis"); err != nil {
		return nil, err
	}
	nodeCount := 0
	for ci, c := range plan.Clusters {
		var infos []cluster.NodeInfo
		for i := 0; i < c.Nodes; i++ {
			name := fmt.Sprintf("%s-n%03d", c.Name, i+1)
			ep, err := plan.Links.PlanFor(name, c.Name)
			if err != nil {
				return nil, err
			}
			eg := netem.NewUserspace(ep, line, plan.Dilation)
			cleanup = append(cleanup, eg.Close)
			props := node.Props(node.Config{Name: name, Cluster: c.Name, Speed: c.Speed, Processors: c.Processors,
				Dilation: plan.Dilation, Egress: eg, Env: env})
			if err := spawn(props, "node-"+name); err != nil {
				return nil, err
			}
			infos = append(infos, cluster.NodeInfo{Name: name, PID: pid("node-" + name)})
			nodeCount++
		}
		pp, err := plan.Links.PlanFor(c.Name+"-probe", c.Name)
		if err != nil {
			return nil, err
		}
		peg := netem.NewUserspace(pp, line, plan.Dilation)
		cleanup = append(cleanup, peg.Close)
		pr, err := newProber(ctx, c.Name, peg, "127.0.0.1")
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, pr.Close)
		var bg *cluster.Background
		if b := plan.Background[ci]; b.Max > 0 {
			bg = cluster.NewBackground(b.Min, b.Max, b.MeanJob, b.MaxJobNodes, uint64(plan.Seed)+uint64(ci)+1)
		}
		if err := spawn(cluster.Props(cluster.Config{Name: c.Name, Nodes: infos, KIS: kisPID, Background: bg, Prober: pr, Env: env}),
			"cluster-"+c.Name); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "inproc: %d clusters, %d node actors, scheduler, information service; probing links...\n", len(plan.Clusters), nodeCount)
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("interrupted while probing links: %w", ctx.Err())
	case <-time.After(2 * time.Minute):
		return nil, errors.New("information service: first probe round did not complete within 2 minutes")
	}
	fmt.Fprintf(progress, "links probed; replaying %d jobs over %s of scenario time (time scale %g, dilation %g)\n",
		len(plan.Jobs), plan.Duration, plan.TimeScale, plan.Dilation)

	// The workload starts now: scenario time 0 is when the first job may arrive.
	clk.Restart()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go submit(runCtx, plan, env, schedPID, clusterPIDs, stats)

	jobs, wall, interrupted := AwaitJobs(ctx, rec, clk, plan, opts.Drain, opts.ProgressEvery, progress, stopRun)
	if err := rec.Flush(); err != nil {
		return nil, err
	}
	sum := results.Summarize(results.Meta{
		Scenario: plan.Name, Backend: "inproc", Policy: plan.Policy.Placement, Shaper: "userspace", Seed: plan.Seed,
		TimeScale: plan.TimeScale, Dilation: plan.Dilation, WallS: wall.Seconds(), TotalNodes: plan.TotalNodes(),
		DurationS: plan.Duration.Seconds(), TargetNetUtilizationPct: 100 * plan.NetUtilization,
	}, jobs)
	if interrupted != "" {
		sum.Extra = map[string]any{"interrupted": interrupted}
	}
	if stats != nil {
		inv := stats.Snapshot()
		sum.Malleability = results.SummarizeMalleability(jobs, rec.Utilization(), rec.Resizes(), inv.Checks, inv.Violations, inv.Details)
	}
	if opts.Out != "" {
		if err := sum.WriteJSON(opts.Out); err != nil {
			return nil, err
		}
		if err := results.WriteJobsCSV(opts.Out, jobs); err != nil {
			return nil, err
		}
		if stats != nil {
			if err := results.WriteSeries(opts.Out, rec.Utilization(), rec.Resizes()); err != nil {
				return nil, err
			}
		}
	}
	res = &Result{Summary: sum, Jobs: jobs, Manifest: manifest}
	if interrupted == "interrupted" {
		return res, fmt.Errorf("run interrupted: %w", ctx.Err())
	}
	if m := sum.Malleability; m != nil && !m.InvariantsHold {
		return res, fmt.Errorf("malleability invariants violated: %v %v", m.Violations, m.Details)
	}
	return res, nil
}

// AwaitJobs waits until every job of plan has ended, ctx ends, or scenario
// time passes the plan's duration plus drain, printing progress every
// period; it then calls stop (which ends the submissions) and returns the
// recorded jobs (unfinished ones failed with the reason, see
// FailUnfinished), the wall time of the run and the reason it was cut short
// ("" when every job ended).
func AwaitJobs(ctx context.Context, rec *results.Recorder, clk clock.Clock, plan *scenarios.Plan, drain, every time.Duration,
	progress io.Writer, stop func()) (jobs []results.Job, wall time.Duration, interrupted string) {
	deadline := plan.Duration + drain
	tick := time.NewTicker(every)
	defer tick.Stop()
wait:
	for {
		select {
		case <-rec.Done():
			break wait
		case <-ctx.Done():
			interrupted = "interrupted"
			break wait
		case <-tick.C:
			p := rec.Progress()
			fmt.Fprintf(progress, "scenario %s / %s (wall %s): %d/%d submitted, %d queued, %d running, %d completed, %d failed\n",
				fmtDur(clk.Now()), fmtDur(plan.Duration), clk.Wall().Round(time.Second), p.Submitted, len(plan.Jobs),
				p.Queued, p.Running, p.Completed, p.Failed)
			if clk.Now() > deadline {
				interrupted = ReasonDeadline
				break wait
			}
		}
	}
	stop()
	wall = clk.Wall()
	jobs = rec.Jobs()
	if interrupted != "" {
		jobs = FailUnfinished(jobs, plan, interrupted)
	}
	return jobs, wall, interrupted
}

// FailUnfinished reports every job of plan that did not end as failed with
// reason, those never submitted included, so that an interrupted run loses
// nothing.
func FailUnfinished(jobs []results.Job, plan *scenarios.Plan, reason string) []results.Job {
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		seen[jobs[i].ID] = true
		if jobs[i].Status != "completed" && jobs[i].Status != "failed" {
			jobs[i].Status, jobs[i].Reason = "failed", reason
		}
	}
	for _, j := range plan.Jobs {
		if !seen[j.ID] {
			jobs = append(jobs, results.Job{ID: j.ID, App: j.App, Size: j.Size, Request: j.Request, Submit: -1,
				Placement: -1, Start: -1, End: -1, Status: "failed", Reason: reason + " (never submitted)"})
		}
	}
	return jobs
}

// submit replays the workload: each job's runner actor starts at the job's
// submission time.
func submit(ctx context.Context, plan *scenarios.Plan, env actors.Env, sched *actor.PID, clusters map[string]*actor.PID, stats *malleable.Stats) {
	for _, j := range plan.Jobs {
		if err := env.Clock.Sleep(ctx, j.Submit-env.Clock.Now()); err != nil {
			return
		}
		spec := &msg.JobSpec{Id: j.ID, App: j.App, Args: j.Args, Size: int32(j.Size), Request: j.Request,
			SubmitS: j.Submit.Seconds()}
		for _, c := range j.Components {
			spec.Components = append(spec.Components, &msg.Component{Cluster: c.Cluster, Size: int32(c.Size)})
		}
		for _, f := range j.Files {
			spec.Files = append(spec.Files, &msg.File{Name: f.Name, Size: f.Size, Replicas: f.Replicas})
		}
		props := runner.Props(runner.Config{Job: spec, Scheduler: sched, Clusters: clusters, TimeScale: plan.TimeScale,
			StartupDelay: plan.Policy.StartupDelay, Env: env})
		if j.Malleable {
			props = malleable.RunnerProps(malleable.RunnerConfig{Job: spec, Min: j.Min, Max: j.Max, Profile: j.App,
				Manager: sched, Clusters: clusters, TimeScale: plan.TimeScale, StartupDelay: plan.Policy.StartupDelay,
				Stats: stats, Env: env})
		}
		if _, err := env.System.Root.SpawnNamed(props, "runner-"+j.ID); err != nil {
			ev := env.Event("end", "launcher", j.ID)
			ev.Fields = map[string]string{"status": "failed", "reason": "spawn runner: " + err.Error()}
			env.Emit(ev)
		}
	}
}

func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	h := d / time.Hour
	m := (d % time.Hour) / time.Minute
	s := (d % time.Minute) / time.Second
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// ScenarioEnv tells the scenarios package which applications and placement
// policies exist and how long an application takes on one cluster.
func ScenarioEnv() scenarios.Env {
	env := scenarios.Env{
		Apps:          apps.Names(),
		Policies:      placement.Names(),
		MalleableApps: apps.MalleableNames(),
		Nominal: func(app string, nodes int) (time.Duration, error) {
			a, err := apps.Lookup(app)
			if err != nil {
				return 0, err
			}
			return a.Nominal(nodes), nil
		},
		Profiles: map[string]scenarios.ProfileBounds{},
	}
	for _, n := range malleability.ProfileNames() {
		p, ok := malleability.LookupProfile(n)
		if !ok {
			continue
		}
		env.Profiles[n] = scenarios.ProfileBounds{Min: p.Min, Max: p.Max, PowerOfTwo: p.PowerOfTwo}
	}
	for n := range malleability.Approaches() {
		env.Approaches = append(env.Approaches, n)
	}
	for n := range malleability.Registry() {
		env.MalleabilityPolicies = append(env.MalleabilityPolicies, n)
	}
	sort.Strings(env.Approaches)
	sort.Strings(env.MalleabilityPolicies)
	return env
}
