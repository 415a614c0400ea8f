package sweep

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

// The sweeps shipped in scenarios/sweeps expand into cells that validate
// against the project's own applications, policies and cost models.
func TestShippedSweeps(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "scenarios", "sweeps", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("shipped sweeps %v, %v", files, err)
	}
	env := wiring.ScenarioEnv()
	for _, f := range files {
		if _, err := load(t, f).Cells(&env); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// The migration sweep is the experiment of issue 19 on the das3-migrate
// platform (4 fast nodes, 8 slower ones, a wide-area link): at least 4
// matrix orders, each loaded at 6 times or more from within the first
// 10 % of its unloaded run on the fast cluster to past 70 % of it, each
// (order, load time) under both cost models, each of those run with the
// rescheduler's decision and with the opposite forced, one cell at a time.
func TestMigrationSweep(t *testing.T) {
	sw := load(t, filepath.Join("..", "scenarios", "sweeps", "migration.yaml"))
	if sw.Backend != "inproc" || sw.Parallel != 1 {
		t.Fatalf("backend %q parallel %d, want inproc and 1", sw.Backend, sw.Parallel)
	}
	env := wiring.ScenarioEnv()
	cells, err := sw.Cells(&env)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		n      float64
		at     time.Duration
		cost   string
		invert bool
	}
	runs := map[run]bool{}
	loads := map[float64][]time.Duration{}  // by order
	unloaded := map[float64]time.Duration{} // the job's unloaded run on tennessee, by order
	for _, c := range cells {
		s := parseCell(t, c)
		plan, err := s.Expand(env, scenarios.Overrides{})
		if err != nil {
			t.Fatalf("cell %s: %v", c.ID, err)
		}
		if len(plan.Jobs) != 1 || plan.Jobs[0].App != "qr" || len(plan.Faults) != 1 || plan.Faults[0].Kind != "load" ||
			plan.Faults[0].Target != "tennessee" || plan.Policy.Migration == nil || len(plan.Clusters) != 2 {
			t.Fatalf("cell %s: jobs %+v, faults %+v, migration %+v", c.ID, plan.Jobs, plan.Faults, plan.Policy.Migration)
		}
		if a, b := plan.Clusters[0], plan.Clusters[1]; a.Nodes != 4 || b.Nodes != 8 || a.Speed <= b.Speed {
			t.Fatalf("cell %s: clusters %+v, want 4 fast nodes and 8 slower ones", c.ID, plan.Clusters)
		}
		n, at := plan.Jobs[0].Args["n"], plan.Faults[0].At
		r := run{n, at, plan.Policy.Migration.CostModel, plan.Policy.Migration.Invert}
		if runs[r] {
			t.Fatalf("cell %s runs as another: %+v", c.ID, r)
		}
		runs[r] = true
		if !slices.Contains(loads[n], at) {
			loads[n] = append(loads[n], at)
		}
		nominal, err := apps.QR{}.NominalArgs(4, plan.Jobs[0].Args)
		if err != nil {
			t.Fatal(err)
		}
		unloaded[n] = nominal
	}
	if len(loads) < 4 {
		t.Fatalf("orders %v, want at least 4", loads)
	}
	for n, ats := range loads {
		slices.Sort(ats)
		d := unloaded[n]
		if len(ats) < 6 || ats[0] > 10*time.Second+d/10 || ats[len(ats)-1] < 10*time.Second+d*7/10 || ats[len(ats)-1] > 10*time.Second+d {
			t.Errorf("order %v: load times %v, want 6 or more from the first 10 %% to past 70 %% of its %v run (after 10 s of start-up)", n, ats, d)
		}
		for _, at := range ats {
			for _, cost := range []string{"worst-case", "predicted"} {
				for _, inv := range []bool{false, true} {
					if !runs[run{n, at, cost, inv}] {
						t.Errorf("order %v, load at %v: no run with cost model %s, forced opposite %v", n, at, cost, inv)
					}
				}
			}
		}
	}
}
