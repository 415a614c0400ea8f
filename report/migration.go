package report

// This file is a migration sweep's section (SPEC §6): for every matrix
// order, load time and cost model of the sweep, the rescheduler's
// decision, the job's execution with it and with the opposite forced,
// whether the decision was right, the move's predicted and measured cost
// and its checksum; the predicted cost against the measured one by order;
// execution time against load time.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
	"github.com/koala-emu/koala-emu/sweep"
)

// Files Write creates for migration sweeps: their tables as CSV, and in
// Markdown as docs/migration.md shows them.
const (
	MigrationCSV = "migration.csv"
	MigrationMD  = "migration.md"
)

// Values of MigrationRow's Decision, Right and Checksum.
const (
	DecisionMigrate = "migrate"
	DecisionStay    = "stay"
	DecisionNone    = "none" // the job ended before its contract monitor asked
	RightYes        = "yes"
	RightNo         = "no"
	NotApplicable   = "-"
	ChecksumEqual   = "equal"
	ChecksumDiffer  = "differ"
)

// MigrationRow is one (order, load time, cost model, seed) of a migration
// sweep: the run with the rescheduler's decision beside the run with the
// opposite forced (policy.migration.force: opposite).
type MigrationRow struct {
	Sweep     string
	Order     int
	LoadS     float64 // when the load came (scenario s); NaN without a load fault
	CostModel string
	Seed      int64
	// Decision is the rescheduler's first answer in the run with its
	// decision (DecisionMigrate, DecisionStay or DecisionNone), Gain its
	// gain; Later is the gain of a later answer that moved the job after a
	// first "stay" (NaN: none did).
	Decision    string
	Gain, Later float64
	// ExecS and OppositeS are the qr job's execution times (s) in the run
	// with the decision and in the run with the opposite forced; NaN when
	// the run is missing or the job did not complete.
	ExecS, OppositeS float64
	// Right is RightYes when the decision's execution is not above the
	// opposite's, RightNo when it is, NotApplicable without a decision or
	// either execution.
	Right string
	// PredictedCostS is the first answer's predicted cost; MeasuredCostS
	// the measured cost of the move made on it, in whichever run moved;
	// NaN when there is none.
	PredictedCostS, MeasuredCostS float64
	// Checksum compares the matrix checksum of the run that moved with the
	// run that did not: ChecksumEqual, ChecksumDiffer, or NotApplicable
	// unless exactly one of them moved.
	Checksum string
	// Fidelity and OppositeFidelity are the two runs' verdicts.
	Fidelity, OppositeFidelity string
	// Cell and OppositeCell are the runs' cell IDs ("" when missing).
	Cell, OppositeCell string
	// Mismatch: the two runs' rescheduler did not answer alike (one asked
	// and the other not, or the opposite run's forced answer is not the
	// inverse of this run's).
	Mismatch bool
}

// Degraded says which of the pair's runs the host did not keep up with:
// "", "both", "decision" or "opposite".
func (r MigrationRow) Degraded() string {
	a, b := r.Fidelity == fidelity.Degraded, r.OppositeFidelity == fidelity.Degraded
	switch {
	case a && b:
		return "both"
	case a:
		return "decision"
	case b:
		return "opposite"
	}
	return ""
}

// DecisionText is the decision with its gain, as the tables show it.
func (r MigrationRow) DecisionText() string {
	if r.Decision == DecisionNone {
		return "none: no request"
	}
	s := fmt.Sprintf("%s (%.2f)", r.Decision, r.Gain)
	if !math.IsNaN(r.Later) {
		s += fmt.Sprintf(", then migrate (%.2f)", r.Later)
	}
	return s
}

// MigrationCost is the predicted against the measured cost of one
// order's moves in a migration sweep.
type MigrationCost struct {
	Order int
	// Bytes is the checkpoint: the matrix and its right-hand side, n (n+1)
	// elements of 8 bytes.
	Bytes int64
	// PredictedS is the predicted cost model's cost (the mean over its
	// decisions; NaN without one); MeasuredS, MinS and MaxS are over every
	// move of that order in the sweep, Moves of them.
	PredictedS, MeasuredS, MinS, MaxS float64
	Moves                             int
}

// migrationSection is one migration sweep as the page shows it.
type migrationSection struct {
	Label    string
	Rows     []MigrationRow
	Costs    []MigrationCost
	Figures  []*figRef
	Runs     int // runs read
	Degraded int // of which degraded
	NotDone  int // cells of the sweep that did not finish
}

// Mismatched: some row's two runs were answered otherwise.
func (m migrationSection) Mismatched() bool {
	return slices.ContainsFunc(m.Rows, func(r MigrationRow) bool { return r.Mismatch })
}

// isMigrationSweep: every finished cell ran with policy.migration.
func isMigrationSweep(s *sweepInput) bool {
	for _, c := range s.Cells {
		if c.Summary.Migrations == nil {
			return false
		}
	}
	return len(s.Cells) > 0
}

