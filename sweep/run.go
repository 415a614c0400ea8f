package sweep

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/internal/pool"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Row is a cell's metrics (AJRT, utilisation, ...): numbers, strings or
// booleans, one table column each.
type Row map[string]any

// RunCell runs one cell with its results in dir (an empty directory that
// already holds scenario.yaml, the cell's scenario) and returns its
// metrics. It must return soon after ctx ends.
type RunCell func(ctx context.Context, cell Cell, dir string) (Row, error)

// Options of Run.
type Options struct {
	// Dir is the sweep's output directory (required): cells/<cell dir>/,
	// sweep.csv and sweep.json.
	Dir string
	// Parallel overrides the sweep's parallel when > 0.
	Parallel int
	// Progress receives a line per started and finished cell (nil: none).
	Progress io.Writer
	// Env, when set, validates every cell's scenario before any runs.
	Env *scenarios.Env
}

// Files of a sweep directory.
const (
	CellsDir    = "cells"
	MarkerFile  = "cell.json" // in a cell's directory once it succeeded
	ScenarioYML = "scenario.yaml"
	TableCSV    = "sweep.csv"
	TableJSON   = "sweep.json"
)

// Cell statuses in the table.
const (
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusPending = "pending" // not run (the sweep was interrupted)
)

// CellResult is one cell's outcome.
type CellResult struct {
	Cell   Cell
	Status string
	// Resumed: the cell was finished by an earlier run.
	Resumed bool
	Row     Row
	Err     string
	WallS   float64
}

// Result is the outcome of Run.
type Result struct {
	Cells []CellResult
	// Done counts finished cells (Resumed of them from an earlier run), Ran
	// the cells run by this call, Failed those that returned an error.
	Done, Resumed, Ran, Failed int
}

// marker is cell.json: the proof that a cell finished, and its metrics.
type marker struct {
	ID        string  `json:"id"`
	Values    []Value `json:"values"`
	Scenario  string  `json:"scenario_sha256"`
	WallS     float64 `json:"wall_s"`
	Row       Row     `json:"row"`
	Completed bool    `json:"completed"`
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readMarker returns the marker of a finished cell whose scenario is still
// the same, or nil.
func readMarker(dir string, c Cell) *marker {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if err != nil {
		return nil
	}
	var m marker
	if json.Unmarshal(b, &m) != nil || !m.Completed || m.ID != c.ID || m.Scenario != digest(c.Scenario) {
		return nil
	}
	return &m
}

// writeFileAtomic writes path through a temporary file renamed into place.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// Run executes the sweep's cells (see the package comment): cells with a
// valid marker are skipped, the others run from an empty directory with
// the given number of workers. When ctx ends it launches no more cells,
// waits for the running ones to return and still writes the table. The
// error reports an interruption (ctx.Err()) or the failed cells; the
// result is returned either way.
func Run(ctx context.Context, sw *Sweep, runCell RunCell, opts Options) (*Result, error) {
	if opts.Dir == "" {
		return nil, errors.New("sweep: no output directory")
	}
	cells, err := sw.Cells(opts.Env)
	if err != nil {
		return nil, err
	}
	parallel := sw.Parallel
	if opts.Parallel > 0 {
		parallel = opts.Parallel
	}
	parallel = max(parallel, 1)
	if err := os.MkdirAll(filepath.Join(opts.Dir, CellsDir), 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	res := &Result{Cells: make([]CellResult, len(cells))}
	var todo []int
	for i, c := range cells {
		res.Cells[i] = CellResult{Cell: c, Status: StatusPending}
		if m := readMarker(filepath.Join(opts.Dir, CellsDir, c.Dir), c); m != nil {
			res.Cells[i] = CellResult{Cell: c, Status: StatusDone, Resumed: true, Row: m.Row, WallS: m.WallS}
			res.Done++
			res.Resumed++
			continue
		}
		todo = append(todo, i)
	}
	p := &progress{w: opts.Progress, total: len(cells), done: res.Done, parallel: parallel, start: time.Now()}
	p.printf("sweep: %d cells, %d already done, %d to run, %d at a time", len(cells), res.Done, len(todo), parallel)

	var mu sync.Mutex // guards res
	pool.Each(ctx, todo, parallel, func(i int) {
		cr := runOne(ctx, cells[i], filepath.Join(opts.Dir, CellsDir, cells[i].Dir), runCell, p)
		mu.Lock()
		defer mu.Unlock()
		res.Cells[i] = cr
		switch cr.Status {
		case StatusDone:
			res.Done++
			res.Ran++
		case StatusFailed:
			res.Failed++
			res.Ran++
		}
	})
	p.printf("sweep: %d/%d done, %d failed, %d not run; wall %s", res.Done, len(cells), res.Failed,
		len(cells)-res.Done-res.Failed, time.Since(p.start).Round(time.Millisecond))
	if err := writeTables(opts.Dir, sw.Columns(), res.Cells); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("sweep interrupted after %d of %d cells (rerun to resume): %w", res.Done, len(cells), err)
	}
	if res.Failed > 0 {
		for _, c := range res.Cells {
			if c.Status == StatusFailed {
				return res, fmt.Errorf("sweep: %d of %d cells failed (first: %s: %s)", res.Failed, len(cells), c.Cell.ID, c.Err)
			}
		}
	}
	return res, nil
}

// runOne runs one cell from an empty directory and marks it on success.
// A cell cut short by ctx stays pending (no marker: a rerun redoes it).
func runOne(ctx context.Context, c Cell, dir string, runCell RunCell, p *progress) CellResult {
	cr := CellResult{Cell: c, Status: StatusFailed}
	if err := ctx.Err(); err != nil {
		cr.Status = StatusPending
		return cr
	}
	begun := false
	fail := func(err error) CellResult {
		cr.Err = err.Error()
		p.finished(c, cr, 0, begun)
		return cr
	}
	if err := os.RemoveAll(dir); err != nil {
		return fail(fmt.Errorf("empty %s: %w", dir, err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ScenarioYML), c.Scenario, 0o644); err != nil {
		return fail(err)
	}
	p.started(c)
	begun = true
	t0 := time.Now()
	row, err := runCell(ctx, c, dir)
	wall := time.Since(t0)
	cr.WallS = math.Round(wall.Seconds()*1e3) / 1e3
	if err != nil {
		if ctx.Err() != nil {
			cr.Status = StatusPending
		}
		cr.Err = err.Error()
		p.finished(c, cr, wall, true)
		return cr
	}
	m := marker{ID: c.ID, Values: c.Values, Scenario: digest(c.Scenario), WallS: cr.WallS, Row: row, Completed: true}
	b, err := json.MarshalIndent(m, "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(dir, MarkerFile), append(b, '\n'))
	}
	if err != nil {
		return fail(fmt.Errorf("mark %s done: %w", c.ID, err))
	}
	// Round-trip the row as the marker stores it, so a resumed table
	// reads the same as a fresh one.
	var back marker
	if json.Unmarshal(b, &back) == nil {
		row = back.Row
	}
	cr.Status, cr.Row = StatusDone, row
	p.finished(c, cr, wall, true)
	return cr
}

// progress prints one line per cell event: done/total, running, failed
// and an ETA from the mean wall time of the cells run so far.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	total    int
	done     int
	failed   int
	running  int
	parallel int
	ran      int
	ranWall  time.Duration
	start    time.Time
}

func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) started(c Cell) {
	p.mu.Lock()
	p.running++
	line := p.line("start " + c.ID)
	p.mu.Unlock()
	p.printf("%s", line)
}

