package report

import (
	"bytes"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/internal/csvtest"
	"github.com/koala-emu/koala-emu/results"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		if err := generate("testdata"); err != nil {
			fmt.Fprintln(os.Stderr, "generate testdata:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// fresh generates the synthetic inputs in a temporary directory.
func fresh(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := generate(root); err != nil {
		t.Fatalf("generate: %v", err)
	}
	return root
}

func allInputs(root string) []string {
	return []string{filepath.Join(root, "run-wf"), filepath.Join(root, "run-fcm"), filepath.Join(root, "run-delft"),
		filepath.Join(root, "run-malleable"), filepath.Join(root, "sweep"), filepath.Join(root, "study")}
}

func TestWriteNamesEveryFigure(t *testing.T) {
	root := fresh(t)
	out := filepath.Join(t.TempDir(), "report")
	if err := Write(out, allInputs(root), Options{}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, PageHTML))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var figs []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext == ".png" || ext == ".svg" {
			figs = append(figs, e.Name())
		}
	}
	sort.Strings(figs)
	// 2 AJRT figures (prime, wave), execution vs clusters, 2 CDFs, and
	// utilisation and resizes of the malleable run: 7 figures, 14 files.
	want := []string{
		"ajrt-sweep-prime", "ajrt-sweep-wave", "cdf-response", "cdf-wait", "exec-clusters",
		"resizes-run-malleable", "utilisation-run-malleable",
	}
	var wantFiles []string
	for _, w := range want {
		wantFiles = append(wantFiles, w+".png", w+".svg")
	}
	sort.Strings(wantFiles)
	if strings.Join(figs, " ") != strings.Join(wantFiles, " ") {
		t.Errorf("figure files:\n got %v\nwant %v", figs, wantFiles)
	}
	for _, f := range figs {
		if !strings.Contains(html, `"`+f+`"`) {
			t.Errorf("report.html does not name %s", f)
		}
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Errorf("%s is empty", f)
			continue
		}
		switch filepath.Ext(f) {
		case ".png":
			cfg, err := png.DecodeConfig(bytes.NewReader(b))
			if err != nil || cfg.Width < 1000 || cfg.Height < 500 {
				t.Errorf("%s: %dx%d, %v: want a PNG of at least 1000x500", f, cfg.Width, cfg.Height, err)
			}
		case ".svg":
			if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s is not SVG", f)
			}
		}
	}
	for _, bad := range []string{"<script", "http://", "https://", "<link"} {
		if strings.Contains(html, bad) {
			t.Errorf("report.html holds %q: it must stand alone", bad)
		}
	}
	for _, want := range []string{"<style>", "Runs compared", "run-wf", "run-fcm", "faithful", "degraded",
		"Saturation rule", "exceeds 2 x its AJRT", "40-50 %", "30-40 %", "20-30 %", "&gt; 50 % (not reached)"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// TestHandSweepSaturation checks the rule on the hand-made sweep, through
// the reading of the sweep directory and through saturation.csv.
func TestHandSweepSaturation(t *testing.T) {
	root := fresh(t)
	s, err := readSweep(filepath.Join(root, "sweep"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cells) != 20 || strings.Join(s.Axes, ",") != "policy,net_utilization,app" {
		t.Fatalf("read %d cells with axes %v: want 20, policy,net_utilization,app", len(s.Cells), s.Axes)
	}
	ss := groupSeries(sweepPoints(s))
	if len(ss) != 4 {
		t.Fatalf("%d series, want 4", len(ss))
	}
	for _, se := range ss {
		if len(se.Levels) != 5 || se.Levels[0].UtilPct != 10 || se.Levels[4].UtilPct != 50 {
			t.Errorf("%s/%s: levels %+v: want 10..50 %%", se.App, se.Policy, se.Levels)
		}
		got := Saturate(se.Levels, 2, 1).Interval()
		if want := handIntervals[[2]string{se.Policy, se.App}]; got != want {
			t.Errorf("%s/%s: saturation %q, want %q", se.App, se.Policy, got, want)
		}
	}

	out := t.TempDir()
	if err := Write(out, []string{filepath.Join(root, "sweep")}, Options{}); err != nil {
		t.Fatal(err)
	}
	rows := csvtest.Read(t, filepath.Join(out, SaturationCSV))
	if len(rows) != 5 {
		t.Fatalf("saturation.csv has %d lines, want header + 4", len(rows))
	}
	for _, r := range rows[1:] {
		if want := handIntervals[[2]string{r[2], r[1]}]; r[5] != want {
			t.Errorf("saturation.csv %s/%s: %q, want %q", r[1], r[2], r[5], want)
		}
	}
	// A stricter factor moves wf/prime's saturation down: 130 > 1.25 x 100 at 30 %.
	out2 := t.TempDir()
	if err := Write(out2, []string{filepath.Join(root, "sweep")}, Options{SaturationFactor: 1.25}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(out2, SaturationCSV))
	if !strings.Contains(string(b), "sweep,prime,wf,20,30,20-30 %,") {
		t.Errorf("with k=1.25, saturation.csv:\n%s\nwant prime/wf at 20-30 %%", b)
	}
}

func TestSaturate(t *testing.T) {
	nan := math.NaN()
	lv := func(x, a float64, sub, unpl int) Level {
		return Level{UtilPct: x, AJRTS: a, Submitted: sub, Unplaced: unpl}
	}
	for _, c := range []struct {
		name   string
		levels []Level
		want   string
		found  bool
	}{
		{"ajrt doubles", []Level{lv(10, 50, 10, 0), lv(20, 90, 10, 0), lv(30, 101, 10, 0)}, "20-30 %", true},
		{"exactly k x is not saturated", []Level{lv(10, 50, 10, 0), lv(20, 100, 10, 0)}, "> 20 % (not reached)", false},
		{"unordered input", []Level{lv(30, 300, 10, 0), lv(10, 100, 10, 0), lv(20, 150, 10, 0)}, "20-30 %", true},
		{"unplaced at the lowest level", []Level{lv(10, 50, 100, 2), lv(20, 60, 100, 0)}, "<= 10 %", true},
		{"1 % unplaced is not more than 1 %", []Level{lv(10, 50, 100, 1), lv(20, 60, 100, 0)}, "> 20 % (not reached)", false},
		{"nothing completed", []Level{lv(10, 50, 10, 0), lv(20, nan, 10, 0)}, "10-20 %", true},
		{"empty", nil, "no data", false},
	} {
		p := Saturate(c.levels, 2, 1)
		if got := p.Interval(); got != c.want || p.Found != c.found {
			t.Errorf("%s: %q found=%v (%s), want %q found=%v", c.name, got, p.Found, p.Why, c.want, c.found)
		}
	}
}

func TestMissingResultsJSON(t *testing.T) {
	root := fresh(t)
	run := filepath.Join(root, "run-wf")
	if err := os.Remove(filepath.Join(run, ResultsJSON)); err != nil {
		t.Fatal(err)
	}
	err := Write(t.TempDir(), []string{run}, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(run, ResultsJSON)) {
		t.Errorf("run without results.json: %v, want an error naming %s", err, filepath.Join(run, ResultsJSON))
	}
	empty := t.TempDir()
	err = Write(t.TempDir(), []string{empty}, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(empty, ResultsJSON)) {
		t.Errorf("empty directory: %v, want an error naming %s", err, filepath.Join(empty, ResultsJSON))
	}
	// A finished sweep cell without its results.
	cells, _ := filepath.Glob(filepath.Join(root, "sweep", "cells", "*", ResultsJSON))
	if len(cells) != 20 {
		t.Fatalf("%d cells with results.json, want 20", len(cells))
	}
	if err := os.Remove(cells[3]); err != nil {
		t.Fatal(err)
	}
	err = Write(t.TempDir(), []string{filepath.Join(root, "sweep")}, Options{})
	if err == nil || !strings.Contains(err.Error(), cells[3]) {
		t.Errorf("sweep cell without results.json: %v, want an error naming %s", err, cells[3])
	}
	// A malleable run without its utilisation series.
	mall := filepath.Join(root, "run-malleable")
	if err := os.Remove(filepath.Join(mall, UtilizationCSV)); err != nil {
		t.Fatal(err)
	}
	err = Write(t.TempDir(), []string{mall}, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(mall, UtilizationCSV)) {
		t.Errorf("malleable run without utilization.csv: %v, want an error naming it", err)
	}
	// jobs.csv without a column the report needs.
	fcm := filepath.Join(root, "run-fcm")
	if err := os.WriteFile(filepath.Join(fcm, JobsCSV), []byte("id,application\nj1,wave\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Write(t.TempDir(), []string{fcm}, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(fcm, JobsCSV)) || !strings.Contains(err.Error(), `"clusters"`) {
		t.Errorf("jobs.csv without clusters: %v, want an error naming the file and the column", err)
	}
}

func TestInterconnectLabel(t *testing.T) {
	root := fresh(t)
	for dir, want := range map[string]string{
		"run-wf":    "das3-coalloc (links 77-185 MB/s)",
		"run-delft": "das3-coalloc-delft (links 45-185 MB/s)",
	} {
		r, err := readRun(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if r.Interconnect != want {
			t.Errorf("%s: interconnect %q, want %q", dir, r.Interconnect, want)
		}
	}
}

// TestUnplacedReason keeps the report's reason in step with the scheduler's.
func TestUnplacedReason(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "actors", "scheduler", "actor.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `ReasonTooManyTries = "`+reasonUnplaced+`"`) {
		t.Errorf("actors/scheduler's ReasonTooManyTries is no longer %q", reasonUnplaced)
	}
}

// TestCommittedTestdata renders the committed synthetic inputs.
func TestCommittedTestdata(t *testing.T) {
	if err := Write(t.TempDir(), allInputs("testdata"), Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 1, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0, 1650, "0 500 1000 1500"},
		{10, 50, "10 20 30 40 50"},
		{95, 605, "100 200 300 400 500 600"},
	} {
		var labels []string
		for _, tk := range (niceTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("ticks %g..%g: %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

// TestUtilSeriesCarriesClustersForward: clusters sampled at different
// instants each count at their latest sample, so no instant drops one.
func TestUtilSeriesCarriesClustersForward(t *testing.T) {
	s := func(t float64, c string, local, koala float64) results.UtilSample {
		return results.UtilSample{T: t, Cluster: c, Capacity: 100, Local: local, Koala: koala}
	}
	koala, local, total, unit := utilSeries([]results.UtilSample{
		s(31, "b", 0, 50), s(0, "a", 10, 50), s(1, "b", 30, 50), s(30, "a", 10, 50), s(30, "c", 0, 0),
	})
	if unit != "s" || len(koala) != 4 {
		t.Fatalf("unit %s, %d points: want s, 4 (t = 0, 1, 30, 31)", unit, len(koala))
	}
	want := []struct{ x, k, l float64 }{{0, 50, 10}, {1, 50, 20}, {30, 100.0 / 3, 40.0 / 3}, {31, 100.0 / 3, 10.0 / 3}}
	for i, w := range want {
		if koala[i].X != w.x || math.Abs(koala[i].Y-w.k) > 1e-9 || math.Abs(local[i].Y-w.l) > 1e-9 ||
			math.Abs(total[i].Y-w.k-w.l) > 1e-9 {
			t.Errorf("point %d: t %g koala %g local %g total %g, want t %g koala %g local %g", i, koala[i].X, koala[i].Y,
				local[i].Y, total[i].Y, w.x, w.k, w.l)
		}
	}
}

func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{300, 12000, "500 1000 2000 5000 10000"},
		{1, 100000, "1 10 100 1000 10000 100000"},
	} {
		var labels []string
		for _, tk := range (logTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("log ticks %g..%g: %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

// TestStudyForms reads study.json as study cluster-count --out writes it
// (a list of rows) and as --json prints it (an object with rows).
func TestStudyForms(t *testing.T) {
	for name, body := range map[string]string{
		"list":   `[{"interconnect":"gbe","app":"wave","clusters":["delft","vrije"],"exec_s":900,"wall_s":1,"status":"completed"}]`,
		"object": `{"study":"cluster-count","backend":"inproc","rows":[{"interconnect":"gbe","app":"wave","clusters":["delft","vrije"],"exec_s":900,"wall_s":1,"status":"completed"}]}`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StudyJSON), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := readStudy(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Rows) != 1 || s.Rows[0].App != "wave" || len(s.Rows[0].Clusters) != 2 || s.Rows[0].ExecS != 900 {
			t.Errorf("%s: rows %+v", name, s.Rows)
		}
		out := t.TempDir()
		if err := Write(out, []string{dir}, Options{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(out, "exec-clusters.png")); err != nil {
			t.Errorf("%s: no execution figure: %v", name, err)
		}
	}
}
