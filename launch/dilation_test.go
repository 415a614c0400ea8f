package launch

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

func demandPlan(jobs ...scenarios.Job) *scenarios.Plan {
	m := netem.Matrix{Clusters: []string{"a", "b"}, Links: [][]netem.Link{
		{{Latency: 30 * time.Microsecond}, {Latency: time.Millisecond}},
		{{Latency: time.Millisecond}, {Latency: 50 * time.Microsecond}},
	}}
	return &scenarios.Plan{Name: "t", TimeScale: 1, Dilation: 1, Duration: time.Hour, Links: m,
		Clusters: []scenarios.Cluster{{Name: "a", Nodes: 64}, {Name: "b", Nodes: 64}}, Jobs: jobs}
}

func rates(t *testing.T, app string, n int) (float64, float64, time.Duration) {
	t.Helper()
	a, err := apps.Lookup(app)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := apps.TrafficOf(a, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, b := tr.Rates()
	return m, b, a.Nominal(n)
}

func TestDemandOf(t *testing.T) {
	wm, wb, wd := rates(t, "wave", 32)
	pm, pb, _ := rates(t, "poisson", 16)
	cases := []struct {
		name        string
		jobs        []scenarios.Job
		msgs, bytes float64
		// Bursts: wave's 62 boundary messages every step, prime's one
		// allreduce of 32 (a job's one exchange).
		burst, once float64
	}{
		{"one job", []scenarios.Job{{App: "wave", Size: 32}}, wm, wb, 62, 0},
		{"overlapping jobs add up", []scenarios.Job{{App: "wave", Size: 32}, {App: "poisson", Size: 16, Submit: time.Second}}, wm + pm, wb + pb, 62, 0},
		{"jobs apart do not", []scenarios.Job{{App: "wave", Size: 32}, {App: "poisson", Size: 16, Submit: wd + time.Second}}, math.Max(wm, pm), math.Max(wb, pb), 62, 0},
		// 5 jobs of 32 on 128 nodes: at most 4 run at once.
		{"capped by the platform", []scenarios.Job{{App: "wave", Size: 32}, {App: "wave", Size: 32}, {App: "wave", Size: 32},
			{App: "wave", Size: 32}, {App: "wave", Size: 32}}, 4 * wm, 4 * wb, 62, 0},
		{"compute-bound", []scenarios.Job{{App: "prime", Size: 32}}, 0, 0, 0, 32},
		{"both kinds of burst", []scenarios.Job{{App: "prime", Size: 32}, {App: "wave", Size: 32}}, wm, wb, 62, 32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DemandOf(demandPlan(c.jobs...))
			if math.Abs(d.MsgsPerSec-c.msgs) > 1e-6*c.msgs+1e-9 || math.Abs(d.BytesPerSec-c.bytes) > 1e-6*c.bytes+1e-9 {
				t.Fatalf("demand %.0f msgs/s %.0f B/s, want %.0f and %.0f", d.MsgsPerSec, d.BytesPerSec, c.msgs, c.bytes)
			}
			if d.Burst != c.burst || d.BurstOnce != c.once {
				t.Fatalf("bursts %g every step, %g once; want %g and %g", d.Burst, d.BurstOnce, c.burst, c.once)
			}
			if d.MinLatency != 30*time.Microsecond {
				t.Fatalf("min latency %s", d.MinLatency)
			}
		})
	}
	if wm < 250e3 || wm > 350e3 {
		t.Errorf("wave on 32 nodes asks %.0f messages/s; its doc says about 300,000", wm)
	}
}

func TestTimeScaleFor(t *testing.T) {
	p := demandPlan(scenarios.Job{App: "wave", Size: 32})
	p.Duration = 0
	p.WallBudget = 100 * time.Second
	k, note := TimeScaleFor(p, 25)
	want := waveNominal().Seconds() * 25 / 100
	if note != "" || math.Abs(k-want) > 0.01 {
		t.Fatalf("time scale %g (%q), want %g", k, note, want)
	}
	// A budget so small that wave would keep fewer than MinIterations steps
	// (62 frames a step: too few to keep fewer).
	p.WallBudget = time.Millisecond
	k, note = TimeScaleFor(p, 25)
	if !strings.Contains(note, "fewer than") || math.Abs(k-964912.0/MinIterations) > 0.01 {
		t.Fatalf("time scale %g (%q)", k, note)
	}
	est := EstimatedWall(&scenarios.Plan{Dilation: 10, TimeScale: 5, Duration: time.Minute})
	if est != 2*time.Minute {
		t.Fatalf("estimated wall %s", est)
	}
}