func (p *progress) finished(c Cell, cr CellResult, wall time.Duration, begun bool) {
	p.mu.Lock()
	if begun {
		p.running--
	}
	what := "done"
	switch cr.Status {
	case StatusDone:
		p.done++
		p.ran++
		p.ranWall += wall
	case StatusFailed:
		p.failed++
		what = "FAILED (" + cr.Err + ")"
	case StatusPending:
		what = "interrupted"
	}
	line := p.line(fmt.Sprintf("%s %s in %s", what, c.ID, wall.Round(time.Millisecond)))
	p.mu.Unlock()
	p.printf("%s", line)
}

// line formats the counters; p.mu is held.
func (p *progress) line(event string) string {
	eta := "?"
	if p.ran > 0 {
		left := p.total - p.done - p.failed
		per := p.ranWall / time.Duration(p.ran)
		eta = (per * time.Duration(left) / time.Duration(p.parallel)).Round(time.Second).String()
	}
	return fmt.Sprintf("sweep: %d/%d done, %d running, %d failed, ETA %s: %s", p.done, p.total, p.running, p.failed, eta, event)
}

// tableColumns: cell, the axes, status, wall_s, the metrics (sorted by
// name, over every row), error.
func tableColumns(axes []string, cells []CellResult) []string {
	cols := append([]string{"cell"}, axes...)
	cols = append(cols, "status", "wall_s")
	seen := map[string]bool{}
	for _, c := range cols {
		seen[c] = true
	}
	var metrics []string
	for _, c := range cells {
		for k := range c.Row {
			if !seen[k] {
				seen[k] = true
				metrics = append(metrics, k)
			}
		}
	}
	sort.Strings(metrics)
	return append(append(cols, metrics...), "error")
}

// writeTables writes sweep.csv and sweep.json: a row per cell in grid
// order. A metric named like a fixed column is dropped from the table (it
// stays in the cell's marker).
func writeTables(dir string, axes []string, cells []CellResult) error {
	cols := tableColumns(axes, cells)
	type jsonTable struct {
		Columns []string         `json:"columns"`
		Rows    []map[string]any `json:"rows"`
	}
	jt := jsonTable{Columns: cols}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(cols); err != nil {
		return fmt.Errorf("sweep table: %w", err)
	}
	for _, c := range cells {
		obj := map[string]any{"cell": c.Cell.ID, "status": c.Status, "wall_s": c.WallS, "error": c.Err}
		for _, v := range c.Cell.Values {
			obj[v.Axis] = typed(v.Value)
		}
		for k, v := range c.Row {
			if _, fixed := obj[k]; !fixed {
				obj[k] = v
			}
		}
		rec := make([]string, len(cols))
		for i, col := range cols {
			if v, ok := obj[col]; ok {
				rec[i] = cellText(v)
			}
		}
		if err := w.Write(rec); err != nil {
			return fmt.Errorf("sweep table: %w", err)
		}
		jt.Rows = append(jt.Rows, obj)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("sweep table: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, TableCSV), buf.Bytes()); err != nil {
		return fmt.Errorf("sweep table: %w", err)
	}
	b, err := json.MarshalIndent(jt, "", "  ")
	if err != nil {
		return fmt.Errorf("sweep table: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, TableJSON), append(b, '\n')); err != nil {
		return fmt.Errorf("sweep table: %w", err)
	}
	return nil
}

// typed turns a grid value that reads as a number into one, for JSON.
func typed(s string) any {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f
	}
	return s
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprint(x)
	}
}
