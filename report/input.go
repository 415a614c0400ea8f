package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/sweep"
)

// Files a report reads.
const (
	ResultsJSON     = "results.json"
	JobsCSV         = "jobs.csv"
	EventsJSONL     = "events.jsonl"
	ManifestJSON    = "manifest.json"
	UtilizationCSV  = "utilization.csv"
	ResizesCSV      = "resizes.csv"
	StudyJSON       = "study.json"
	reasonUnplaced  = "placement tries exceeded the threshold" // the scheduler's ReasonTooManyTries
	statusCompleted = "completed"
)

// run is one run directory.
type run struct {
	Dir, Label   string
	Summary      results.Summary
	Jobs         []jobRow
	Interconnect string // see interconnectOf
	Util         []results.UtilSample
	Ops          []results.ResizeOp
	Malleable    bool // the series files were read
}

// jobRow is the part of a jobs.csv row the report uses.
type jobRow struct {
	ID, App                string
	Size, Clusters         int
	Wait, Response, Exec   float64
	Status, Reason         string
	Submit                 float64
	completed, unplaceable bool
}

// sweepInput is one sweep directory.
type sweepInput struct {
	Dir, Label string
	Axes       []string // in grid order
	Cells      []sweepCell
	NotDone    int // cells of the table that did not finish
}

// sweepCell is a finished cell with its run's summary: Dir is the cell's
// directory (its scenario.yaml), Results its run's results directory.
type sweepCell struct {
	ID           string
	Values       []sweep.Value
	Summary      results.Summary
	Dir, Results string
}

// studyRow is one row of study.json (study cluster-count).
type studyRow struct {
	Interconnect string   `json:"interconnect"`
	App          string   `json:"app"`
	Clusters     []string `json:"clusters"`
	ExecS        float64  `json:"exec_s"`
	Status       string   `json:"status"`
}

// studyInput is one study directory.
type studyInput struct {
	Dir  string
	Rows []studyRow
}

// inputs are everything read.
type inputs struct {
	Runs    []*run
	Sweeps  []*sweepInput
	Studies []*studyInput
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readInputs reads every input directory, telling runs, sweeps and studies
// apart by the files they hold.
func readInputs(dirs []string) (*inputs, error) {
	if len(dirs) == 0 {
		return nil, errors.New("report: no input directory given")
	}
	in := &inputs{}
	for _, d := range dirs {
		d = filepath.Clean(d)
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("report: input %s: %w", d, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("report: input %s is not a directory", d)
		}
		switch {
		case exists(filepath.Join(d, sweep.TableJSON)) || exists(filepath.Join(d, sweep.CellsDir)):
			s, err := readSweep(d)
			if err != nil {
				return nil, err
			}
			in.Sweeps = append(in.Sweeps, s)
		case exists(filepath.Join(d, StudyJSON)):
			s, err := readStudy(d)
			if err != nil {
				return nil, err
			}
			in.Studies = append(in.Studies, s)
		case exists(filepath.Join(d, ResultsJSON)) || exists(filepath.Join(d, JobsCSV)):
			r, err := readRun(d)
			if err != nil {
				return nil, err
			}
			in.Runs = append(in.Runs, r)
		default:
			return nil, fmt.Errorf("report: %s: missing %s: not a run directory (%s, %s), a sweep directory (%s) or a study directory (%s)",
				d, filepath.Join(d, ResultsJSON), ResultsJSON, JobsCSV, sweep.TableJSON, StudyJSON)
		}
	}
	labelRuns(in.Runs)
	labelSweeps(in.Sweeps)
	return in, nil
}

// labelRuns names runs by their directory's base name, or by the whole
// path when two share a base name.
func labelRuns(runs []*run) {
	n := map[string]int{}
	for _, r := range runs {
		n[filepath.Base(r.Dir)]++
	}
	for _, r := range runs {
		r.Label = filepath.Base(r.Dir)
		if n[r.Label] > 1 {
			r.Label = r.Dir
		}
	}
}

func labelSweeps(sw []*sweepInput) {
	n := map[string]int{}
	for _, s := range sw {
		n[filepath.Base(s.Dir)]++
	}
	for _, s := range sw {
		s.Label = filepath.Base(s.Dir)
		if n[s.Label] > 1 {
			s.Label = s.Dir
		}
	}
}

func readSummary(dir string) (results.Summary, error) {
	var s results.Summary
	p := filepath.Join(dir, ResultsJSON)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, fmt.Errorf("report: missing %s", p)
		}
		return s, fmt.Errorf("report: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("report: %s: %w", p, err)
	}
	return s, nil
}

