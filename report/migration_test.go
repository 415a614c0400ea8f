package report

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
	"github.com/koala-emu/koala-emu/sweep"
)

// migSweepYAML is a small migration sweep of the das3-migrate built-in: two
// (order, load time) cases, both cost models, each with the rule's
// decision and the opposite forced.
const migSweepYAML = `base: das3-migrate
grid:
  - name: case
    variants:
      - {name: a, set: {"workload.jobs[0].args.n": 6000, "faults[0].at_s": 16}}
      - {name: b, set: {"workload.jobs[0].args.n": 8000, "faults[0].at_s": 244}}
  - {name: cost_model, path: policy.migration.cost_model, values: [worst-case, predicted]}
  - name: decision
    variants:
      - {name: rule}
      - {name: opposite, set: {policy.migration.force: opposite}}
`

// migRun is what a hand-made cell's run did: the rescheduler's answers
// (migrate, gain, cost), the qr job's execution, its moves' measured costs,
// its checksum and the run's fidelity verdict.
type migRun struct {
	answers  [][3]float64 // migrate (1 or 0), gain, cost_s
	execS    float64
	moves    []float64
	checksum float64
	verdict  string
}

// migRuns: case a under the predicted cost migrates and is right (checksum
// kept); under the worst case it stays and is wrong, its opposite run
// degraded and its moved matrix's checksum differing; case b asks nothing
// under the predicted cost; under the worst case it stays, moves later,
// and its opposite run was answered as it was (not the inverse).
var migRuns = map[string]migRun{
	"a/predicted/rule":      {answers: [][3]float64{{1, 0.6, 24.4}}, execS: 200, moves: []float64{25}, checksum: 7, verdict: fidelity.Faithful},
	"a/predicted/opposite":  {answers: [][3]float64{{0, 0.6, 24.4}}, execS: 450, checksum: 7, verdict: fidelity.Faithful},
	"a/worst-case/rule":     {answers: [][3]float64{{0, 0.1, 900}}, execS: 450, checksum: 7, verdict: fidelity.Faithful},
	"a/worst-case/opposite": {answers: [][3]float64{{1, 0.1, 900}}, execS: 210, moves: []float64{26}, checksum: 8, verdict: fidelity.Degraded},
	"b/predicted/rule":      {execS: 300, checksum: 9, verdict: fidelity.Faithful},
	"b/predicted/opposite":  {execS: 305, checksum: 9, verdict: fidelity.Faithful},
	"b/worst-case/rule":     {answers: [][3]float64{{0, 0.1, 900}, {1, 0.35, 900}}, execS: 280, moves: []float64{40}, checksum: 9, verdict: fidelity.Faithful},
	"b/worst-case/opposite": {answers: [][3]float64{{0, 0.1, 900}}, execS: 320, checksum: 9, verdict: fidelity.Faithful},
}

