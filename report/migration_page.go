package report

// This file writes a migration sweep's section: its figures, migration.csv
// and migration.md.

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/koala-emu/koala-emu/fidelity"
)

// migrationSections builds the section of every migration sweep, saving
// its figures with save (named by name), and writes migration.csv and
// migration.md in outDir when there is one.
func migrationSections(outDir string, sweeps []*sweepInput, name func(...string) string,
	save func(*figure, string) (*figRef, error)) ([]migrationSection, error) {
	var out []migrationSection
	for _, s := range sweeps {
		if !isMigrationSweep(s) {
			continue
		}
		rows, costs, err := migrationTable(s)
		if err != nil {
			return nil, err
		}
		sec := migrationSection{Label: s.Label, Rows: rows, Costs: costs, Runs: len(s.Cells), NotDone: s.NotDone}
		for _, c := range s.Cells {
			if f := c.Summary.Fidelity; f != nil && f.Verdict == fidelity.Degraded {
				sec.Degraded++
			}
		}
		for _, model := range costModelsOf(rows) {
			f, err := execLoadFigure(name("migration-exec", s.Label, model), model, rows)
			if err != nil {
				return nil, err
			}
			ref, err := save(f, "The qr job's execution time against the time the load came, one colour per matrix order: "+
				"solid with the rescheduler's decision, dashed with the opposite forced ("+model+" cost model).")
			if err != nil {
				return nil, err
			}
			sec.Figures = append(sec.Figures, ref)
		}
		f, err := costFigure(name("migration-cost", s.Label), costs)
		if err != nil {
			return nil, err
		}
		ref, err := save(f, "The predicted cost model's cost of a move against the measured cost (the mean of every move of that "+
			"order in the sweep, whichever cost model decided it), by matrix order.")
		if err != nil {
			return nil, err
		}
		sec.Figures = append(sec.Figures, ref)
		out = append(out, sec)
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := writeMigrationCSV(filepath.Join(outDir, MigrationCSV), out); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, MigrationMD), []byte(migrationMarkdown(out)), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return out, nil
}

func costModelsOf(rows []MigrationRow) []string {
	var ms []string
	for _, r := range rows {
		if !slices.Contains(ms, r.CostModel) {
			ms = append(ms, r.CostModel)
		}
	}
	return ms
}