// migCell is what the table takes from one run of a migration sweep.
type migCell struct {
	id        string
	order     int
	loadS     float64
	cost      string
	seed      int64
	opposite  bool
	decisions []migDecision // the qr job's, in order
	execS     float64
	moves     []results.Migration // the qr job's
	checksum  float64
	hasSum    bool
	verdict   string
}

type migDecision struct {
	migrate     bool
	gain, costS float64
}

// readMigCell reads one finished cell: its scenario (the qr job's order,
// the load's time, the cost model, whether the decision is forced
// opposite), jobs.csv (the qr job's execution), events.jsonl (the
// rescheduler's answers to it, its checksum) and its summary (the moves,
// the fidelity verdict).
func readMigCell(c sweepCell) (*migCell, error) {
	path := filepath.Join(c.Dir, sweep.ScenarioYML)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	sc, err := scenarios.Parse(data, path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	mc := &migCell{id: c.ID, loadS: math.NaN(), execS: math.NaN(), seed: 1, verdict: "not measured", cost: scenarios.DefaultCostModel}
	if mc.order, err = qrOrder(sc); err != nil {
		return nil, fmt.Errorf("report: %s: %w", path, err)
	}
	for _, f := range sc.Faults {
		if f.Kind == "load" && f.AtS != nil {
			mc.loadS = *f.AtS
			break
		}
	}
	if m := sc.Policy.Migration; m != nil {
		mc.cost = cmp.Or(m.CostModel, mc.cost)
		mc.opposite = m.Force == scenarios.ForceOpposite
	}
	if sc.Seed != nil {
		mc.seed = *sc.Seed
	}
	if f := c.Summary.Fidelity; f != nil {
		mc.verdict = f.Verdict
	}
	jobs, err := readJobs(filepath.Join(c.Results, JobsCSV))
	if err != nil {
		return nil, err
	}
	id := ""
	for _, j := range jobs {
		if j.App == "qr" {
			id = j.ID
			if j.completed {
				mc.execS = j.Exec
			}
			break
		}
	}
	if id == "" {
		return nil, fmt.Errorf("report: %s: no qr job", filepath.Join(c.Results, JobsCSV))
	}
	for _, m := range c.Summary.Migrations.Moves {
		if m.Job == id {
			mc.moves = append(mc.moves, m)
		}
	}
	return mc, readMigEvents(filepath.Join(c.Results, EventsJSONL), id, mc)
}

// qrOrder is the order n of the scenario's first qr job (its args, over
// the workload's when it runs the workload's application, over the
// application's default).
func qrOrder(sc *scenarios.Scenario) (int, error) {
	for _, j := range sc.Workload.Jobs {
		app := cmp.Or(j.Application, sc.Workload.Application)
		if app != "qr" {
			continue
		}
		n := apps.QR{}.Args()["n"]
		if v, ok := sc.Workload.Args["n"]; ok && app == sc.Workload.Application {
			n = v
		}
		if v, ok := j.Args["n"]; ok {
			n = v
		}
		return int(n), nil
	}
	return 0, errors.New("workload.jobs: no qr job (a migration sweep's table is of a qr job)")
}

// migEvent is the part of an events.jsonl line the table reads.
type migEvent struct {
	Kind    string   `json:"kind"`
	Job     string   `json:"job"`
	Migrate string   `json:"migrate"`
	Gain    float64  `json:"gain"`
	CostS   float64  `json:"cost_s"`
	Value   *float64 `json:"value"`
}

// readMigEvents takes job id's migration decisions and end value (the
// matrix checksum) from a run's events.jsonl.
func readMigEvents(path, id string, mc *migCell) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("report: missing %s", path)
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		var e migEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("report: %s line %d: %w", path, line, err)
		}
		if e.Job != id {
			continue
		}
		switch e.Kind {
		case msg.EventMigrationDecision:
			mc.decisions = append(mc.decisions, migDecision{migrate: e.Migrate == "true", gain: e.Gain, costS: e.CostS})
		case msg.EventEnd:
			if e.Value != nil {
				mc.checksum, mc.hasSum = *e.Value, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return nil
}

// migrationTable pairs a migration sweep's runs by order, load time, cost
// model and seed (the run with the decision and the one with the opposite
// forced) into rows, sorted by cost model, order and load time, and the
// costs by order.
func migrationTable(s *sweepInput) ([]MigrationRow, []MigrationCost, error) {
	type key struct {
		order int
		load  string
		cost  string
		seed  int64
	}
	type pair struct{ rule, opp *migCell }
	pairs := map[key]*pair{}
	var keys []key
	for _, c := range s.Cells {
		mc, err := readMigCell(c)
		if err != nil {
			return nil, nil, err
		}
		k := key{mc.order, strconv.FormatFloat(mc.loadS, 'f', -1, 64), mc.cost, mc.seed}
		p := pairs[k]
		if p == nil {
			p = &pair{}
			pairs[k] = p
			keys = append(keys, k)
		}
		slot := &p.rule
		if mc.opposite {
			slot = &p.opp
		}
		if *slot != nil {
			return nil, nil, fmt.Errorf("report: %s: cells %s and %s are the same run (order %d, load at %s s, cost model %s, seed %d, forced %v)",
				s.Dir, (*slot).id, mc.id, k.order, k.load, k.cost, k.seed, mc.opposite)
		}
		*slot = mc
	}
	rows := make([]MigrationRow, 0, len(keys))
	for _, k := range keys {
		r := migrationRow(pairs[k].rule, pairs[k].opp)
		r.Sweep = s.Label
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b MigrationRow) int {
		return cmp.Or(cmp.Compare(a.CostModel, b.CostModel), cmp.Compare(a.Order, b.Order), cmp.Compare(a.LoadS, b.LoadS),
			cmp.Compare(a.Seed, b.Seed))
	})
	var cells []*migCell
	for _, k := range keys {
		for _, c := range []*migCell{pairs[k].rule, pairs[k].opp} {
			if c != nil {
				cells = append(cells, c)
			}
		}
	}
	return rows, migrationCosts(rows, cells), nil
}