// genMigrationSweep runs migSweepYAML with package sweep, each cell writing
// the results migRuns gives it.
func genMigrationSweep(t *testing.T, dir string) {
	t.Helper()
	sw, err := sweep.Parse([]byte(migSweepYAML), filepath.Join(dir, "sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runCell := func(_ context.Context, c sweep.Cell, cd string) (sweep.Row, error) {
		r, ok := migRuns[c.Values[0].Value+"/"+c.Values[1].Value+"/"+c.Values[2].Value]
		if !ok {
			return nil, fmt.Errorf("cell %s not in the hand-made table", c.ID)
		}
		jobs := []results.Job{{ID: "j0001", App: "qr", Size: 4, Request: "fixed", Components: "tennessee:4", Clusters: 1,
			Placement: 0, Start: 10, End: 10 + r.execS, Tries: 1, Status: results.StatusCompleted}}
		s := results.Summary{Meta: results.Meta{Scenario: "das3-migrate", Backend: "inproc"}, Migrations: &results.Migrations{},
			Fidelity: &fidelity.Report{Verdict: r.verdict}}
		var ev strings.Builder
		for _, a := range r.answers {
			fmt.Fprintf(&ev, `{"kind":"migration_decision","job":"j0001","migrate":"%v","gain":%v,"cost_s":%v}`+"\n", a[0] == 1, a[1], a[2])
		}
		for _, m := range r.moves {
			s.Migrations.Moves = append(s.Migrations.Moves, results.Migration{Job: "j0001", MeasuredCostS: m})
		}
		fmt.Fprintf(&ev, `{"kind":"end","job":"j0001","status":"completed","value":%v}`+"\n", r.checksum)
		if err := os.WriteFile(filepath.Join(cd, EventsJSONL), []byte(ev.String()), 0o644); err != nil {
			return nil, err
		}
		if err := results.WriteJobsCSV(cd, jobs); err != nil {
			return nil, err
		}
		return sweep.Row{}, s.WriteJSON(cd)
	}
	if _, err := sweep.Run(context.Background(), sw, runCell, sweep.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
}

// A migration sweep's section pairs each run with its opposite: the
// decision and its gain, both executions, whether the decision was right,
// the predicted cost and the measured one of the move made on it, the
// checksum of the moved matrix against the unmoved one, the degraded runs;
// then the costs by order; figures of execution against load time per
// cost model and of the costs, and no AJRT section for it.
func TestMigrationSweepTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mig")
	genMigrationSweep(t, dir)
	out := filepath.Join(t.TempDir(), "report")
	if err := Write(out, []string{dir}, Options{}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, MigrationMD))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Sweep `mig`: 8 runs, 1 of them degraded; execution times and costs in scenario seconds.",
		"| 6000 | 16 | predicted | migrate (0.60) | 200 | 450 | yes | 24.4 | 25.0 | equal | - |",
		"| 8000 | 244 | predicted | none: no request | 300 | 305 | - | - | - | - | - |",
		"| 6000 | 16 | worst-case | stay (0.10) | 450 | 210 | no | 900.0 | 26.0 | differ | opposite |",
		"| 8000 | 244 | worst-case | stay (0.10), then migrate (0.35) * | 280 | 320 | yes | 900.0 | - | equal | - |",
		"| 6000 | 288 | 24.4 | 25.5 (25.0-26.0) | 2 | 1.05 |",
		"| 8000 | 512 | - | 40.0 (40.0-40.0) | 1 | - |",
	} {
		if !strings.Contains(string(md), want+"\n") {
			t.Errorf("%s lacks the line\n%s\ngot:\n%s", MigrationMD, want, md)
		}
	}
	if i, j := strings.Index(string(md), "| 6000 | 16 | predicted"), strings.Index(string(md), "| 6000 | 16 | worst-case"); i < 0 || j < i {
		t.Errorf("rows not by cost model, order and load time:\n%s", md)
	}
	csvRows, col, err := csvTable(filepath.Join(out, MigrationCSV), "order", "decision", "right", "measured_cost_s", "checksum", "mismatch")
	if err != nil {
		t.Fatal(err)
	}
	if len(csvRows) != 4 || csvRows[0][col["decision"]] != DecisionMigrate || csvRows[0][col["measured_cost_s"]] != "25" ||
		csvRows[3][col["mismatch"]] != "true" || csvRows[1][col["right"]] != NotApplicable {
		t.Errorf("%s rows %v", MigrationCSV, csvRows)
	}
	page, err := os.ReadFile(filepath.Join(out, PageHTML))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"migration-exec-mig-worst-case.png", "migration-exec-mig-predicted.svg", "migration-cost-mig.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil || !strings.Contains(string(page), `"`+f+`"`) {
			t.Errorf("figure %s: %v, named in the page: %v", f, err, strings.Contains(string(page), f))
		}
	}
	if html := string(page); !strings.Contains(html, "Migration decisions: mig") || strings.Contains(html, "AJRT against net utilisation") ||
		!strings.Contains(html, "answered otherwise") {
		t.Errorf("the page has no migration section or its note of a mismatched pair, or an AJRT section for the migration sweep")
	}
}

// The order is the first qr job's n: its own args over the workload's
// (when it runs the workload's application) over the application's
// default; a scenario without a qr job has no table.
func TestQROrder(t *testing.T) {
	head := "name: x\ntopology:\n  clusters: [{name: a, nodes: 4}]\n"
	for _, c := range []struct {
		workload string
		want     int
		err      string
	}{
		{"workload:\n  jobs: [{at_s: 0, application: qr, size: 4, args: {n: 6000}}]\n", 6000, ""},
		{"workload:\n  application: qr\n  args: {n: 7000}\n  jobs: [{at_s: 0, size: 4}]\n", 7000, ""},
		{"workload:\n  application: qr\n  args: {n: 7000}\n  jobs: [{at_s: 0, size: 4, args: {n: 5000}}]\n", 5000, ""},
		{"workload:\n  jobs: [{at_s: 0, application: prime, size: 4}, {at_s: 0, application: qr, size: 4}]\n", 8000, ""},
		{"workload:\n  jobs: [{at_s: 0, application: prime, size: 4}]\n", 0, "no qr job"},
	} {
		sc, err := scenarios.Parse([]byte(head+c.workload), "x.yaml")
		if err != nil {
			t.Fatal(err)
		}
		n, err := qrOrder(sc)
		if n != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: order %d, error %v; want %d, %q", c.workload, n, err, c.want, c.err)
		}
	}
}
