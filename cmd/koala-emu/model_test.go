package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/sim"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// lawBackend is an emulated backend whose one job takes what a known law
// gives on the plan's link: iteration it + rounds x extra latency + crit
// x extra seconds per byte, times the application's iterations, at the
// plan's time scale. Runs on
// the reduced bandwidth come back degraded.
type lawBackend struct {
	fakeBackend
	it, rounds, crit float64
	plans            []*scenarios.Plan
}

func (b *lawBackend) Run(_ context.Context, plan *scenarios.Plan, _ launch.Options) (*launch.Result, error) {
	b.plans = append(b.plans, plan)
	l := plan.Links.Links[0][0]
	j := plan.Jobs[0]
	a, _ := apps.Lookup(j.App)
	t := apps.Traffic{Iteration: time.Duration(b.it * 1e9), Rounds: b.rounds, CritBytes: b.crit}
	// As an emulated run at time scale K: the iterations cut by K (at least
	// one), scenario time K times the wall's, and a job's one-off phase
	// charged once (apps.Params.Credit): every iteration's time counts once,
	// however few iterations ran (prime's one final allreduce included).
	iters := iterationsOf(a, j.Size)
	exec := iters * t.On(l.Latency, l.Bandwidth).Seconds()
	verdict := fidelity.Faithful
	if l.Bandwidth < apps.RefBandwidth {
		verdict = fidelity.Degraded
	}
	return &launch.Result{Jobs: []results.Job{{ID: j.ID, Status: "completed", Start: 1, End: 1 + exec}},
		Summary: results.Summary{Fidelity: &fidelity.Report{Verdict: verdict, Reasons: []string{"link delay late"}}}}, nil
}

func TestModelLearnFitsTheRuns(t *testing.T) {
	ta := newTestApp()
	b := &lawBackend{fakeBackend: fakeBackend{name: "law", t: ta}, it: 2e-3, rounds: 4, crit: 5e4}
	ta.backends = []launch.Backend{b}
	out := filepath.Join(t.TempDir(), "m.json")
	if code := ta.exec("model", "learn", "--backend", "law", "--apps", "poisson,prime", "--sizes", "8,16", "--out", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	if len(b.plans) != 2*2*3 {
		t.Fatalf("%d runs, want 12", len(b.plans))
	}
	for _, p := range b.plans {
		if len(p.Clusters) != 1 || len(p.Jobs) != 1 || p.Jobs[0].Size != p.Clusters[0].Nodes || p.TimeScale < 1 || p.Dilation < 1 || p.Dilation > 100 {
			t.Fatalf("plan %s: %d clusters, %d jobs, time scale %v, dilation %v", p.Name, len(p.Clusters), len(p.Jobs), p.TimeScale, p.Dilation)
		}
	}
	f, err := sim.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Provenance.Backend != "law" || f.Provenance.Degraded != 4 {
		t.Fatalf("provenance %+v, want backend law and 4 degraded runs", f.Provenance)
	}
	for _, app := range []string{"poisson", "prime"} {
		for i, s := range f.Apps[app].Sizes {
			if s.Ranks != []int{8, 16}[i] || len(s.Runs) != 3 {
				t.Fatalf("%s size %d: %d ranks, %d runs", app, i, s.Ranks, len(s.Runs))
			}
			if !near(s.IterationS, b.it, 1e-6) || !near(s.LatencyRounds, b.rounds, 1e-3) || !near(s.CritBytes, b.crit, 1e-3) {
				t.Fatalf("%s on %d ranks: fitted %g s, %g rounds, %g bytes; want %g, %g, %g", app, s.Ranks, s.IterationS, s.LatencyRounds, s.CritBytes, b.it, b.rounds, b.crit)
			}
		}
	}
	if n := strings.Count(ta.errOut.String(), "DEGRADED"); n != 4 {
		t.Fatalf("stderr names %d degraded runs, want 4:\n%s", n, ta.errOut.String())
	}
	for _, bad := range [][]string{{"model", "learn"}, {"model", "learn", "--backend", "law", "--apps", "ft", "--out", out}} {
		if code := ta.exec(bad...); code != exitUsage {
			t.Errorf("%q: exit %d, want a usage error", bad, code)
		}
	}
}

func near(a, b, rel float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= rel*max(a, b, -a, -b)
}

// An application's iteration count: its Traffic's, else its iters
// argument, else 1.
func TestIterationsOf(t *testing.T) {
	for name, want := range map[string]float64{"wave": 964912, "poisson": 61660, "ccr": 18000, "prime": 1} {
		a, err := apps.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := iterationsOf(a, 16); got != want {
			t.Errorf("iterationsOf(%s, 16) = %v, want %v", name, got, want)
		}
	}
}
