package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/koala-emu/koala-emu/internal/csvtest"
)

// fake is a RunCell that records the cells it ran and writes a result file.
type fake struct {
	mu    sync.Mutex
	ran   []int
	block func(c Cell) bool // cells that wait for ctx to end
	fail  func(c Cell) bool
	// blocked is called with the number of cells blocked so far.
	blocked  func(n int)
	nblocked int
}

func (f *fake) run(ctx context.Context, c Cell, dir string) (Row, error) {
	f.mu.Lock()
	f.ran = append(f.ran, c.Index)
	f.mu.Unlock()
	got, err := os.ReadFile(filepath.Join(dir, ScenarioYML))
	if err != nil || !bytes.Equal(got, c.Scenario) {
		return nil, errors.New("scenario.yaml missing or not the cell's scenario")
	}
	if f.block != nil && f.block(c) {
		if err := os.WriteFile(filepath.Join(dir, "partial.txt"), []byte("half-way"), 0o644); err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.nblocked++
		n := f.nblocked
		f.mu.Unlock()
		if f.blocked != nil {
			f.blocked(n)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.fail != nil && f.fail(c) {
		return nil, errors.New("boom")
	}
	if err := os.WriteFile(filepath.Join(dir, "result.txt"), []byte(c.ID), 0o644); err != nil {
		return nil, err
	}
	return Row{"ajrt_s": float64(100 + c.Index), "util_pct": 50.5, "verdict": "ok"}, nil
}

func (f *fake) indices() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]int(nil), f.ran...)
	sort.Ints(out)
	return out
}

func hasMarker(dir string, c Cell) bool {
	_, err := os.Stat(filepath.Join(dir, CellsDir, c.Dir, MarkerFile))
	return err == nil
}

