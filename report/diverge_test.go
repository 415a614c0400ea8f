package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	divSim = "testdata/diverge-sim"
	divEmu = "testdata/diverge-emu"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Hand-computed from the fixtures: AJRT 200 (sim) against 535/3 (emu), wait
// 50 against 19, execution 150 against 478/3, co-allocated 50 % against
// 100/3 %, net utilisation 30 against 27, observed 40 against 44, 4
// completed against 3, 0 failed against 1. Per job (emu - sim): j1 wait +2,
// exec +30, response +32; j2 -10, +60, +50; j3 +5, -2, +3; j4 failed on the
// emulated backend, so no differences.
func TestDivergeAggregates(t *testing.T) {
	d, err := Diverge(divSim, divEmu)
	if err != nil {
		t.Fatal(err)
	}
	if d.Scenario != "tiny" || d.Seed != 7 || d.Policy != "fcm" || d.EmuBackend != "inproc" || d.EmuFidelity != "faithful" {
		t.Errorf("header %+v", d)
	}
	cases := []struct {
		name      string
		sim, emu  float64
		rel       float64
		noRelated bool
	}{
		{AggAJRT, 200, 535.0 / 3, (535.0/3 - 200) / 200, false},
		{AggWait, 50, 19, -31.0 / 50, false},
		{AggExec, 150, 478.0 / 3, (478.0/3 - 150) / 150, false},
		{AggNetUtil, 30, 27, -0.1, false},
		{AggObsUtil, 40, 44, 0.1, false},
		{AggCoallocated, 50, 100.0 / 3, -1.0 / 3, false},
		{AggCompleted, 4, 3, -0.25, false},
		{AggFailed, 0, 1, 0, true},
	}
	if len(d.Aggregates) != len(cases) {
		t.Fatalf("%d aggregates, want %d", len(d.Aggregates), len(cases))
	}
	for _, c := range cases {
		a := d.Aggregate(c.name)
		if a == nil {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if !near(a.Sim, c.sim) || !near(a.Emu, c.emu) || !near(a.Diff, c.emu-c.sim) {
			t.Errorf("%s: sim %g emu %g diff %g, want %g %g %g", c.name, a.Sim, a.Emu, a.Diff, c.sim, c.emu, c.emu-c.sim)
		}
		switch {
		case c.noRelated && a.Rel != nil:
			t.Errorf("%s: relative %g, want none (sim is 0)", c.name, *a.Rel)
		case !c.noRelated && (a.Rel == nil || !near(*a.Rel, c.rel)):
			t.Errorf("%s: relative %v, want %g", c.name, a.Rel, c.rel)
		}
	}
	if d.Largest != AggWait {
		t.Errorf("largest aggregate %q, want %q (-62 %%)", d.Largest, AggWait)
	}
	if d.Both != 3 || !near(d.MeanAbsResponseS, 85.0/3) {
		t.Errorf("both completed %d, mean |response diff| %g; want 3, 85/3", d.Both, d.MeanAbsResponseS)
	}
}

func TestDivergeJobs(t *testing.T) {
	d, err := Diverge(divSim, divEmu)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id                   string
		wait, exec, response float64
		failed               bool
	}{
		{"j1", 2, 30, 32, false},
		{"j2", -10, 60, 50, false},
		{"j3", 5, -2, 3, false},
		{"j4", 0, 0, 0, true},
	}
	if len(d.Jobs) != len(want) {
		t.Fatalf("%d jobs, want %d", len(d.Jobs), len(want))
	}
	for i, w := range want {
		j := d.Jobs[i]
		if j.ID != w.id {
			t.Errorf("job %d is %s, want %s", i, j.ID, w.id)
			continue
		}
		if w.failed {
			if j.Diff != nil || j.RelResponse != nil || j.Emu.Status != "failed" || j.Sim.Status != statusCompleted {
				t.Errorf("%s: diff %+v, statuses %s/%s; want no diff, completed/failed", j.ID, j.Diff, j.Sim.Status, j.Emu.Status)
			}
			continue
		}
		if j.Diff == nil || !near(j.Diff.WaitS, w.wait) || !near(j.Diff.ExecS, w.exec) || !near(j.Diff.ResponseS, w.response) {
			t.Errorf("%s: diff %+v, want wait %g exec %g response %g", j.ID, j.Diff, w.wait, w.exec, w.response)
			continue
		}
		if j.RelResponse == nil || !near(*j.RelResponse, w.response/j.Sim.ResponseS) {
			t.Errorf("%s: relative response %v", j.ID, j.RelResponse)
		}
	}
	for _, c := range []struct {
		n    int
		want string
	}{{0, "j2 j1 j3"}, {2, "j2 j1"}, {1, "j2"}, {10, "j2 j1 j3"}} {
		var ids []string
		for _, j := range d.Top(c.n) {
			ids = append(ids, j.ID)
		}
		if got := strings.Join(ids, " "); got != c.want {
			t.Errorf("Top(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	var b bytes.Buffer
	if err := d.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || strings.Join(rows[0], ",") != strings.Join(DivergenceColumns, ",") {
		t.Fatalf("csv %q", rows)
	}
	if r := rows[2]; r[0] != "j2" || r[7] != "-10.000" || r[10] != "60.000" || r[13] != "50.000" || r[14] != "0.2000" {
		t.Errorf("j2's row %q", r)
	}
	if r := rows[4]; r[0] != "j4" || r[4] != "failed" || r[6] != "" || r[7] != "" || r[13] != "" || r[14] != "" {
		t.Errorf("j4's row %q: want empty differences", r)
	}
}

// copyRun copies a fixture run into a temporary directory, rewriting its
// files with edit.
func copyRun(t *testing.T, src string, edit func(name, text string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{ResultsJSON, JobsCSV} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(edit(name, string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// replaceIn returns an edit replacing old by new in one file.
func replaceIn(file, old, new string) func(string, string) string {
	return func(name, text string) string {
		if name == file {
			return strings.Replace(text, old, new, 1)
		}
		return text
	}
}

func TestDivergeErrors(t *testing.T) {
	empty := t.TempDir()
	cases := []struct {
		name     string
		sim, emu func(t *testing.T) string
		want     []string
	}{
		{"missing directory", fixed(filepath.Join(empty, "none")), fixed(divEmu), []string{"none"}},
		{"not a run", fixed(empty), fixed(divEmu), []string{"not a run directory", ResultsJSON}},
		{"emu not a run", fixed(divSim), fixed(empty), []string{"not a run directory"}},
		{"sim is emulated", fixed(divEmu), fixed(divSim), []string{"not a simulated run", `"inproc"`}},
		{"emu is simulated", fixed(divSim), edited(divEmu, replaceIn(ResultsJSON, `"inproc"`, `"sim"`)), []string{"not an emulated run"}},
		{"scenario", fixed(divSim), edited(divEmu, replaceIn(ResultsJSON, `"tiny"`, `"other"`)), []string{"scenario differs", "tiny against other"}},
		{"seed", fixed(divSim), edited(divEmu, replaceIn(ResultsJSON, `"seed": 7`, `"seed": 8`)), []string{"seed differs", "7 against 8"}},
		{"policy", edited(divSim, replaceIn(ResultsJSON, `"fcm"`, `"wf"`)), fixed(divEmu), []string{"policy differs", "wf against fcm"}},
		{"nodes", fixed(divSim), edited(divEmu, replaceIn(ResultsJSON, `"total_nodes": 16`, `"total_nodes": 12`)), []string{"total_nodes differs"}},
		{"utilisation", fixed(divSim), edited(divEmu, replaceIn(ResultsJSON, `"target_net_utilization_pct": 40`, `"target_net_utilization_pct": 50`)), []string{"target_net_utilization_pct differs"}},
		{"job only in sim", edited(divSim, replaceIn(JobsCSV, "j3,", "j9,")), fixed(divEmu), []string{"job j9 is in", "only"}},
		{"job only in emu", fixed(divSim), edited(divEmu, replaceIn(JobsCSV, "j3,", "j9,")), []string{"job j3 is in"}},
		{"application", fixed(divSim), edited(divEmu, replaceIn(JobsCSV, "j3,prime", "j3,wave")), []string{"job j3 application differs", "prime against wave"}},
		{"size", fixed(divSim), edited(divEmu, replaceIn(JobsCSV, "j2,wave,16", "j2,wave,8")), []string{"job j2 size differs", "16 against 8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Diverge(c.sim(t), c.emu(t))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func fixed(dir string) func(*testing.T) string { return func(*testing.T) string { return dir } }

func edited(src string, edit func(string, string) string) func(*testing.T) string {
	return func(t *testing.T) string { return copyRun(t, src, edit) }
}

// report's page has the divergence when its inputs are exactly a sim run
// and an emulated run; the reason when their plans differ; nothing of it
// otherwise.
func TestWriteDivergence(t *testing.T) {
	other := copyRun(t, divEmu, replaceIn(ResultsJSON, `"seed": 7`, `"seed": 8`))
	cases := []struct {
		name   string
		inputs []string
		want   []string
		not    []string
	}{
		{"sim and emulated", []string{divEmu, divSim}, []string{`id="divergence"`, "Largest: avg_wait", "<td>avg_wait (s)</td>", "-62.0", "<code>j2</code>"}, []string{"Not computed"}},
		{"different plans", []string{divSim, other}, []string{`id="divergence"`, "Not computed", "seed differs"}, []string{"Largest:"}},
		{"one run", []string{divSim}, nil, []string{`id="divergence"`}},
		{"two emulated", []string{divEmu, other}, nil, []string{`id="divergence"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			if err := Write(out, c.inputs, Options{}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(out, PageHTML))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(string(b), n) {
					t.Errorf("the page has %q", n)
				}
			}
		})
	}
}