// execLoadFigure: execution time against load time, per order, the
// decision's run solid and the opposite's dashed, for one cost model.
func execLoadFigure(name, model string, rows []MigrationRow) (*figure, error) {
	f := newFigure(name, "Execution time against load time ("+model+" cost model)", "load from (s)", "execution time (s)")
	f.p.Y.Min = 0
	var orders []int
	for _, r := range rows {
		if r.CostModel == model && !slices.Contains(orders, r.Order) {
			orders = append(orders, r.Order)
		}
	}
	slices.Sort(orders)
	for i, n := range orders {
		var dec, opp plotter.XYs
		for _, r := range rows {
			if r.CostModel != model || r.Order != n || math.IsNaN(r.LoadS) {
				continue
			}
			if !math.IsNaN(r.ExecS) {
				dec = append(dec, plotter.XY{X: r.LoadS, Y: r.ExecS})
			}
			if !math.IsNaN(r.OppositeS) {
				opp = append(opp, plotter.XY{X: r.LoadS, Y: r.OppositeS})
			}
		}
		if err := f.addLine(fmt.Sprintf("%d: decision", n), dec, i, 0, 0, true, plotter.NoStep); err != nil {
			return nil, err
		}
		if err := f.addLine(fmt.Sprintf("%d: opposite forced", n), opp, i, 1, 1, true, plotter.NoStep); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// costFigure: the predicted model's cost and the mean measured cost by
// order.
func costFigure(name string, costs []MigrationCost) (*figure, error) {
	f := newFigure(name, "Predicted and measured cost of a move by matrix order", "matrix order", "cost (s)")
	f.p.Y.Min = 0
	var pred, meas plotter.XYs
	for _, c := range costs {
		if !math.IsNaN(c.PredictedS) {
			pred = append(pred, plotter.XY{X: float64(c.Order), Y: c.PredictedS})
		}
		if !math.IsNaN(c.MeasuredS) {
			meas = append(meas, plotter.XY{X: float64(c.Order), Y: c.MeasuredS})
		}
	}
	if err := f.addLine("predicted (predicted model)", pred, 0, 0, 0, true, plotter.NoStep); err != nil {
		return nil, err
	}
	if err := f.addLine("measured (mean)", meas, 1, 1, 1, true, plotter.NoStep); err != nil {
		return nil, err
	}
	return f, nil
}

// fmtS formats seconds with the given decimals, "-" for NaN.
func fmtS(v float64, decimals int) string {
	if math.IsNaN(v) {
		return NotApplicable
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

func writeMigrationCSV(path string, secs []migrationSection) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"sweep", "order", "load_s", "cost_model", "seed", "decision", "gain", "later_gain", "exec_s", "opposite_exec_s",
		"right", "predicted_cost_s", "measured_cost_s", "checksum", "fidelity", "opposite_fidelity", "mismatch", "cell", "opposite_cell"})
	g := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return num(math.Round(v*1000) / 1000)
	}
	for _, sec := range secs {
		for _, r := range sec.Rows {
			_ = w.Write([]string{r.Sweep, fmt.Sprint(r.Order), g(r.LoadS), r.CostModel, fmt.Sprint(r.Seed), r.Decision, g(r.Gain), g(r.Later),
				g(r.ExecS), g(r.OppositeS), r.Right, g(r.PredictedCostS), g(r.MeasuredCostS), r.Checksum, r.Fidelity, r.OppositeFidelity,
				fmt.Sprint(r.Mismatch), r.Cell, r.OppositeCell})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// migrationMarkdown is every migration sweep's two tables in Markdown.
func migrationMarkdown(secs []migrationSection) string {
	var b strings.Builder
	for i, sec := range secs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Sweep `%s`: %d runs, %d of them degraded; execution times and costs in scenario seconds.\n\n", sec.Label, sec.Runs, sec.Degraded)
		b.WriteString("| order | load at (s) | cost model | decision (gain) | exec with it | exec, opposite forced | right? | predicted cost | measured cost | checksum | degraded runs |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range sec.Rows {
			dec := r.DecisionText()
			if r.Mismatch {
				dec += " *"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Order, fmtS(r.LoadS, 0), r.CostModel, dec,
				fmtS(r.ExecS, 0), fmtS(r.OppositeS, 0), r.Right, fmtS(r.PredictedCostS, 1), fmtS(r.MeasuredCostS, 1), r.Checksum,
				cmp.Or(r.Degraded(), NotApplicable))
		}
		if sec.Mismatched() {
			b.WriteString("\n\\* the run with the opposite forced was answered otherwise (it asked at another time, or not at all).\n")
		}
		b.WriteString("\n| order | checkpoint (MB) | predicted cost (predicted model) | measured cost, mean (min-max) | moves | measured / predicted |\n")
		b.WriteString("|---|---|---|---|---|---|\n")
		for _, c := range sec.Costs {
			ratio := math.NaN()
			if !math.IsNaN(c.PredictedS) && !math.IsNaN(c.MeasuredS) && c.PredictedS > 0 {
				ratio = c.MeasuredS / c.PredictedS
			}
			fmt.Fprintf(&b, "| %d | %.0f | %s | %s (%s-%s) | %d | %s |\n", c.Order, float64(c.Bytes)/1e6, fmtS(c.PredictedS, 1),
				fmtS(c.MeasuredS, 1), fmtS(c.MinS, 1), fmtS(c.MaxS, 1), c.Moves, fmtS(ratio, 2))
		}
	}
	return b.String()
}
