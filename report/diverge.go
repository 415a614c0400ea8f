package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// SimBackend is the backend name a simulated run records in results.json.
const SimBackend = "sim"

// DivergenceCSV is the per-job table the diverge command writes.
const DivergenceCSV = "divergence.csv"

// Divergence is a simulated run set beside an emulated run of the same
// scenario, seed and plan: per job and in aggregate, each figure on both
// backends and the difference (emulated minus simulated).
type Divergence struct {
	Sim        string `json:"sim"`
	Emu        string `json:"emu"`
	EmuBackend string `json:"emu_backend"`
	Scenario   string `json:"scenario"`
	Seed       int64  `json:"seed"`
	Policy     string `json:"policy"`
	// EmuFidelity is the emulated run's fidelity verdict ("" when it has
	// none).
	EmuFidelity string `json:"emu_fidelity"`
	// Aggregates are the runs' summary figures, in a fixed order.
	Aggregates []AggregateDiff `json:"aggregates"`
	// Largest is the aggregate whose relative difference is the largest
	// in magnitude ("" when none has one).
	Largest string `json:"largest"`
	// Jobs are every job, in the simulated run's order.
	Jobs []JobDiff `json:"jobs"`
	// Both is the number of jobs completed on both backends (those with
	// differences).
	Both int `json:"both_completed"`
	// MeanAbsResponseS is the mean |response difference| over them.
	MeanAbsResponseS float64 `json:"mean_abs_response_diff_s"`
}

// AggregateDiff is one summary figure on both backends.
type AggregateDiff struct {
	Name string  `json:"name"`
	Unit string  `json:"unit"`
	Sim  float64 `json:"sim"`
	Emu  float64 `json:"emu"`
	Diff float64 `json:"diff"`
	// Rel is Diff / Sim; absent when Sim is 0.
	Rel *float64 `json:"rel,omitempty"`
}

// JobTimes are one job's times on one backend, in scenario seconds.
type JobTimes struct {
	Status    string  `json:"status"`
	WaitS     float64 `json:"wait_s"`
	ExecS     float64 `json:"exec_s"`
	ResponseS float64 `json:"response_s"`
}

// JobDiff is one job on both backends. Diff is set only when the job
// completed on both.
type JobDiff struct {
	ID   string    `json:"id"`
	App  string    `json:"application"`
	Size int       `json:"size"`
	Sim  JobTimes  `json:"sim"`
	Emu  JobTimes  `json:"emu"`
	Diff *JobTimes `json:"diff,omitempty"`
	// RelResponse is the response difference over the simulated response;
	// absent without Diff or when that response is 0.
	RelResponse *float64 `json:"rel_response,omitempty"`
}

// Aggregate names, in the order Divergence.Aggregates lists them.
const (
	AggAJRT        = "ajrt"
	AggWait        = "avg_wait"
	AggExec        = "avg_exec"
	AggNetUtil     = "net_utilization"
	AggObsUtil     = "observed_utilization"
	AggCoallocated = "coallocated"
	AggCompleted   = "completed"
	AggFailed      = "failed"
)

// Diverge reads a simulated run directory and an emulated one and sets
// them side by side. It fails when a directory is not a run, when the
// first is not a sim run or the second is one, or when the two are not of
// the same scenario, seed and plan (the error names the field).
func Diverge(simDir, emuDir string) (*Divergence, error) {
	sim, err := readRunDir(simDir)
	if err != nil {
		return nil, err
	}
	emu, err := readRunDir(emuDir)
	if err != nil {
		return nil, err
	}
	return diverge(sim, emu)
}

// readRunDir reads a run directory through readRun, saying so when dir is
// not one.
func readRunDir(dir string) (*run, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("report: %s is not a directory", dir)
	}
	if !exists(filepath.Join(dir, ResultsJSON)) {
		return nil, fmt.Errorf("report: %s is not a run directory: no %s", dir, ResultsJSON)
	}
	return readRun(filepath.Clean(dir))
}

// simAndEmu orders two runs as (simulated, emulated) when exactly one of
// them is a sim run.
func simAndEmu(a, b *run) (*run, *run, bool) {
	switch sa, sb := a.Summary.Backend == SimBackend, b.Summary.Backend == SimBackend; {
	case sa && !sb:
		return a, b, true
	case sb && !sa:
		return b, a, true
	}
	return nil, nil, false
}