// A job whose iterations are dense in frames keeps fewer than
// MinIterations of them, never fewer than MinSteadyIterations; a job of the
// fewest count that sends few frames, or one with more iterations than the
// fewest (not snapped exact), keeps MinIterations.
func TestTimeScaleForFrameDenseJobs(t *testing.T) {
	ag, err := apps.TrafficOf(apps.Allgather{}, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ag.Msgs*MinSteadyIterations < MinFrames {
		t.Fatalf("an all-gather on 32 nodes sends %g frames; the cases below assume %d calls carry %d", ag.Msgs, MinSteadyIterations, MinFrames)
	}
	for _, c := range []struct {
		name  string
		jobs  []scenarios.Job
		iters float64 // the fewest-counted job's iterations at the chosen time scale
	}{
		{"allgather on 32 nodes", []scenarios.Job{{App: "allgather", Size: 32}}, MinSteadyIterations},
		{"allgather on 4 nodes: 12 frames a call", []scenarios.Job{{App: "allgather", Size: 4}}, MinIterations},
		{"both sizes: the small one keeps 20", []scenarios.Job{{App: "allgather", Size: 32}, {App: "allgather", Size: 4}}, MinIterations},
		{"beside wave, which has fewer", []scenarios.Job{{App: "allgather", Size: 32}, {App: "wave", Size: 32}}, MinIterations},
		{"wave alone: 62 frames a step", []scenarios.Job{{App: "wave", Size: 32}}, MinIterations},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := demandPlan(c.jobs...)
			p.Duration = 0
			p.WallBudget = time.Millisecond
			k, note := TimeScaleFor(p, 100)
			if !strings.Contains(note, "fewer than") {
				t.Fatalf("note %q", note)
			}
			fewest := math.Inf(1)
			for _, j := range c.jobs {
				a, _ := apps.Lookup(j.App)
				tr, err := apps.TrafficOf(a, j.Size, nil)
				if err != nil {
					t.Fatal(err)
				}
				fewest = math.Min(fewest, tr.Iterations)
				if n := math.Round(tr.Iterations / k); n < MinSteadyIterations {
					t.Errorf("%s on %d nodes keeps %g iterations", j.App, j.Size, n)
				}
			}
			if got := fewest / k; math.Abs(got-c.iters) > 1e-6 {
				t.Fatalf("time scale %g leaves the fewest-counted job %g iterations, want %g", k, got, c.iters)
			}
		})
	}
}

