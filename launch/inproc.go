package launch

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/scenarios"
)

// RunInproc runs a plan with every actor in this process (the inproc
// backend).
func RunInproc(ctx context.Context, plan *scenarios.Plan, opts Options) (res *Result, err error) {
	if err := checkPlan(inproc{}, plan, opts); err != nil {
		return nil, err
	}
	opts, err = Prepare(ctx, inproc{}.Name(), plan, opts)
	if err != nil {
		return nil, err
	}
	defer inprocGC()()
	var undo wiring.Undo
	defer func() { err = errors.Join(err, undo.Run()) }()
	r, err := newInprocRun(plan, opts.WithDefaults(), &undo)
	if err != nil {
		return nil, err
	}
	opts, rs := r.opts, r.results
	manifest := netem.BuildManifest(plan.Links, "userspace",
		"inproc backend: every actor shares this process, so links are shaped in userspace on every rank connection",
		func(src, dst string) netem.Link { l, _ := plan.Links.Link(src, dst); return l })
	manifest.Backend = "inproc"
	if err := rs.WriteManifest(manifest, opts.Progress); err != nil {
		return nil, err
	}
	if plan.Batch != nil {
		out, err := r.runBatch(ctx)
		if err != nil {
			return nil, err
		}
		out.Backend, out.Shaper, out.Manifest = "inproc", "none", manifest
		if err := r.settle(); err != nil {
			return nil, err
		}
		return rs.Finish(ctx, out)
	}
	ready := make(chan struct{})
	if err := r.spawnRoles(ctx, ready); err != nil {
		return nil, err
	}
	_, wait := r.spec.ProbeTimeouts()
	if err := wiring.AwaitProbes(ctx, ready, wait); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "links probed; replaying %d jobs over %s of scenario time (time scale %g, dilation %g)\n",
		len(plan.Jobs), plan.Duration, plan.TimeScale, plan.Dilation)
	// The workload starts now: scenario time 0 is when the first job may arrive.
	r.clk.Restart()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go r.submit(runCtx)
	faultsDone := wiring.FaultRun{Plan: plan, Env: r.env, KIS: r.peers().KIS, Applier: r.faults}.Start(runCtx)
	out := rs.Await(ctx, r.clk, opts, stopRun)
	faultsDone()
	out.Backend, out.Shaper, out.Manifest = "inproc", "userspace", manifest
	if err := r.settle(); err != nil {
		return nil, err
	}
	return rs.Finish(ctx, out)
}

// settle returns once the recorder has recorded every event sent before:
// the run ended on the last job's end event, but other actors' events
// sent before it (and the faults timeline's record of its last fault,
// sent once the fault was applied) may still wait in the recorder's
// mailbox, and Finish reads the recorder.
func (r *inprocRun) settle() error {
	return r.results.Recorder().Sync(r.system.Root, r.env.Recorder, wiring.SettleTimeout)
}

// inprocRun is one run of the inproc backend: every role actor lives in
// one actor system, under its fixed name, so a PID is the local PID of the
// role's name (inprocRun.peers).
type inprocRun struct {
	plan    *scenarios.Plan
	opts    Options
	spec    wiring.Spec
	system  *actor.ActorSystem
	clk     *clock.Scaled
	env     actors.Env
	line    *ptimer.Line
	stats   *invariant.Stats
	results *wiring.Results
	undo    *wiring.Undo
	stops   []*actor.PID
	faults  *inprocFaults
}

// newInprocRun opens the results, starts the actor system with the
// recorder and the delay line; undo takes them down.
func newInprocRun(plan *scenarios.Plan, opts Options, undo *wiring.Undo) (*inprocRun, error) {
	rs, err := wiring.OpenResults(plan, opts.Out, undo)
	if err != nil {
		return nil, err
	}
	r := &inprocRun{plan: plan, opts: opts, spec: wiring.SpecFromPlan(plan, opts.ProbeBytes), undo: undo,
		stats: rs.SharedStats(), results: rs}
	r.clk = clock.NewScaled(r.spec.Factor())
	r.faults = newInprocFaults(r)
	r.system = actor.NewActorSystem(actors.QuietLogging())
	undo.Push(func() error { r.system.Shutdown(); return nil })
	// SCHED_FIFO where allowed (root), as the process-wide line: a release
	// thread that Go's worker threads can preempt releases bursts of frames
	// milliseconds late (measured: p99 3-26 ms against 0.6 ms).
	r.line = ptimer.NewWithOptions(ptimer.Options{Realtime: true})
	undo.Push(func() error { r.line.Close(); return nil })
	r.env = actors.Env{System: r.system, Clock: r.clk, Recorder: r.system.NewLocalPID(wiring.ActorRecorder)}
	// Role actors stop before the system shuts down, last spawned first;
	// each stop waits for its Stopping handler.
	undo.Push(func() error {
		for i := len(r.stops) - 1; i >= 0; i-- {
			if !r.faults.isKilled(r.stops[i].Id) {
				_ = r.system.Root.StopFuture(r.stops[i]).Wait()
			}
		}
		return nil
	})
	if _, err := r.system.Root.SpawnNamed(rs.Recorder().Props(), wiring.ActorRecorder); err != nil {
		return nil, fmt.Errorf("spawn recorder: %w", err)
	}
	return r, nil
}