// samePlan fails, naming the first field that differs, when two runs are
// not of the same scenario, seed and plan: the fields of results.json that
// describe the plan, then the jobs of jobs.csv (the same IDs, each with the
// same application and size).
func samePlan(sim, emu *run) error {
	s, e := sim.Summary, emu.Summary
	for _, f := range []struct {
		name     string
		sim, emu any
	}{
		{"scenario", s.Scenario, e.Scenario},
		{"seed", s.Seed, e.Seed},
		{"policy", s.Policy, e.Policy},
		{"total_nodes", s.TotalNodes, e.TotalNodes},
		{"workload_duration_s", s.DurationS, e.DurationS},
		{"target_net_utilization_pct", s.TargetNetUtilizationPct, e.TargetNetUtilizationPct},
		{"jobs.submitted", s.Jobs.Submitted, e.Jobs.Submitted},
	} {
		if f.sim != f.emu {
			return fmt.Errorf("report: %s and %s are not runs of the same plan: %s %s differs: %v against %v",
				sim.Dir, emu.Dir, ResultsJSON, f.name, f.sim, f.emu)
		}
	}
	byID := make(map[string]*jobRow, len(emu.Jobs))
	for i := range emu.Jobs {
		byID[emu.Jobs[i].ID] = &emu.Jobs[i]
	}
	seen := make(map[string]bool, len(sim.Jobs))
	for _, j := range sim.Jobs {
		seen[j.ID] = true
		o, ok := byID[j.ID]
		switch {
		case !ok:
			return fmt.Errorf("report: %s and %s are not runs of the same plan: job %s is in %s only", sim.Dir, emu.Dir, j.ID, sim.Dir)
		case o.App != j.App:
			return fmt.Errorf("report: %s and %s are not runs of the same plan: job %s application differs: %s against %s", sim.Dir, emu.Dir, j.ID, j.App, o.App)
		case o.Size != j.Size:
			return fmt.Errorf("report: %s and %s are not runs of the same plan: job %s size differs: %d against %d", sim.Dir, emu.Dir, j.ID, j.Size, o.Size)
		}
	}
	for _, j := range emu.Jobs {
		if !seen[j.ID] {
			return fmt.Errorf("report: %s and %s are not runs of the same plan: job %s is in %s only", sim.Dir, emu.Dir, j.ID, emu.Dir)
		}
	}
	return nil
}

// diverge computes the divergence of two runs read.
func diverge(sim, emu *run) (*Divergence, error) {
	if b := sim.Summary.Backend; b != SimBackend {
		return nil, fmt.Errorf("report: %s is not a simulated run: %s backend is %q, want %q", sim.Dir, ResultsJSON, b, SimBackend)
	}
	if b := emu.Summary.Backend; b == SimBackend {
		return nil, fmt.Errorf("report: %s is not an emulated run: %s backend is %q", emu.Dir, ResultsJSON, b)
	}
	if err := samePlan(sim, emu); err != nil {
		return nil, err
	}
	s, e := sim.Summary, emu.Summary
	d := &Divergence{Sim: sim.Dir, Emu: emu.Dir, EmuBackend: e.Backend, Scenario: s.Scenario, Seed: s.Seed, Policy: s.Policy}
	if e.Fidelity != nil {
		d.EmuFidelity = e.Fidelity.Verdict
	}
	for _, a := range []struct {
		name, unit string
		sim, emu   float64
	}{
		{AggAJRT, "s", s.AJRTS, e.AJRTS},
		{AggWait, "s", s.AvgWaitS, e.AvgWaitS},
		{AggExec, "s", s.AvgExecS, e.AvgExecS},
		{AggNetUtil, "%", s.NetUtilizationPct, e.NetUtilizationPct},
		{AggObsUtil, "%", s.ObservedUtilizationPct, e.ObservedUtilizationPct},
		{AggCoallocated, "%", s.CoallocatedPct, e.CoallocatedPct},
		{AggCompleted, "jobs", float64(s.Jobs.Completed), float64(e.Jobs.Completed)},
		{AggFailed, "jobs", float64(s.Jobs.Failed), float64(e.Jobs.Failed)},
	} {
		d.Aggregates = append(d.Aggregates, AggregateDiff{Name: a.name, Unit: a.unit, Sim: a.sim, Emu: a.emu, Diff: a.emu - a.sim, Rel: rel(a.emu-a.sim, a.sim)})
	}
	largest := 0.0
	for _, a := range d.Aggregates {
		if a.Rel != nil && math.Abs(*a.Rel) > largest {
			largest, d.Largest = math.Abs(*a.Rel), a.Name
		}
	}
	byID := make(map[string]jobRow, len(emu.Jobs))
	for _, j := range emu.Jobs {
		byID[j.ID] = j
	}
	sumAbs := 0.0
	for _, j := range sim.Jobs {
		o := byID[j.ID]
		jd := JobDiff{ID: j.ID, App: j.App, Size: j.Size, Sim: times(j), Emu: times(o)}
		if j.completed && o.completed {
			jd.Diff = &JobTimes{Status: statusCompleted, WaitS: o.Wait - j.Wait, ExecS: o.Exec - j.Exec, ResponseS: o.Response - j.Response}
			jd.RelResponse = rel(jd.Diff.ResponseS, j.Response)
			d.Both++
			sumAbs += math.Abs(jd.Diff.ResponseS)
		}
		d.Jobs = append(d.Jobs, jd)
	}
	if d.Both > 0 {
		d.MeanAbsResponseS = sumAbs / float64(d.Both)
	}
	return d, nil
}