// readRun reads a run directory: results.json and jobs.csv are required,
// manifest.json is optional, and utilization.csv and resizes.csv are
// required when results.json has a malleability section.
func readRun(dir string) (*run, error) {
	s, err := readSummary(dir)
	if err != nil {
		return nil, err
	}
	r := &run{Dir: dir, Summary: s}
	if r.Jobs, err = readJobs(filepath.Join(dir, JobsCSV)); err != nil {
		return nil, err
	}
	if r.Interconnect, err = interconnectOf(dir, s); err != nil {
		return nil, err
	}
	up, rp := filepath.Join(dir, UtilizationCSV), filepath.Join(dir, ResizesCSV)
	if s.Malleability != nil || exists(up) || exists(rp) {
		if r.Util, err = readUtil(up); err != nil {
			return nil, err
		}
		if r.Ops, err = readResizes(rp); err != nil {
			return nil, err
		}
		r.Malleable = true
	}
	return r, nil
}

// csvTable reads a CSV file with a header and returns its rows and a
// column lookup that fails naming the file and the column.
func csvTable(path string, need ...string) ([][]string, map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("report: missing %s", path)
		}
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("report: %s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("report: %s: empty (no header)", path)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, nil, fmt.Errorf("report: %s: no column %q", path, n)
		}
	}
	return rows[1:], col, nil
}

// field parses a number of a CSV row; empty is -1 (never happened).
func field(path string, line int, name, v string) (float64, error) {
	if v == "" {
		return -1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("report: %s line %d: %s: %w", path, line, name, err)
	}
	return f, nil
}

func readJobs(path string) ([]jobRow, error) {
	need := []string{"id", "application", "clusters", "submit_s", "wait_s", "exec_s", "response_s", "status", "reason", "size"}
	rows, col, err := csvTable(path, need...)
	if err != nil {
		return nil, err
	}
	out := make([]jobRow, 0, len(rows))
	for i, rec := range rows {
		line := i + 2
		if len(rec) != len(col) {
			return nil, fmt.Errorf("report: %s line %d: %d fields, header has %d", path, line, len(rec), len(col))
		}
		j := jobRow{ID: rec[col["id"]], App: rec[col["application"]], Status: rec[col["status"]], Reason: rec[col["reason"]]}
		c, err := strconv.Atoi(rec[col["clusters"]])
		if err != nil {
			return nil, fmt.Errorf("report: %s line %d: clusters: %w", path, line, err)
		}
		j.Clusters = c
		if j.Size, err = strconv.Atoi(rec[col["size"]]); err != nil {
			return nil, fmt.Errorf("report: %s line %d: size: %w", path, line, err)
		}
		for _, f := range []struct {
			name string
			dst  *float64
		}{{"submit_s", &j.Submit}, {"wait_s", &j.Wait}, {"exec_s", &j.Exec}, {"response_s", &j.Response}} {
			if *f.dst, err = field(path, line, f.name, rec[col[f.name]]); err != nil {
				return nil, err
			}
		}
		j.completed = j.Status == statusCompleted
		j.unplaceable = j.Status != statusCompleted && strings.HasPrefix(j.Reason, reasonUnplaced)
		out = append(out, j)
	}
	return out, nil
}