// peers are the role actors' PIDs: local PIDs of their fixed names, known
// before the actors start.
func (r *inprocRun) peers() wiring.Peers {
	p := wiring.Peers{Scheduler: r.system.NewLocalPID(wiring.ActorScheduler), KIS: r.system.NewLocalPID(wiring.ActorKIS),
		Clusters: map[string]*actor.PID{}}
	for _, c := range r.plan.Clusters {
		p.Clusters[c.Name] = r.system.NewLocalPID(wiring.ClusterActor(c.Name))
	}
	if r.plan.Policy.Migration != nil {
		p.Rescheduler = r.system.NewLocalPID(wiring.ActorRescheduler)
	}
	return p
}

func (r *inprocRun) spawn(props *actor.Props, name string) error {
	p, err := r.system.Root.SpawnNamed(props, name)
	if err != nil {
		return fmt.Errorf("spawn %s: %w", name, err)
	}
	r.stops = append(r.stops, p)
	return nil
}

// spawnRoles spawns the scheduler (or malleability manager), the
// information service and every cluster with its nodes.
func (r *inprocRun) spawnRoles(ctx context.Context, ready chan struct{}) error {
	p := r.peers()
	if err := r.spec.SpawnCentral(r.env, p, r.stats, ready, r.spawn); err != nil {
		return err
	}
	if err := r.spawnRescheduler(); err != nil {
		return err
	}
	// The membership closes before the role actors stop (undo runs last
	// pushed first).
	r.undo.Push(r.faults.closeMembership)
	nodes := 0
	for _, c := range r.spec.Clusters {
		if err := r.spawnCluster(ctx, c, p); err != nil {
			return err
		}
		nodes += c.Nodes
	}
	fmt.Fprintf(r.opts.Progress, "inproc: %d clusters, %d node actors, scheduler, information service; probing links...\n",
		len(r.spec.Clusters), nodes)
	return nil
}

// spawnCluster spawns a cluster's node actors, each with its own userspace
// egress, its probe endpoint and its manager.
func (r *inprocRun) spawnCluster(ctx context.Context, c wiring.Cluster, p wiring.Peers) error {
	var infos []cluster.NodeInfo
	for i := 0; i < c.Nodes; i++ {
		name := wiring.NodeName(c.Name, i)
		eg, err := r.egress(name, c.Name)
		if err != nil {
			return err
		}
		cfg, err := r.spec.NodeConfig(r.env, c.Name, name, eg, "")
		if err != nil {
			return err
		}
		if err := r.spawn(node.Props(cfg), wiring.NodeActor(name)); err != nil {
			return err
		}
		if err := r.faults.join(name, c.Name); err != nil {
			return err
		}
		infos = append(infos, cluster.NodeInfo{Name: name, PID: r.system.NewLocalPID(wiring.NodeActor(name))})
	}
	eg, err := r.egress(c.Name+"-probe", c.Name)
	if err != nil {
		return err
	}
	pr, err := wiring.NewProber(ctx, c.Name, eg, "127.0.0.1")
	if err != nil {
		return err
	}
	r.undo.Push(pr.Close)
	props, err := r.spec.ClusterManager(r.env, c.Name, infos, p, pr)
	if err != nil {
		return err
	}
	if err := r.spawn(props, wiring.ClusterActor(c.Name)); err != nil {
		return err
	}
	return r.faults.watch(c.Name)
}

// egress is the userspace shaper of a host of cluster c.
func (r *inprocRun) egress(host, c string) (netem.Egress, error) {
	ep, err := r.plan.Links.PlanFor(host, c)
	if err != nil {
		return nil, err
	}
	eg := netem.NewUserspace(ep, r.line, r.plan.Dilation)
	r.undo.Push(eg.Close)
	r.faults.addHost(c, eg)
	return eg, nil
}

// submit replays the workload: each job's runner actor starts at the job's
// submission time.
func (r *inprocRun) submit(ctx context.Context) {
	p := r.peers()
	for _, j := range r.plan.Jobs {
		if err := r.clk.Sleep(ctx, j.Submit-r.clk.Now()); err != nil {
			return
		}
		props := r.spec.Runner(r.env, wiring.JobSpec(j, ""), p, r.stats)
		pid, err := r.system.Root.SpawnNamed(props, wiring.RunnerActor(j.ID))
		if err != nil {
			wiring.FailJob(r.env, j.ID, "spawn runner: "+err.Error())
			continue
		}
		r.faults.addRunner(pid)
	}
}
