package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/launch/sim"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// simBackend is the simulation backend: the same role actors on a virtual
// clock, jobs' executions predicted by a performance model (launch/sim).
type simBackend struct{}

func (simBackend) Name() string { return "sim" }

// Capabilities: nothing is shaped (the link matrix feeds the model) and
// malleable jobs are refused (their duration depends on their resizes).
func (simBackend) Capabilities() Capabilities {
	return Capabilities{Shapers: []string{"model"}, Simulated: true, BatchGrid: true}
}

func (simBackend) Run(ctx context.Context, plan *scenarios.Plan, opts Options) (*Result, error) {
	return RunSim(ctx, plan, opts)
}

// Calibrate refuses: the sim backend sends no bytes, so there is nothing to
// measure.
func (b simBackend) Calibrate(context.Context, CalibrateRequest) (*Calibration, error) {
	return nil, errors.New("the sim backend sends nothing over its links, so it has nothing to calibrate (use inproc, netns or docker)")
}

// Clean has nothing to remove: a simulation leaves nothing behind.
func (simBackend) Clean(context.Context, CleanOptions) (*CleanReport, error) {
	return &CleanReport{}, nil
}

// stuckAfter is how long a simulation may fire no event while something is
// active before it is ended as stuck (sim.Watch): a cascade takes
// milliseconds, so this is only reached by a handler that never returns.
const stuckAfter = time.Minute

// simGCPercent is the garbage collector's target a simulation runs under
// when GOGC is not set: a simulation allocates a message, an event and
// their maps at every step and keeps little of it, so at the default 100 %
// the collector takes a fifth of its CPU; at 400 % the heap peaks higher
// (tens of MiB for a 24 h cell) and the collector runs a quarter as often.
// It is set once for the process (simGC), and only by the sim backend.
const simGCPercent = 400

var simGC sync.Once

// simUnmeasured is the fidelity reason of every simulation.
const simUnmeasured = "sim backend: no real ranks ran and no bytes were sent; execution times are the performance model's predictions"

// RunSim runs a plan on the sim backend. The plan's time scale and dilation
// do not apply (nothing real runs: the clock jumps from event to event) and
// are reported as 1; the run is deterministic for a given plan.
func RunSim(ctx context.Context, plan *scenarios.Plan, opts Options) (res *Result, err error) {
	if err := Check(simBackend{}, plan, opts); err != nil {
		return nil, err
	}
	simGC.Do(func() {
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(simGCPercent)
		}
	})
	p := *plan
	p.Dilation, p.TimeScale, p.DilationAuto, p.WallBudget = 1, 1, false, 0
	plan = &p
	opts = opts.WithDefaults()
	opts.Drain = drainFor(plan, opts.Drain)
	opts.Dilation = &fidelity.Choice{Dilation: 1, Reason: "sim backend: nothing real runs, so nothing is dilated"}
	var undo wiring.Undo
	defer func() { err = errors.Join(err, undo.Run()) }()
	s, err := newSimRun(plan, opts, &undo)
	if err != nil {
		return nil, err
	}
	manifest := netem.BuildManifest(plan.Links, "model",
		"sim backend: links are not shaped; the performance model reads the link matrix (dilation 1)",
		func(src, dst string) netem.Link { l, _ := plan.Links.Link(src, dst); return l })
	manifest.Backend = "sim"
	if err := s.results.WriteManifest(manifest, opts.Progress); err != nil {
		return nil, err
	}
	out := s.run(ctx)
	out.Backend, out.Shaper, out.Manifest = "sim", "model", manifest
	return s.results.Finish(ctx, out)
}

// simRun is one simulation: every role actor in one actor system, each
// on the simulation's runtime (its messages counted on the virtual clock,
// all of them run on one goroutine).
type simRun struct {
	plan   *scenarios.Plan
	opts   Options
	spec   wiring.Spec
	clk    *clock.Virtual
	rt     *sim.Runtime
	system *actor.ActorSystem
	env    actors.Env
	model  *sim.Model
	// modelSrc names the model file (or "typed").
	modelSrc string
	results  *wiring.Results
}

func newSimRun(plan *scenarios.Plan, opts Options, undo *wiring.Undo) (*simRun, error) {
	rs, err := wiring.OpenResults(plan, opts.Out, undo)
	if err != nil {
		return nil, err
	}
	s := &simRun{plan: plan, opts: opts, spec: wiring.SpecFromPlan(plan, opts.ProbeBytes), results: rs, clk: clock.NewVirtual()}
	s.rt = sim.NewRuntime(s.clk)
	s.system = actor.NewActorSystem(actors.QuietLogging())
	undo.Push(func() error { s.system.Shutdown(); return nil })
	s.env = actors.Env{System: s.system, Clock: s.clk, Recorder: s.system.NewLocalPID(wiring.ActorRecorder)}
	speeds := map[string]float64{}
	for _, c := range s.spec.Clusters {
		speeds[c.Name] = c.Speed
	}
	s.model = sim.NewModel(speeds, plan.Links)
	f, src, err := simModelFile(opts.SimModel)
	if err != nil {
		return nil, err
	}
	s.model.WithFile(f)
	s.modelSrc = src
	return s, nil
}