func readUtil(path string) ([]results.UtilSample, error) {
	rows, col, err := csvTable(path, "t_s", "cluster", "capacity", "local", "koala")
	if err != nil {
		return nil, err
	}
	out := make([]results.UtilSample, 0, len(rows))
	for i, rec := range rows {
		u := results.UtilSample{Cluster: rec[col["cluster"]]}
		for _, f := range []struct {
			name string
			dst  *float64
		}{{"t_s", &u.T}, {"capacity", &u.Capacity}, {"local", &u.Local}, {"koala", &u.Koala}} {
			if *f.dst, err = field(path, i+2, f.name, rec[col[f.name]]); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func readResizes(path string) ([]results.ResizeOp, error) {
	rows, col, err := csvTable(path, "t_s", "job", "op", "mandatory")
	if err != nil {
		return nil, err
	}
	out := make([]results.ResizeOp, 0, len(rows))
	for i, rec := range rows {
		o := results.ResizeOp{Job: rec[col["job"]], Op: rec[col["op"]], Mandatory: rec[col["mandatory"]] == "true"}
		if o.T, err = field(path, i+2, "t_s", rec[col["t_s"]]); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// manifest is the part of manifest.json the report uses.
type manifest struct {
	Entries []struct {
		Src       string `json:"src"`
		Dst       string `json:"dst"`
		Requested struct {
			BandwidthMBps float64 `json:"bandwidth_mbps"`
			Unavailable   bool    `json:"unavailable"`
		} `json:"requested"`
	} `json:"entries"`
}

// interconnectOf names a run's interconnect: its scenario, then the range
// of the requested bandwidths of its inter-cluster links (manifest.json,
// unavailable pairs left out). Without a manifest, the scenario alone.
func interconnectOf(dir string, s results.Summary) (string, error) {
	name := s.Scenario
	if name == "" {
		name = "run"
	}
	p := filepath.Join(dir, ManifestJSON)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return name, nil
	}
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("report: %s: %w", p, err)
	}
	lo, hi := -1.0, -1.0
	for _, e := range m.Entries {
		bw := e.Requested.BandwidthMBps
		if e.Src == e.Dst || e.Requested.Unavailable || bw <= 0 {
			continue
		}
		if lo < 0 || bw < lo {
			lo = bw
		}
		if bw > hi {
			hi = bw
		}
	}
	switch {
	case lo < 0:
		return name, nil
	case lo == hi:
		return fmt.Sprintf("%s (links %s MB/s)", name, num(lo)), nil
	default:
		return fmt.Sprintf("%s (links %s-%s MB/s)", name, num(lo), num(hi)), nil
	}
}

// num formats a number without needless decimals.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// sweepTable is the part of sweep.json the report uses.
type sweepTable struct {
	Columns []string         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
}

// marker is the part of a cell's cell.json the report uses.
type marker struct {
	ID        string        `json:"id"`
	Values    []sweep.Value `json:"values"`
	Completed bool          `json:"completed"`
}

// readSweep reads a sweep directory: sweep.json gives the axes and each
// cell's status; every finished cell's directory (cells/<dir>, found by
// its cell.json) must hold results.json, directly or in its one
// sub-directory that has one.
func readSweep(dir string) (*sweepInput, error) {
	tp := filepath.Join(dir, sweep.TableJSON)
	b, err := os.ReadFile(tp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("report: missing %s", tp)
		}
		return nil, fmt.Errorf("report: %w", err)
	}
	var t sweepTable
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("report: %s: %w", tp, err)
	}
	s := &sweepInput{Dir: dir}
	// The axes are the columns between "cell" and "status".
	for i, c := range t.Columns {
		if c == "status" {
			break
		}
		if i > 0 {
			s.Axes = append(s.Axes, c)
		}
	}
	done := map[string]bool{}
	rowIndex := map[string]int{}
	for i, r := range t.Rows {
		id, _ := r["cell"].(string)
		rowIndex[id] = i
		if st, _ := r["status"].(string); st == sweep.StatusDone {
			done[id] = true
		} else {
			s.NotDone++
		}
	}
	cellsDir := filepath.Join(dir, sweep.CellsDir)
	entries, err := os.ReadDir(cellsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("report: %w", err)
	}
	found := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cd := filepath.Join(cellsDir, e.Name())
		mp := filepath.Join(cd, sweep.MarkerFile)
		mb, err := os.ReadFile(mp)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not finished
		}
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		var m marker
		if err := json.Unmarshal(mb, &m); err != nil {
			return nil, fmt.Errorf("report: %s: %w", mp, err)
		}
		if !m.Completed || !done[m.ID] {
			continue
		}
		rd, err := cellResults(cd)
		if err != nil {
			return nil, err
		}
		sum, err := readSummary(rd)
		if err != nil {
			return nil, err
		}
		found[m.ID] = true
		s.Cells = append(s.Cells, sweepCell{ID: m.ID, Values: m.Values, Summary: sum, Dir: cd, Results: rd})
	}
	var missing []string
	for id := range done {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("report: %s: %d cells marked done in %s have no directory with %s under %s (first: %s)",
			dir, len(missing), sweep.TableJSON, sweep.MarkerFile, cellsDir, missing[0])
	}
	// Grid order, as in sweep.json.
	sort.Slice(s.Cells, func(i, j int) bool { return rowIndex[s.Cells[i].ID] < rowIndex[s.Cells[j].ID] })
	return s, nil
}

// cellResults is the directory of a cell's run: the cell's own directory
// when it holds results.json, else its one sub-directory that does.
func cellResults(cd string) (string, error) {
	if exists(filepath.Join(cd, ResultsJSON)) {
		return cd, nil
	}
	entries, err := os.ReadDir(cd)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && exists(filepath.Join(cd, e.Name(), ResultsJSON)) {
			dirs = append(dirs, filepath.Join(cd, e.Name()))
		}
	}
	if len(dirs) == 1 {
		return dirs[0], nil
	}
	return "", fmt.Errorf("report: missing %s (a finished sweep cell holds its run's results)", filepath.Join(cd, ResultsJSON))
}

// readStudy reads study.json: a list of rows, or the object study
// cluster-count --json prints ({"rows": [...]}).
func readStudy(dir string) (*studyInput, error) {
	p := filepath.Join(dir, StudyJSON)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	s := &studyInput{Dir: dir}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var o struct {
			Rows []studyRow `json:"rows"`
		}
		err = json.Unmarshal(b, &o)
		s.Rows = o.Rows
	} else {
		err = json.Unmarshal(b, &s.Rows)
	}
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", p, err)
	}
	return s, nil
}
