package launch

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

// MinIterations is the fewest iterations a wall budget may leave a job at
// time scale 1 / k, unless the job's iterations carry so many frames that
// fewer are enough (minIterationsOf). An iteration count is rounded to an
// integer, so TimeScaleFor snaps k to make the count of the plan's
// shortest-counted job exact (the others, with more iterations, round
// within 0.5 / 20 = 2.5 % at worst and within 0.5 % from 100 on). Twenty
// iterations of wave (62 frames a step on 32 nodes) or poisson are over a
// thousand frames per job, enough for the monitor's p99 (its judged
// quantile is the p99 from 1,050 values on, fidelity.JudgedQuantile), and
// the job's steady state, not its start-up (under a second of wall time,
// a fraction of a per cent of a job's scenario time at these time
// scales), sets its time.
const MinIterations = 20

// MinFrames, MinSteadyWall and MinSteadyIterations let a job keep fewer
// than MinIterations iterations when fewer already measure it: as many as
// carry MinFrames frames (its link figures then hold enough frames for the
// monitor's p99), or as many as last MinSteadyWall of wall time at the run's
// dilation (its time is then a steady state's: hundreds of times the
// host's stalls, and each iteration's computation and exchanges many times
// what a start or an end adds), and never fewer than MinSteadyIterations.
// An all-gather of 10 KB blocks on 32 nodes sends 992 frames a call: 5
// calls are 4,960 frames, where 20 took ten minutes of wall time over the
// dilated GbE wide area. A poisson iteration on 8 nodes is 11 ms of
// scenario time and 64 frames: at dilation 800, 8.8 s of wall time, so 5
// of them are 44 s, where 20 took the 4 hours of das3-coalloc past an
// hour of wall time. Measured (docs/fidelity.md, "Poisson on five
// iterations"): a 32-node poisson job over 1 to 4 Myri-10G clusters at
// dilation 800 runs within 0.8 % of the same job's time on 20 iterations
// with 5 (11.7 s of wall time of iterations).
const (
	MinFrames           = 2000
	MinSteadyWall       = 10 * time.Second
	MinSteadyIterations = 5
)

// minIterationsOf is the fewest iterations a wall budget may leave a job
// of traffic t at dilation d: MinIterations, or fewer when that many
// iterations already carry MinFrames frames or last MinSteadyWall of wall
// time, but at least MinSteadyIterations.
func minIterationsOf(t apps.Traffic, d float64) float64 {
	enough := math.Inf(1)
	if t.Msgs > 0 {
		enough = math.Ceil(MinFrames / t.Msgs)
	}
	if wall := t.Iteration.Seconds() * d; wall > 0 {
		enough = math.Min(enough, math.Ceil(MinSteadyWall.Seconds()/wall))
	}
	return math.Min(MinIterations, math.Max(MinSteadyIterations, enough))
}

// Prepare resolves what a plan leaves to the launcher, before the run: the
// dilation when the scenario says `dilation: auto` (from the host's
// capacity for the backend, measured once and kept, and the plan's demand;
// fidelity.Choose) and the time scale when it gives a wall budget. It
// prints the choice, its reason and the estimated wall time, and returns
// opts with the choice recorded for results.json. An explicit dilation is
// kept as it is and reported as given.
//
// A run prepared once (opts.Dilation set) is not prepared again.
func Prepare(ctx context.Context, backend string, plan *scenarios.Plan, opts Options) (Options, error) {
	opts = opts.WithDefaults()
	opts.Drain = drainFor(plan, opts.Drain)
	if opts.Dilation != nil && !plan.DilationAuto {
		return opts, nil
	}
	demand := DemandOf(plan)
	choice := &fidelity.Choice{Dilation: plan.Dilation, Demand: demand, Reason: "given by the scenario or the command line"}
	if plan.DilationAuto {
		if _, kept := hostprobe.Load(backend); !kept && opts.Host == nil {
			fmt.Fprintf(opts.Progress, "host: no figures kept for %s on this machine: measuring what its shaper carries (%s)\n",
				backend, probeTime(backend))
		}
		c, measured, err := hostFor(ctx, backend, opts.Host)
		if err != nil {
			return opts, fmt.Errorf("dilation auto: measuring the host: %w", err)
		}
		if measured {
			fmt.Fprintf(opts.Progress, "host: measured %s: %.0f messages/s, %.0f MB/s, lateness floor %s (%s)\n",
				backend, c.MsgsPerSec, c.BytesPerSec/1e6, c.Floor, keptNote(c))
		}
		*choice = fidelity.Choose(c.Shared(opts.HostShare), demand)
		if opts.HostShare > 1 {
			choice.Reason += fmt.Sprintf(" (the host shared by %d runs at once)", opts.HostShare)
		}
	}
	k := plan.TimeScale
	if plan.WallBudget > 0 {
		var note string
		k, note = TimeScaleFor(plan, choice.Dilation)
		if note != "" && plan.DilationAuto && !opts.KeepDilation {
			// The budget wins over the chosen dilation: the largest
			// dilation that fits the budget at the fewest iterations
			// allowed, and the run will say whether it kept up.
			if d := fitBudget(plan, k); d < choice.Dilation {
				note = fmt.Sprintf("dilation lowered from %g to %g to fit the budget with each job's minimum iterations; expect a degraded run",
					choice.Dilation, d)
				choice.Dilation = d
				choice.Reason += "; " + note
				k, _ = TimeScaleFor(plan, d)
			}
		}
		if note != "" {
			fmt.Fprintf(opts.Progress, "wall budget %s: %s\n", plan.WallBudget, note)
		}
	}
	choice.Coarse = coarseNote(plan, k, choice.Dilation)
	if err := plan.Resolve(choice.Dilation, k); err != nil {
		return opts, err
	}
	fmt.Fprintf(opts.Progress, "dilation %g (%s); time scale %g; estimated wall time %s\n",
		plan.Dilation, choice.Reason, plan.TimeScale, EstimatedWall(plan).Round(time.Second))
	if choice.Coarse != "" {
		fmt.Fprintf(opts.Progress, "note: %s\n", choice.Coarse)
	}
	opts.Dilation = choice
	return opts, nil
}