// simModelFile loads the model file opts.SimModel names and says which it
// is: none ("" or "typed": the applications' typed Traffic), the shipped
// file ("shipped") or a path. The typed model is the default while the
// shipped file was learnt mostly from runs the fidelity monitor called
// degraded (its provenance counts them): a prediction the host, not the
// grid, set must not be the default.
func simModelFile(name string) (*sim.File, string, error) {
	switch name {
	case "", "typed":
		return nil, "typed", nil
	case "shipped":
		f, err := sim.Shipped()
		return f, "shipped launch/sim/models/inproc.json", err
	}
	f, err := sim.LoadFile(name)
	return f, name, err
}

func (s *simRun) spawn(props *actor.Props, name string) error {
	if _, err := s.system.Root.SpawnNamed(s.rt.Props(props), name); err != nil {
		return fmt.Errorf("spawn %s: %w", name, err)
	}
	return nil
}

// spawnRoles spawns the recorder, the scheduler, the information service
// and every cluster with its simulated nodes.
func (s *simRun) spawnRoles(ready chan struct{}) error {
	if err := s.spawn(s.results.Recorder().Props(), wiring.ActorRecorder); err != nil {
		return err
	}
	p := wiring.Peers{Scheduler: s.system.NewLocalPID(wiring.ActorScheduler), KIS: s.system.NewLocalPID(wiring.ActorKIS),
		Clusters: map[string]*actor.PID{}}
	for _, c := range s.plan.Clusters {
		p.Clusters[c.Name] = s.system.NewLocalPID(wiring.ClusterActor(c.Name))
	}
	if err := s.spec.SpawnCentral(s.env, p, nil, ready, s.spawn); err != nil {
		return err
	}
	for _, c := range s.spec.Clusters {
		var infos []cluster.NodeInfo
		for i := 0; i < c.Nodes; i++ {
			name := wiring.NodeName(c.Name, i)
			cfg, err := s.spec.NodeConfig(s.env, c.Name, name, nil, "")
			if err != nil {
				return err
			}
			if err := s.spawn(sim.NodeProps(cfg, s.model), wiring.NodeActor(name)); err != nil {
				return err
			}
			infos = append(infos, cluster.NodeInfo{Name: name, PID: s.system.NewLocalPID(wiring.NodeActor(name))})
		}
		props, err := s.spec.ClusterManager(s.env, c.Name, infos, p, sim.Prober{Cluster: c.Name, Model: s.model})
		if err != nil {
			return err
		}
		if err := s.spawn(props, wiring.ClusterActor(c.Name)); err != nil {
			return err
		}
	}
	return nil
}

// run starts the actors under a hold, schedules every job's submission as
// one clock event at its submission time (events at the same time fire in
// job order, each after the previous one's cascade has settled), and runs
// the clock until every job has ended, the drain time has passed, the
// simulation stalls or ctx ends.
func (s *simRun) run(ctx context.Context) wiring.Outcome {
	rec := s.results.Recorder()
	var mu sync.Mutex
	reason := ""
	stop := func(why string) {
		mu.Lock()
		if reason == "" {
			reason = why
		}
		mu.Unlock()
		s.clk.Stop()
	}
	// The recorder's handler sees the last job end; stopping the clock there,
	// before the handler returns, ends the run at that event every time.
	s.results.OnEvent(func(ev *msg.Event) {
		if ev.Kind != msg.EventEnd {
			return
		}
		select {
		case <-rec.Done():
			s.clk.Stop()
		default:
		}
	})
	start := s.clk.Hold()
	ready := make(chan struct{})
	if err := s.start(ready); err != nil {
		start()
		return s.outcome(err.Error())
	}
	s.clk.AfterFunc(s.plan.Duration+s.opts.Drain, func() { stop(wiring.ReasonDeadline) })
	if b := s.plan.Batch; b != nil {
		fmt.Fprintf(s.opts.Progress, "sim: batch grid of %d clusters; replaying %d trace jobs (deadline %s of scenario time)\n",
			len(b.Clusters), len(s.plan.Jobs), s.plan.Duration)
	} else {
		fmt.Fprintf(s.opts.Progress, "sim: %d clusters, %d node actors; simulating %d jobs over %s of scenario time\n",
			len(s.spec.Clusters), s.plan.TotalNodes(), len(s.plan.Jobs), s.plan.Duration)
	}
	progressDone := make(chan struct{})
	defer close(progressDone)
	go s.progress(progressDone)
	stopWatch := sim.Watch(s.clk, stuckAfter, stop)
	defer stopWatch()
	start()
	err := s.clk.Run(ctx)
	s.logSources()
	mu.Lock()
	why := reason
	mu.Unlock()
	select {
	case <-rec.Done():
		why = ""
	default:
		switch {
		case ctx.Err() != nil:
			why = "interrupted"
		case err == nil:
			why = "simulation stalled: no event pending and nothing in flight while jobs were unfinished"
		case why == "":
			why = err.Error()
		}
	}
	select {
	case <-ready:
	default:
		if why == "" {
			fmt.Fprintln(s.opts.Progress, "sim: warning: the information service never completed a probe round")
		}
	}
	return s.outcome(why)
}