// migrationRow is one pair's row; either run may be missing (nil).
func migrationRow(rule, opp *migCell) MigrationRow {
	one := cmp.Or(rule, opp)
	r := MigrationRow{Order: one.order, LoadS: one.loadS, CostModel: one.cost, Seed: one.seed, Decision: DecisionNone,
		Gain: math.NaN(), Later: math.NaN(), ExecS: math.NaN(), OppositeS: math.NaN(), Right: NotApplicable,
		PredictedCostS: math.NaN(), MeasuredCostS: math.NaN(), Checksum: NotApplicable}
	if rule != nil {
		r.Cell, r.ExecS, r.Fidelity = rule.id, rule.execS, rule.verdict
		if len(rule.decisions) > 0 {
			d := rule.decisions[0]
			r.Decision, r.Gain, r.PredictedCostS = DecisionStay, d.gain, d.costS
			if d.migrate {
				r.Decision = DecisionMigrate
			}
		}
	}
	if opp != nil {
		r.OppositeCell, r.OppositeS, r.OppositeFidelity = opp.id, opp.execS, opp.verdict
	}
	if rule != nil && opp != nil {
		decided, oppDecided := len(rule.decisions) > 0, len(opp.decisions) > 0
		r.Mismatch = decided != oppDecided || decided && rule.decisions[0].migrate == opp.decisions[0].migrate
	}
	if r.Decision != DecisionNone && !math.IsNaN(r.ExecS) && !math.IsNaN(r.OppositeS) {
		r.Right = RightNo
		if r.ExecS <= r.OppositeS {
			r.Right = RightYes
		}
	}
	// The move made on the first answer: the decision's run's when it
	// migrates, the opposite run's when it stays; and a later move of the
	// decision's run after a first "stay".
	switch {
	case r.Decision == DecisionMigrate && len(rule.moves) > 0:
		r.MeasuredCostS = rule.moves[0].MeasuredCostS
	case r.Decision == DecisionStay && opp != nil && len(opp.moves) > 0:
		r.MeasuredCostS = opp.moves[0].MeasuredCostS
	}
	if r.Decision == DecisionStay && len(rule.moves) > 0 {
		for _, d := range rule.decisions[1:] {
			if d.migrate {
				r.Later = d.gain
				break
			}
		}
	}
	if rule != nil && opp != nil && (len(rule.moves) > 0) != (len(opp.moves) > 0) && rule.hasSum && opp.hasSum {
		r.Checksum = ChecksumDiffer
		if rule.checksum == opp.checksum {
			r.Checksum = ChecksumEqual
		}
	}
	return r
}

// migrationCosts is, by order, the predicted cost model's cost and every
// measured move's.
func migrationCosts(rows []MigrationRow, cells []*migCell) []MigrationCost {
	by := map[int]*MigrationCost{}
	var orders []int
	get := func(n int) *MigrationCost {
		if c := by[n]; c != nil {
			return c
		}
		c := &MigrationCost{Order: n, Bytes: int64(n) * int64(n+1) * 8, PredictedS: math.NaN(), MeasuredS: math.NaN(),
			MinS: math.NaN(), MaxS: math.NaN()}
		by[n] = c
		orders = append(orders, n)
		return c
	}
	pred := map[int][]float64{}
	for _, r := range rows {
		get(r.Order)
		if r.CostModel == "predicted" && !math.IsNaN(r.PredictedCostS) {
			pred[r.Order] = append(pred[r.Order], r.PredictedCostS)
		}
	}
	meas := map[int][]float64{}
	for _, c := range cells {
		for _, m := range c.moves {
			meas[c.order] = append(meas[c.order], m.MeasuredCostS)
		}
	}
	slices.Sort(orders)
	out := make([]MigrationCost, 0, len(orders))
	for _, n := range orders {
		c := by[n]
		if len(pred[n]) > 0 {
			c.PredictedS = mean(pred[n])
		}
		if ms := meas[n]; len(ms) > 0 {
			c.Moves, c.MeasuredS, c.MinS, c.MaxS = len(ms), mean(ms), slices.Min(ms), slices.Max(ms)
		}
		out = append(out, *c)
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