// coarseNote says which of plan's jobs time scale k leaves fewer
// iterations than a wall budget would allow them (minIterationsOf), per
// application, or "" when none. A time scale divides iteration counts, so
// such a job's time rests on a few iterations, and a malleable job, which
// grows or shrinks only at a safe point (apps.StepsPer of them an
// iteration), waits longer in scenario time for one than at time scale 1:
// its resizes come later, and the time scale changes what the scheduler's
// grows and shrinks achieve (docs/malleability.md, "Time scale and safe
// points").
func coarseNote(plan *scenarios.Plan, k, d float64) string {
	if k <= 1 {
		return ""
	}
	type few struct {
		jobs    int
		at1, at float64
	}
	per := map[string]*few{}
	var names []string
	total := 0
	for _, j := range plan.Jobs {
		app, err := apps.Lookup(j.App)
		if err != nil {
			continue
		}
		t, err := apps.TrafficOf(app, j.Size, j.Args)
		if err != nil || t.Iterations <= 0 {
			continue
		}
		at := float64(apps.IterationsAt(t.Iterations, k))
		if at >= minIterationsOf(t, d) {
			continue
		}
		f := per[j.App]
		if f == nil {
			f = &few{at: at}
			per[j.App] = f
			names = append(names, j.App)
		}
		f.jobs++
		f.at1 = math.Max(f.at1, t.Iterations)
		f.at = math.Min(f.at, at)
		total++
	}
	if total == 0 {
		return ""
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		f := per[n]
		parts[i] = fmt.Sprintf("%s: %d jobs, down to %.0f of %.0f iterations", n, f.jobs, f.at, f.at1)
	}
	return fmt.Sprintf("time scale %g leaves %d of %d jobs fewer iterations than a wall budget keeps (%s): their times rest on few iterations, "+
		"and a malleable job reaches a safe point to grow or shrink once to %d times per iteration (steps of at least %s of wall time), "+
		"up to %g times more rarely in scenario time than at time scale 1 "+
		"(what that lateness costs the job is credited to its computation, not to the processors it holds); "+
		"a wall budget (--wall-budget) chooses a time scale that keeps them",
		k, total, len(plan.Jobs), strings.Join(parts, "; "), apps.StepsPer(k), apps.MinStepWall, k)
}

// keptNote says whether measured figures were kept for later runs.
func keptNote(c fidelity.Capacity) string {
	if c.Busy() {
		return fmt.Sprintf("other processes used %.0f %% of the CPU meanwhile: not kept, the next run measures again", 100*c.OthersCPU)
	}
	return "kept for later runs; `koala-emu host` shows it"
}