// start spawns the roles and schedules every job's submission as one
// clock event at its submission time: a runner per job, or, for a batch
// grid, the roles and submissions of wiring.StartBatch (ready is closed
// then: a batch grid probes no link).
func (s *simRun) start(ready chan struct{}) error {
	if s.plan.Batch != nil {
		if err := s.spawn(s.results.Recorder().Props(), wiring.ActorRecorder); err != nil {
			return err
		}
		close(ready)
		return wiring.StartBatch(s.env, s.plan, wiring.BatchHost{Spawn: func(p *actor.Props, name string) (*actor.PID, error) {
			return s.system.Root.SpawnNamed(s.rt.Props(p), name)
		}, At: func(at time.Duration, f func()) { s.clk.AfterFunc(at, f) }, Virtual: true})
	}
	if err := s.spawnRoles(ready); err != nil {
		return err
	}
	p := wiring.Peers{Scheduler: s.system.NewLocalPID(wiring.ActorScheduler), KIS: s.system.NewLocalPID(wiring.ActorKIS),
		Clusters: map[string]*actor.PID{}}
	for _, c := range s.plan.Clusters {
		p.Clusters[c.Name] = s.system.NewLocalPID(wiring.ClusterActor(c.Name))
	}
	for _, j := range s.plan.Jobs {
		s.clk.AfterFunc(j.Submit, func() {
			props := s.rt.Props(s.spec.Runner(s.env, wiring.JobSpec(j, ""), p, nil))
			if _, err := s.system.Root.SpawnNamed(props, wiring.RunnerActor(j.ID)); err != nil {
				wiring.FailJob(s.env, j.ID, "spawn runner: "+err.Error())
			}
		})
	}
	return nil
}

func (s *simRun) outcome(interrupted string) wiring.Outcome {
	o := wiring.Outcome{Jobs: s.results.Recorder().Jobs(), Wall: s.clk.Wall(), Interrupted: interrupted,
		Dilation: s.opts.Dilation, RequireFaithful: s.opts.RequireFaithful, Unmeasured: simUnmeasured,
		Extra: map[string]any{"virtual_events": s.clk.Fired(), "simulated_s": s.clk.Now().Seconds(),
			"model": map[string]any{"file": s.modelSrc, "sources": s.model.Sources()}}}
	if interrupted != "" {
		o.Jobs = wiring.FailUnfinished(o.Jobs, s.plan, interrupted)
	}
	return o
}

// logSources says on the progress writer which applications and sizes the
// model file predicted and which fell back to the typed Traffic.
func (s *simRun) logSources() {
	var file, typed []string
	for k, v := range s.model.Sources() {
		switch v {
		case "file":
			file = append(file, k)
		case "typed":
			typed = append(typed, k)
		default:
			file, typed = append(file, k), append(typed, k)
		}
	}
	sort.Strings(file)
	sort.Strings(typed)
	fmt.Fprintf(s.opts.Progress, "sim: model %s: learnt for %s; typed Traffic for %s\n", s.modelSrc, orNone(file), orNone(typed))
}

// progress prints a progress line every opts.ProgressEvery of wall time.
func (s *simRun) progress(done <-chan struct{}) {
	t := time.NewTicker(s.opts.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			pr := s.results.Recorder().Progress()
			fmt.Fprintf(s.opts.Progress, "sim: scenario %s / %s (wall %s): %d/%d submitted, %d queued, %d running, %d completed, %d failed\n",
				s.clk.Now().Round(time.Second), s.plan.Duration, s.clk.Wall().Round(time.Second), pr.Submitted, len(s.plan.Jobs),
				pr.Queued, pr.Running, pr.Completed, pr.Failed)
		}
	}
}
