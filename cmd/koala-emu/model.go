package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/sim"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

// learnFlags are the flags of model learn.
type learnFlags struct {
	backend     string
	apps        []string
	sizes       []int
	out         string
	keep        string
	minIters    float64
	maxDilation float64
	wallPerRun  time.Duration
	latencyMS   float64
	bandwidth   float64
	commit      string
}

func newModelCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "learn the sim backend's performance model from emulated runs",
		Long: `Commands of the sim backend's performance model (docs/simulation.md): learn
measures it on an emulated backend and writes a model file that
run --backend sim --model FILE reads.`,
		Args: exactArgs(0),
	}
	cmd.AddCommand(newModelLearnCmd(a))
	return cmd
}

func newModelLearnCmd(a *app) *cobra.Command {
	f := &learnFlags{}
	cmd := &cobra.Command{
		Use:   "learn",
		Short: "run every application on every size over three links and fit the sim model",
		Long: `Run each application as one job on one cluster of each size, over three
intra-cluster links (the reference Myri-10G link, an added latency, a reduced
bandwidth), through the same launch path as run, and fit per size the
iteration time at the reference link, the latency rounds and the critical
bytes per iteration (docs/simulation.md). Each run's fidelity verdict goes
into the file; a degraded run is named on stderr.` + a.backendsSection(),
		Example: `  koala-emu model learn --out launch/sim/models/inproc.json
  koala-emu model learn --apps wave,poisson --sizes 8,16 --out /tmp/model.json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return learnModel(cmd.Context(), a, f, os.Args) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.backend, "backend", defaultBackend, "where the runs go: "+a.backendHelp())
	fs.StringSliceVar(&f.apps, "apps", []string{"allgather", "ccr", "poisson", "prime", "wave"}, "applications to measure (rigid ones: the sim backend refuses malleable applications)")
	fs.IntSliceVar(&f.sizes, "sizes", []int{8, 16, 32, 64}, "job sizes (ranks) to measure; sim interpolates between them")
	fs.StringVar(&f.out, "out", "", "model file to write (required)")
	fs.StringVar(&f.keep, "runs", "", "keep every run's results under this directory (default: a temporary directory, removed)")
	fs.Float64Var(&f.minIters, "min-iterations", 50, "fewest iterations a run may be cut to by its time scale")
	fs.Float64Var(&f.maxDilation, "max-dilation", 100, "highest dilation of a run (the dilation is the highest that fits --wall-per-run with --min-iterations)")
	fs.DurationVar(&f.wallPerRun, "wall-per-run", 3*time.Second, "wall time a run aims at")
	fs.Float64Var(&f.latencyMS, "latency-ms", 1, "one-way latency of the added-latency link")
	fs.Float64Var(&f.bandwidth, "bandwidth-mbps", 50, "bandwidth of the reduced-bandwidth link")
	fs.StringVar(&f.commit, "commit", "", "the koala-emu commit for the file's provenance (default: the one the binary records, if any; make model passes git's)")
	return cmd
}

// learnScenario is the scenario of one measurement: one cluster of the
// job's size and one job of the application on all of it.
const learnScenario = `name: model-learn-%[1]s-%[2]d
seed: 1
time_scale: 1
topology:
  clusters:
    - {name: leiden, nodes: %[2]d, processors: 2, speed: 1.0, interconnect: myri10g}
  links:
    preset: myri10g
workload:
  jobs:
    - {at_s: 0, application: %[1]s, size: %[2]d, request: fixed, components: [{cluster: leiden, size: %[2]d}]}
policy:
  placement: wf
  startup_delay_s: 0
`

func learnModel(ctx context.Context, a *app, f *learnFlags, argv []string) error {
	if f.out == "" {
		return usagef("model learn: --out is required")
	}
	if f.minIters < 1 || f.maxDilation < 1 || f.wallPerRun <= 0 || f.latencyMS <= 0 || f.bandwidth <= 0 {
		return usagef("model learn: --min-iterations and --max-dilation must be >= 1, --wall-per-run, --latency-ms and --bandwidth-mbps > 0")
	}
	b, err := a.lookupBackend(f.backend)
	if err != nil {
		return err
	}
	if b.Capabilities().Simulated {
		return usagef("model learn: the %s backend predicts from the model; learn on an emulated backend", b.Name())
	}
	dir := f.keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "koala-emu-model-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	ref := sim.LinkFigures{LatencyMS: float64(apps.RefLatency.Microseconds()) / 1e3, BandwidthMBps: apps.RefBandwidth / 1e6}
	links := []sim.LinkFigures{ref, {LatencyMS: f.latencyMS, BandwidthMBps: ref.BandwidthMBps}, {LatencyMS: ref.LatencyMS, BandwidthMBps: f.bandwidth}}
	host, _ := os.Hostname()
	file := &sim.File{Version: sim.FileVersion, Reference: ref, Apps: map[string]*sim.AppModel{},
		Provenance: sim.Provenance{Backend: b.Name(), Host: host, Date: time.Now().UTC().Format(time.RFC3339),
			Commit: cmp.Or(f.commit, buildCommit()), Command: strings.Join(append([]string{"koala-emu"}, argv[1:]...), " "),
			MinIterations: f.minIters, MaxDilation: f.maxDilation, WallPerRunS: f.wallPerRun.Seconds()}}
	start := time.Now()
	total := len(f.apps) * len(f.sizes) * len(links)
	done := 0
	for _, name := range f.apps {
		app, err := apps.Lookup(name)
		if err != nil {
			return usagef("model learn: --apps: %v", err)
		}
		if _, ok := app.(apps.Malleable); ok {
			return usagef("model learn: --apps: %s is malleable; the sim backend does not model it", name)
		}
		am := &sim.AppModel{}
		for _, n := range f.sizes {
			sm, err := learnSize(ctx, a, b, f, file, learnPoint{name: name, app: app, n: n, links: links, dir: dir, total: total}, &done)
			if err != nil {
				return err
			}
			am.Sizes = append(am.Sizes, sm)
		}
		file.Apps[name] = am
	}
	file.Provenance.LearnWallS = math.Round(time.Since(start).Seconds()*10) / 10
	if err := file.Validate(); err != nil {
		return fmt.Errorf("model learn: the fitted model is not valid: %w", err)
	}
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "model learn: %d runs in %.0f s, %d degraded; wrote %s\n", total, file.Provenance.LearnWallS, file.Provenance.Degraded, f.out)
	return nil
}

// learnPoint is one application and size to learn, over links.
type learnPoint struct {
	name  string
	app   apps.App
	n     int
	links []sim.LinkFigures
	dir   string
	total int // runs of the whole learn, for progress
}

// learnSize runs p's application on p.n ranks over every link, counting
// degraded runs in file's provenance and the runs done in *done, and fits
// the size's model.
func learnSize(ctx context.Context, a *app, b launch.Backend, f *learnFlags, file *sim.File, p learnPoint, done *int) (sim.SizeModel, error) {
	iters := iterationsOf(p.app, p.n)
	var runs []sim.Run
	for _, l := range p.links {
		*done++
		r, err := learnRun(ctx, b, f, p.app, p.n, iters, l, filepath.Join(p.dir, fmt.Sprintf("%s-%d-%g-%g", p.name, p.n, l.LatencyMS, l.BandwidthMBps)))
		if err != nil {
			return sim.SizeModel{}, fmt.Errorf("model learn: %s on %d ranks at %g ms, %g MB/s: %w", p.name, p.n, l.LatencyMS, l.BandwidthMBps, err)
		}
		flag := ""
		if r.Fidelity == fidelity.Degraded {
			file.Provenance.Degraded++
			flag = " DEGRADED: " + strings.Join(r.Reasons, "; ")
		}
		fmt.Fprintf(a.stderr, "model learn [%d/%d] %s %d ranks, link %.3g ms %g MB/s: exec %.3f s (time scale %.0f, dilation %.1f, wall %.1f s) %s%s\n",
			*done, p.total, p.name, p.n, l.LatencyMS, l.BandwidthMBps, r.ExecS, r.TimeScale, r.Dilation, r.WallS, r.Fidelity, flag)
		runs = append(runs, r)
	}
	s, err := sim.Fit(p.n, iters, runs)
	if err != nil {
		return sim.SizeModel{}, fmt.Errorf("model learn: %s: %w", p.name, err)
	}
	fmt.Fprintf(a.stderr, "model learn: %s %d ranks: iteration %.6g s, latency rounds %.3g, critical bytes %.4g (fit rms %.1f %%)\n",
		p.name, p.n, s.IterationS, s.LatencyRounds, s.CritBytes, 100*s.RMSRelative)
	return s, nil
}

// iterationsOf is app's iteration count on n ranks at time scale 1 with
// its default arguments: its Traffic's, else its "iters" argument (ccr),
// else 1 (prime: the whole run is one iteration).
func iterationsOf(app apps.App, n int) float64 {
	if t, err := apps.TrafficOf(app, n, nil); err == nil && t.Iterations > 0 && t.Iteration > 0 {
		return t.Iterations
	}
	if a, ok := app.(apps.ArgApp); ok && a.Args()["iters"] > 0 {
		return a.Args()["iters"]
	}
	return 1
}

// learnRun runs one job of app on n ranks over link l and returns its
// execution time and verdict. The time scale and dilation come from the
// typed model's prediction at that link: the highest dilation (up to
// --max-dilation) at which --min-iterations iterations take --wall-per-run,
// and the time scale that makes the whole job take about that wall time.
func learnRun(ctx context.Context, b launch.Backend, f *learnFlags, app apps.App, n int, iters float64, l sim.LinkFigures, out string) (sim.Run, error) {
	plan, err := learnPlan(app.Name(), n, l)
	if err != nil {
		return sim.Run{}, err
	}
	ranks := make([]string, n)
	for i := range ranks {
		ranks[i] = plan.Links.Clusters[0]
	}
	pred, err := sim.NewModel(nil, plan.Links).Predict(app.Name(), nil, ranks)
	if err != nil {
		return sim.Run{}, err
	}
	wall := f.wallPerRun.Seconds()
	d := f.maxDilation
	if iters > 1 {
		d = math.Min(d, math.Max(1, wall/(f.minIters*pred.Seconds()/iters)))
	}
	plan.Dilation, plan.DilationAuto, plan.WallBudget = d, false, 0
	plan.TimeScale = math.Max(1, math.Floor(pred.Seconds()*d/wall))
	t0 := time.Now()
	res, err := b.Run(ctx, plan, launch.Options{Out: out, Progress: io.Discard})
	if err != nil {
		return sim.Run{}, err
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Status != "completed" {
		return sim.Run{}, fmt.Errorf("the job did not complete (%+v)", res.Jobs)
	}
	j := res.Jobs[0]
	r := sim.Run{Link: l, ExecS: j.End - j.Start, TimeScale: plan.TimeScale, IterationsRun: max(1, math.Round(iters/plan.TimeScale)), Dilation: d,
		OneOffOnce: true, WallS: math.Round(time.Since(t0).Seconds()*100) / 100, Fidelity: fidelity.Unmeasured}
	if fr := res.Summary.Fidelity; fr != nil {
		r.Fidelity, r.Reasons = fr.Verdict, fr.Reasons
	}
	return r, nil
}

// learnPlan is the plan of one measurement, its cluster's own link set
// to l (a scenario's pair overrides link two clusters, so the link is set
// on the expanded plan).
func learnPlan(app string, n int, l sim.LinkFigures) (*scenarios.Plan, error) {
	s, err := scenarios.Parse([]byte(fmt.Sprintf(learnScenario, app, n)), "model learn")
	if err != nil {
		return nil, err
	}
	plan, err := s.Expand(launch.ScenarioEnv(), scenarios.Overrides{})
	if err != nil {
		return nil, err
	}
	plan.Links.Links[0][0] = netem.Link{Latency: time.Duration(l.LatencyMS * float64(time.Millisecond)), Bandwidth: l.BandwidthMBps * 1e6}
	return plan, nil
}

// buildCommit is the VCS revision the binary was built from ("" when the
// build did not stamp it), with "+dirty" for a modified tree.
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty, _ = strconv.ParseBool(s.Value)
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}