// A job whose iterations last long in wall time keeps fewer than
// MinIterations of them: poisson on 8 nodes (64 frames, 11 ms an
// iteration) keeps MinSteadyIterations at dilation 800, where each
// iteration is 8.8 s of wall time, and MinIterations at dilation 1, where
// 20 iterations are a quarter of a second; wave's 0.2 ms steps keep
// MinIterations even at dilation 1000.
func TestMinIterationsOfLongIterations(t *testing.T) {
	for _, c := range []struct {
		app  string
		size int
		d    float64
		want float64
	}{
		{"poisson", 8, 800, MinSteadyIterations},
		{"poisson", 32, 800, MinSteadyIterations},
		{"poisson", 8, 1, MinIterations},
		{"poisson", 8, 100, 10}, // 10 s / 1.08 s = 9.25
		{"wave", 32, 1000, MinIterations},
	} {
		a, err := apps.Lookup(c.app)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := apps.TrafficOf(a, c.size, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := minIterationsOf(tr, c.d); got != c.want {
			t.Errorf("%s on %d nodes at dilation %g (iteration %s, %g frames): keeps %g iterations, want %g",
				c.app, c.size, c.d, tr.Iteration, tr.Msgs, got, c.want)
		}
	}
}

// waveNominal is wave's nominal time on 32 nodes.
func waveNominal() time.Duration { return apps.Wave{}.Nominal(32) }

// With auto and a wall budget that cannot be met at the chosen dilation, the
// budget wins: the dilation is lowered, the time scale keeps MinIterations,
// and the reason says the run will be degraded.
func TestBudgetLowersAutoDilation(t *testing.T) {
	p := demandPlan(scenarios.Job{App: "wave", Size: 32})
	p.Duration = 0
	// Wave's 200 s at dilation 200 in 2 s needs time scale 20,000, which
	// would leave it fewer than 20 of its 964,912 steps.
	p.WallBudget = 2 * time.Second
	p.DilationAuto = true
	t.Setenv("KOALA_EMU_CACHE", t.TempDir())
	writeCapacity(t, 50e3, 1e9, 30*time.Microsecond)
	opts, err := Prepare(context.Background(), "inproc", p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	kmax := 964912.0 / MinIterations
	if p.TimeScale > kmax || p.Dilation >= fidelity.MaxAuto || !strings.Contains(opts.Dilation.Reason, "lowered") {
		t.Fatalf("time scale %g dilation %g: %s", p.TimeScale, p.Dilation, opts.Dilation.Reason)
	}
	if wall := EstimatedWall(p); wall > 2*time.Second+20*time.Millisecond {
		t.Fatalf("estimated wall %s over the budget", wall)
	}
}

// writeCapacity keeps figures for this machine, as a probe would.
func writeCapacity(t *testing.T, msgs, bytes float64, floor time.Duration) {
	t.Helper()
	c := fidelity.Capacity{Backend: "inproc", Machine: hostprobe.MachineID(), MsgsPerSec: msgs, BytesPerSec: bytes,
		Floor: floor, Measured: time.Now(), Probe: hostprobe.Version}
	if err := hostprobe.Save(c); err != nil {
		t.Fatal(err)
	}
}

// The time scale is snapped so that the job with the fewest iterations runs
// a whole number of them.
func TestSnapIterations(t *testing.T) {
	for _, c := range []struct{ k, n, want float64 }{
		{1, 61660, 1},          // time scale 1 is kept
		{616.6, 61660, 616.6},  // 100 iterations already
		{600, 61660, 598.64},   // 102.77 iterations -> 103
		{3000, 61660, 2936.19}, // 20.55 -> 21
		{50, math.Inf(1), 50},  // no job with a count
		{123.456, math.Inf(1), 123.46},
	} {
		got := snapIterations(c.k, c.n)
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("snapIterations(%g, %g) = %g, want %g", c.k, c.n, got, c.want)
		}
		if m := c.n / got; !math.IsInf(c.n, 1) && math.Abs(m-math.Round(m)) > 1e-3 {
			t.Errorf("snapIterations(%g, %g) = %g leaves %g iterations", c.k, c.n, got, m)
		}
	}
}

// A fixed job's expected time follows the slowest link among its clusters,
// its own network included: wave on one cluster whose network is slower
// than the reference (1 ms one way) is expected to take longer than its
// nominal time, and as long as when it spans that cluster and another.
func TestExpectedOnASlowCluster(t *testing.T) {
	p := demandPlan()
	p.Links.Links[1][1] = netem.Link{Latency: time.Millisecond}
	one := scenarios.Job{App: "wave", Size: 32, Components: []scenarios.Component{{Cluster: "b", Size: 32}}}
	two := scenarios.Job{App: "wave", Size: 32, Components: []scenarios.Component{{Cluster: "a", Size: 16}, {Cluster: "b", Size: 16}}}
	if e, n := expected(p, one), waveNominal(); e < 2*n {
		t.Fatalf("wave on a 1 ms cluster expected %s, nominal %s", e, n)
	}
	if e1, e2 := expected(p, one), expected(p, two); e1 != e2 {
		t.Fatalf("expected %s on the slow cluster, %s across both", e1, e2)
	}
}

// A run waits for its last jobs at least the default drain, and three times
// the longest job's expected time when that is longer.
func TestDrainFor(t *testing.T) {
	p := demandPlan(scenarios.Job{App: "wave", Size: 32})
	if got := drainFor(p, 4*time.Hour); got != 4*time.Hour {
		t.Fatalf("wave's %s: drain %s, want the default", waveNominal(), got)
	}
	if got, want := drainFor(p, time.Minute), 3*waveNominal(); got != want {
		t.Fatalf("drain %s, want %s", got, want)
	}
}

// A run that shares the host with another is dilated for its share, and
// says so; ShareHost hands a share only to emulated runs side by side.
func TestPrepareSharedHost(t *testing.T) {
	t.Setenv("KOALA_EMU_CACHE", t.TempDir())
	// Few messages a second and fast bursts: the rates decide, not the
	// floor or the bursts.
	c := fidelity.Capacity{Backend: "inproc", Machine: hostprobe.MachineID(), MsgsPerSec: 2e3, BytesPerSec: 1e9,
		Floor: time.Microsecond, BurstPerMsg: time.Nanosecond, Measured: time.Now(), Probe: hostprobe.Version}
	if err := hostprobe.Save(c); err != nil {
		t.Fatal(err)
	}
	choose := func(share int) *fidelity.Choice {
		t.Helper()
		p := demandPlan(scenarios.Job{App: "prime", Size: 8}, scenarios.Job{App: "wave", Size: 8})
		p.DilationAuto = true
		opts, err := Prepare(context.Background(), "inproc", p, Options{HostShare: share})
		if err != nil {
			t.Fatal(err)
		}
		return opts.Dilation
	}
	alone, shared := choose(0), choose(2)
	if shared.Dilation < 1.5*alone.Dilation || !strings.Contains(shared.Reason, "shared by 2 runs") || strings.Contains(alone.Reason, "shared") {
		t.Fatalf("alone %g (%s), shared by two %g (%s): want at least 1.5 times, and said", alone.Dilation, alone.Reason, shared.Dilation, shared.Reason)
	}

	for _, c := range []struct {
		name string
		b    Backend
		n    int
		want int
	}{
		{"one run", inproc{}, 1, 0},
		{"a simulation uses no host", simBackend{}, 4, 0},
		{"two emulated runs", inproc{}, 2, 2},
	} {
		got, err := ShareHost(context.Background(), c.b, c.n, Options{HostShare: 7})
		if err != nil || got.HostShare != c.want || (got.Host != nil) != (c.want > 1) {
			t.Errorf("%s: share %d, figures %v (%v), want %d and figures when shared", c.name, got.HostShare, got.Host, err, c.want)
		}
	}

	// The figures ShareHost handed over are the ones a run uses, whatever
	// is kept: ten times the kept message rate asks a tenth the dilation.
	given := c
	given.MsgsPerSec *= 10
	p := demandPlan(scenarios.Job{App: "prime", Size: 8}, scenarios.Job{App: "wave", Size: 8})
	p.DilationAuto = true
	opts, err := Prepare(context.Background(), "inproc", p, Options{Host: &given})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Dilation.Dilation > alone.Dilation/5 {
		t.Fatalf("given figures: dilation %g, kept figures %g: the given ones were not used", opts.Dilation.Dilation, alone.Dilation)
	}
}

// A time scale that leaves jobs fewer iterations than a wall budget keeps
// is named, per application, with the fewest iterations it leaves; one
// that leaves every job enough, or time scale 1, says nothing.
func TestCoarseNote(t *testing.T) {
	p := demandPlan(scenarios.Job{App: "ft", Size: 2}, scenarios.Job{App: "ft", Size: 2},
		scenarios.Job{App: "nbody", Size: 2}, scenarios.Job{App: "wave", Size: 32})
	if got := coarseNote(p, 1, 1); got != "" {
		t.Errorf("time scale 1: %q", got)
	}
	// ft: 600 iterations, nbody 2400: at 30 both keep at least 20.
	if got := coarseNote(p, 30, 1); got != "" {
		t.Errorf("time scale 30: %q", got)
	}
	got := coarseNote(p, 240, 1)
	for _, want := range []string{"leaves 3 of 4 jobs", "ft: 2 jobs, down to 3 of 600 iterations", "nbody: 1 jobs, down to 10 of 2400", "once to 8 times per iteration", "up to 240 times more rarely"} {
		if !strings.Contains(got, want) {
			t.Errorf("time scale 240: %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "wave") {
		t.Errorf("time scale 240 names a job that keeps enough iterations: %q", got)
	}
}