func times(j jobRow) JobTimes {
	return JobTimes{Status: j.Status, WaitS: j.Wait, ExecS: j.Exec, ResponseS: j.Response}
}

// rel is diff / base, nil when base is 0.
func rel(diff, base float64) *float64 {
	if base == 0 {
		return nil
	}
	r := diff / base
	return &r
}

// Aggregate is the aggregate of that name, nil when there is none.
func (d *Divergence) Aggregate(name string) *AggregateDiff {
	for i := range d.Aggregates {
		if d.Aggregates[i].Name == name {
			return &d.Aggregates[i]
		}
	}
	return nil
}

// Top is the n jobs completed on both backends with the largest
// |response difference|, largest first (ties by ID); all of them when n
// is 0 or more than there are.
func (d *Divergence) Top(n int) []JobDiff {
	var out []JobDiff
	for _, j := range d.Jobs {
		if j.Diff != nil {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		da, db := math.Abs(out[a].Diff.ResponseS), math.Abs(out[b].Diff.ResponseS)
		if da != db {
			return da > db
		}
		return out[a].ID < out[b].ID
	})
	if n > 0 && n < len(out) {
		out = out[:n]
	}
	return out
}

// DivergenceColumns are the columns of WriteCSV.
var DivergenceColumns = []string{"id", "application", "size", "status_sim", "status_emu",
	"wait_sim_s", "wait_emu_s", "wait_diff_s", "exec_sim_s", "exec_emu_s", "exec_diff_s",
	"response_sim_s", "response_emu_s", "response_diff_s", "response_rel"}

// WriteCSV writes the per-job table: one row per job, the differences
// empty for a job that did not complete on both backends.
func (d *Divergence) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(DivergenceColumns); err != nil {
		return err
	}
	for _, j := range d.Jobs {
		if err := cw.Write(j.Row()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Row is the job's row of the per-job table, in DivergenceColumns' order;
// a time that never happened (a job that did not start) is empty.
func (j JobDiff) Row() []string {
	d := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	f := func(v float64) string {
		if v < 0 { // never happened (readJobs reads an empty field as -1)
			return ""
		}
		return d(v)
	}
	var dw, de, dr, rr string
	if j.Diff != nil {
		dw, de, dr = d(j.Diff.WaitS), d(j.Diff.ExecS), d(j.Diff.ResponseS)
	}
	if j.RelResponse != nil {
		rr = strconv.FormatFloat(*j.RelResponse, 'f', 4, 64)
	}
	return []string{j.ID, j.App, strconv.Itoa(j.Size), j.Sim.Status, j.Emu.Status,
		f(j.Sim.WaitS), f(j.Emu.WaitS), dw, f(j.Sim.ExecS), f(j.Emu.ExecS), de,
		f(j.Sim.ResponseS), f(j.Emu.ResponseS), dr, rr}
}