// DemandOf is what plan asks of the host at dilation 1: the peak, over the
// run, of the message and byte rates of the jobs expected to run at once
// (each job from its submission for its single-cluster time; when more
// nodes would be busy than the platform has, the rates are scaled down to
// the platform), and the smallest one-way latency of its links.
func DemandOf(plan *scenarios.Plan) fidelity.Demand {
	type edge struct {
		at          time.Duration
		nodes       int
		msgs, bytes float64
	}
	var edges []edge
	var burst, once float64
	for _, j := range plan.Jobs {
		app, err := apps.Lookup(j.App)
		if err != nil {
			continue
		}
		t, err := apps.TrafficOf(app, j.Size, j.Args)
		if err != nil {
			continue
		}
		m, b := t.Rates()
		if t.Once {
			once = max(once, t.Burst)
		} else {
			burst = max(burst, t.Burst)
		}
		d, err := apps.NominalArgs(app, j.Size, j.Args)
		if err != nil || d <= 0 {
			continue
		}
		edges = append(edges, edge{j.Submit, j.Size, m, b}, edge{j.Submit + d, -j.Size, -m, -b})
	}
	sort.SliceStable(edges, func(i, k int) bool { return edges[i].at < edges[k].at })
	total := plan.TotalNodes()
	var d fidelity.Demand
	nodes, msgs, bytes := 0, 0.0, 0.0
	peakNodes := 0
	for _, e := range edges {
		nodes += e.nodes
		msgs += e.msgs
		bytes += e.bytes
		f := 1.0
		if nodes > total && nodes > 0 {
			f = float64(total) / float64(nodes)
		}
		if msgs*f > d.MsgsPerSec {
			d.MsgsPerSec = msgs * f
		}
		if bytes*f > d.BytesPerSec {
			d.BytesPerSec = bytes * f
		}
		peakNodes = max(peakNodes, min(nodes, total))
	}
	d.MinLatency = minLatency(plan)
	d.Burst, d.BurstOnce = burst, once
	d.Why = fmt.Sprintf("%d jobs, at most %d nodes busy at once", len(plan.Jobs), peakNodes)
	return d
}

// minLatency is the smallest one-way latency among the plan's available
// links.
func minLatency(plan *scenarios.Plan) time.Duration {
	var m time.Duration
	for i := range plan.Links.Links {
		for _, l := range plan.Links.Links[i] {
			if l.Unavailable || l.Latency <= 0 {
				continue
			}
			if m == 0 || l.Latency < m {
				m = l.Latency
			}
		}
	}
	return m
}

// span is the scenario time a run is expected to take: the workload's
// duration, or its last submission, plus the longest job.
func span(plan *scenarios.Plan) time.Duration {
	end := plan.Duration
	for _, j := range plan.Jobs {
		end = max(end, j.Submit)
	}
	return end + longestJob(plan)
}

// longestJob is the longest expected execution time of plan's jobs.
func longestJob(plan *scenarios.Plan) time.Duration {
	var longest time.Duration
	for _, j := range plan.Jobs {
		longest = max(longest, expected(plan, j))
	}
	return longest
}

// drainFor is how long, in scenario time after the workload ends, a run
// of plan waits for its last jobs: the default (wiring.DefaultDrain), or
// three times the longest job's expected time when that is longer (an
// all-gather over four clusters with GbE among them takes more than 4
// hours of scenario time).
func drainFor(plan *scenarios.Plan, drain time.Duration) time.Duration {
	return max(drain, 3*longestJob(plan))
}

// expected is a job's expected execution time: its single-cluster time
// on the reference link, or, for a fixed request, its iterations at the
// pace of the slowest link among its clusters, their own networks included
// (apps.Traffic.On): a job on Delft alone runs over GbE.
func expected(plan *scenarios.Plan, j scenarios.Job) time.Duration {
	app, err := apps.Lookup(j.App)
	if err != nil {
		return 0
	}
	d, err := apps.NominalArgs(app, j.Size, j.Args)
	if err != nil {
		return 0
	}
	if len(j.Components) == 0 || j.Components[0].Cluster == "" {
		return d
	}
	var lat time.Duration
	bw := 0.0
	for _, a := range j.Components {
		for _, b := range j.Components {
			l, err := plan.Links.Link(a.Cluster, b.Cluster)
			if err != nil || l.Unavailable {
				continue
			}
			lat = max(lat, l.Latency)
			if l.Bandwidth > 0 && (bw == 0 || l.Bandwidth < bw) {
				bw = l.Bandwidth
			}
		}
	}
	t, err := apps.TrafficOf(app, j.Size, j.Args)
	if err != nil || t.Iterations <= 0 || t.Iteration <= 0 {
		return d
	}
	return max(d, time.Duration(t.Iterations*float64(t.On(lat, bw))))
}