func TestRunTable(t *testing.T) {
	sw := load(t, "testdata/small.yaml")
	dir := t.TempDir()
	f := &fake{}
	var progress bytes.Buffer
	res, err := Run(context.Background(), sw, f.run, Options{Dir: dir, Parallel: 3, Progress: &progress, Env: testEnv()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Done != 8 || res.Ran != 8 || res.Resumed != 0 || res.Failed != 0 || len(f.indices()) != 8 {
		t.Fatalf("done %d ran %d resumed %d failed %d calls %d", res.Done, res.Ran, res.Resumed, res.Failed, len(f.indices()))
	}
	rows := csvtest.Read(t, filepath.Join(dir, TableCSV))
	wantHeader := []string{"cell", "net_utilization", "placement", "seed", "status", "wall_s", "ajrt_s", "util_pct", "verdict", "error"}
	if !slices.Equal(rows[0], wantHeader) {
		t.Fatalf("header %q, want %q", rows[0], wantHeader)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want 8 and the header", len(rows)-1)
	}
	cells, _ := sw.Cells(nil)
	for i, r := range rows[1:] {
		c := cells[i]
		r[5] = "" // wall time varies
		want := []string{c.ID, c.Values[0].Value, c.Values[1].Value, c.Values[2].Value, "done", "",
			[]string{"100", "101", "102", "103", "104", "105", "106", "107"}[i], "50.5", "ok", ""}
		if !slices.Equal(r, want) {
			t.Errorf("row %d: %q, want %q", i+1, r, want)
		}
		if !hasMarker(dir, c) {
			t.Errorf("cell %s has no marker", c.ID)
		}
		entries, _ := os.ReadDir(filepath.Join(dir, CellsDir, c.Dir))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{MarkerFile, "result.txt", ScenarioYML}) {
			t.Errorf("cell %s holds %q", c.ID, names)
		}
	}
	var table struct {
		Columns []string         `json:"columns"`
		Rows    []map[string]any `json:"rows"`
	}
	b, err := os.ReadFile(filepath.Join(dir, TableJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(table.Columns, wantHeader) || len(table.Rows) != 8 {
		t.Fatalf("json columns %q, %d rows", table.Columns, len(table.Rows))
	}
	if r := table.Rows[7]; r["cell"] != cells[7].ID || r["net_utilization"] != 0.4 || r["placement"] != "fcm" ||
		r["seed"] != 2.0 || r["ajrt_s"] != 107.0 || r["status"] != "done" {
		t.Errorf("json row 8: %v", r)
	}
	if !strings.Contains(progress.String(), "sweep: 8/8 done, 0 running, 0 failed") {
		t.Errorf("progress does not end with 8/8 done:\n%s", progress.String())
	}
}

func TestRunResume(t *testing.T) {
	sw := load(t, "testdata/small.yaml")
	cells, _ := sw.Cells(nil)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two workers take the cells in order: cells 3 and 4 can only be
	// running together once 0, 1 and 2 have finished. They block until the
	// interruption, which comes once both are blocked.
	first := &fake{
		block: func(c Cell) bool { return c.Index >= 3 },
		blocked: func(n int) {
			if n == 2 {
				cancel()
			}
		},
	}
	res, err := Run(ctx, sw, first.run, Options{Dir: dir, Parallel: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Run: error %v, want context.Canceled", err)
	}
	if res.Done != 3 || !slices.Equal(first.indices(), []int{0, 1, 2, 3, 4}) {
		t.Fatalf("first run: done %d, ran %v; want 3 done of cells 0-4", res.Done, first.indices())
	}
	for _, c := range cells {
		if hasMarker(dir, c) != (c.Index < 3) {
			t.Errorf("cell %d: marker %v after the interruption", c.Index, hasMarker(dir, c))
		}
	}
	var statuses []string
	for _, r := range csvtest.Read(t, filepath.Join(dir, TableCSV))[1:] {
		statuses = append(statuses, r[4])
	}
	if want := []string{"done", "done", "done", "pending", "pending", "pending", "pending", "pending"}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses after the interruption %q, want %q", statuses, want)
	}
	partial := filepath.Join(dir, CellsDir, cells[3].Dir, "partial.txt")
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("the interrupted cell left no partial file: %v", err)
	}

	second := &fake{}
	res, err = Run(context.Background(), sw, second.run, Options{Dir: dir})
	if err != nil {
		t.Fatalf("resumed Run: %v", err)
	}
	if !slices.Equal(second.indices(), []int{3, 4, 5, 6, 7}) || res.Resumed != 3 || res.Done != 8 {
		t.Fatalf("resumed run ran %v (resumed %d, done %d), want cells 3-7 only", second.indices(), res.Resumed, res.Done)
	}
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the interrupted cell's directory was not emptied: %v", err)
	}
	rows := csvtest.Read(t, filepath.Join(dir, TableCSV))
	if rows[1][6] != "100" || rows[8][6] != "107" || rows[1][4] != "done" {
		t.Fatalf("table after resume: %q ... %q", rows[1], rows[8])
	}

	third := &fake{}
	res, err = Run(context.Background(), sw, third.run, Options{Dir: dir})
	if err != nil || len(third.indices()) != 0 || res.Resumed != 8 {
		t.Fatalf("third run: err %v, ran %v, resumed %d; want nothing run", err, third.indices(), res.Resumed)
	}
	if again := csvtest.Read(t, filepath.Join(dir, TableCSV)); !slices.EqualFunc(again, rows, slices.Equal) {
		t.Fatalf("table of a fully resumed sweep differs:\n%q\n%q", again, rows)
	}
}

func TestRunFailedCellIsRerun(t *testing.T) {
	sw := load(t, "testdata/small.yaml")
	dir := t.TempDir()
	f := &fake{fail: func(c Cell) bool { return c.Index == 1 }}
	res, err := Run(context.Background(), sw, f.run, Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "1 of 8 cells failed (first: net_utilization=0.2,placement=wf,seed=2: boom)") {
		t.Fatalf("error %v", err)
	}
	if res.Failed != 1 || res.Done != 7 {
		t.Fatalf("failed %d done %d", res.Failed, res.Done)
	}
	row := csvtest.Read(t, filepath.Join(dir, TableCSV))[2]
	if row[4] != "failed" || row[len(row)-1] != "boom" || row[6] != "" {
		t.Fatalf("failed cell's row %q", row)
	}
	again := &fake{}
	if _, err := Run(context.Background(), sw, again.run, Options{Dir: dir}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if !slices.Equal(again.indices(), []int{1}) {
		t.Fatalf("rerun ran %v, want only cell 1", again.indices())
	}
}

func TestRunChangedScenarioIsRerun(t *testing.T) {
	dir := t.TempDir()
	sw := load(t, "testdata/small.yaml")
	if _, err := Run(context.Background(), sw, (&fake{}).run, Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	// The same grid over a changed base: every marker is stale.
	sw.baseData = bytes.Replace(sw.baseData, []byte("application: wave"), []byte("application: prime"), 1)
	f := &fake{}
	if _, err := Run(context.Background(), sw, f.run, Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if len(f.indices()) != 8 {
		t.Fatalf("ran %v after the base changed, want all 8 cells", f.indices())
	}
}

func TestRunNeedsDir(t *testing.T) {
	sw := load(t, "testdata/small.yaml")
	if _, err := Run(context.Background(), sw, (&fake{}).run, Options{}); err == nil {
		t.Fatal("Run without a directory: no error")
	}
}