// EstimatedWall is the wall time plan is expected to take at its dilation
// and time scale (before queueing beyond the workload's end).
func EstimatedWall(plan *scenarios.Plan) time.Duration {
	k := plan.TimeScale
	if k <= 0 {
		k = 1
	}
	return time.Duration(float64(span(plan)) * plan.Dilation / k)
}

// fitBudget is the largest dilation on the ladder at which plan fits its
// wall budget at time scale k (at least 1).
func fitBudget(plan *scenarios.Plan, k float64) float64 {
	d := plan.WallBudget.Seconds() * k / span(plan).Seconds()
	return fidelity.Floor(d)
}

// TimeScaleFor derives the time scale that fits plan's wall budget at
// dilation d: span x d / budget, at least 1, and at most what leaves every
// job its minimum iterations, snapped so that the job with the fewest
// iterations runs a whole number of them. Only the jobs of that fewest
// count (made exact by the snap) may keep fewer than MinIterations
// (minIterationsOf); every other job keeps MinIterations, so that its
// rounded count stays within 2.5 % of its time. note says when the budget
// cannot be met.
func TimeScaleFor(plan *scenarios.Plan, d float64) (k float64, note string) {
	k = math.Max(1, span(plan).Seconds()*d/plan.WallBudget.Seconds())
	type counted struct{ n, least float64 }
	var jobs []counted
	fewest := math.Inf(1)
	for _, j := range plan.Jobs {
		app, err := apps.Lookup(j.App)
		if err != nil {
			continue
		}
		if t, err := apps.TrafficOf(app, j.Size, j.Args); err == nil && t.Iterations > 0 {
			jobs = append(jobs, counted{t.Iterations, minIterationsOf(t, d)})
			fewest = math.Min(fewest, t.Iterations)
		}
	}
	kmax, least := math.Inf(1), float64(MinIterations)
	for _, j := range jobs {
		m := float64(MinIterations)
		if j.n == fewest {
			m = j.least
		}
		if j.n/m < kmax {
			kmax, least = j.n/m, m
		}
	}
	if k > kmax {
		note = fmt.Sprintf("time scale %.0f would leave a job fewer than %.0f iterations; using %.0f (about %s of wall time)",
			k, least, kmax, time.Duration(span(plan).Seconds()*d/kmax*float64(time.Second)).Round(time.Second))
		k = math.Max(1, kmax)
	}
	return snapIterations(k, fewest), note
}

// snapIterations moves time scale k (rounded to hundredths) to the nearest
// one at which a job of n iterations at time scale 1 runs a whole number of
// them, so that rounding the count does not change that job's time; k is
// kept when it is 1 or n is not finite.
func snapIterations(k, n float64) float64 {
	if k > 1 && !math.IsInf(n, 1) && n >= 1 {
		if m := math.Round(n / k); m >= 1 {
			k = n / m
		}
	}
	return math.Round(k*100) / 100
}

// ShareHost prepares n runs of b to run side by side (a study's or a
// sweep's cells) and returns opts with the Options.HostShare each should
// carry (n for an emulated backend, 0 for one alone or a simulation, which
// uses no host capacity) and, when shared, Options.Host: the host's
// capacity, the kept figures or measured now, alone, so that runs started
// together do not measure each other.
func ShareHost(ctx context.Context, b Backend, n int, opts Options) (Options, error) {
	opts.HostShare, opts.Host = 0, nil
	if n <= 1 || b.Capabilities().Simulated {
		return opts, nil
	}
	c, _, err := HostCapacity(ctx, b.Name(), false)
	if err != nil {
		return opts, fmt.Errorf("measuring the host before %d runs share it: %w", n, err)
	}
	opts.HostShare, opts.Host = n, &c
	return opts, nil
}

// hostFor is the host's capacity for a run: the figures it was given
// (ShareHost), else HostCapacity's. measured says they were measured now.
func hostFor(ctx context.Context, backend string, given *fidelity.Capacity) (fidelity.Capacity, bool, error) {
	if given != nil {
		return *given, false, nil
	}
	return HostCapacity(ctx, backend, false)
}

// HostCapacity returns the host's capacity for backend: the kept figures,
// or a new measurement (kept for later runs) when there are none, they are
// stale or refresh is set. measured says which.
func HostCapacity(ctx context.Context, backend string, refresh bool) (c fidelity.Capacity, measured bool, err error) {
	if _, err := LookupBackend(backend); err != nil {
		return c, false, err
	}
	return hostprobe.Get(ctx, backend, measurer(backend), refresh)
}
