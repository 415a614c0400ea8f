package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// decode parses stdout as exactly one JSON object into v.
func decode(t *testing.T, ta *testApp, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(ta.out.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the documented JSON object: %v\n%s", err, ta.out.String())
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value:\n%s", ta.out.String())
	}
}

func TestScenariosJSON(t *testing.T) {
	ta := newTestApp()
	if code := ta.exec("scenarios", "--json"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	var got scenariosOutput
	decode(t, ta, &got)
	if !slices.Equal(got.Scenarios, scenarios.Builtins()) || !slices.Contains(got.Scenarios, "das3-smoke") {
		t.Fatalf("scenarios %v, want %v", got.Scenarios, scenarios.Builtins())
	}
}

func TestValidateJSON(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\ntopology:\n  clusters:\n    - {name: a, nodes: 0, processors: 2, speed: 1, interconnect: gbe}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp()
	if code := ta.exec("validate", "--json", "das3-smoke", bad); code != exitError {
		t.Fatalf("exit %d, want %d (one scenario is invalid)", code, exitError)
	}
	var got validateOutput
	decode(t, ta, &got)
	if len(got.Scenarios) != 2 || got.Invalid != 1 {
		t.Fatalf("got %+v, want 2 scenarios, 1 invalid", got)
	}
	if ok := got.Scenarios[0]; !ok.OK || ok.Ref != "das3-smoke" || ok.Name != "das3-smoke" || len(ok.Errors) != 0 {
		t.Fatalf("das3-smoke: %+v", ok)
	}
	b := got.Scenarios[1]
	if b.OK || b.Ref != bad || len(b.Errors) == 0 {
		t.Fatalf("bad.yaml: %+v", b)
	}
	var paths []string
	for _, e := range b.Errors {
		paths = append(paths, e.Path)
	}
	if !slices.Contains(paths, "topology.clusters[0].nodes") {
		t.Fatalf("bad.yaml errors %+v do not name topology.clusters[0].nodes", b.Errors)
	}
}

// run hands the backend the plan with the overrides applied and the
// options and settings from the flags, and prints one JSON object.
func TestRunJSONAndPlumbing(t *testing.T) {
	ta := newTestApp()
	ta.result = &launch.Result{Summary: results.Summary{AJRTS: 12.5}}
	out := filepath.Join(t.TempDir(), "r")
	code := ta.exec("run", "das3-smoke", "--backend", "fake", "--json", "--quiet", "--out", out, "--seed", "7",
		"--time-scale", "3", "--policy", "wf", "--dilation", "auto", "--require-faithful", "--shaper", "userspace")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	if len(ta.runs) != 1 {
		t.Fatalf("%d runs, want 1", len(ta.runs))
	}
	r := ta.runs[0]
	if r.Plan.Seed != 7 || r.Plan.TimeScale != 3 || r.Plan.Policy.Placement != "wf" {
		t.Errorf("plan seed %d, time scale %g, placement %q: want 7, 3, wf", r.Plan.Seed, r.Plan.TimeScale, r.Plan.Policy.Placement)
	}
	if r.Options.Out != out || r.Options.Shaper != "userspace" || r.Options.Progress != nil {
		t.Errorf("options %+v: want out %s, shaper userspace, no progress (--quiet)", r.Options, out)
	}
	if !r.Plan.DilationAuto || !r.Options.RequireFaithful {
		t.Errorf("plan dilation auto %v, options require faithful %v: want both", r.Plan.DilationAuto, r.Options.RequireFaithful)
	}
	var got runOutput
	decode(t, ta, &got)
	if got.Scenario != "das3-smoke" || got.Backend != "fake" || got.Out != out || got.Summary == nil || got.Summary.AJRTS != 12.5 || got.Error != "" {
		t.Fatalf("run --json: %+v", got)
	}
	if !strings.Contains(ta.errOut.String(), "results in "+out) {
		t.Errorf("the human summary did not go to stderr: %q", ta.errOut.String())
	}
}

// Without --json the summary goes to stdout; a numeric --dilation is an
// override of the plan.
func TestRunDilationFactor(t *testing.T) {
	ta := newTestApp()
	if code := ta.exec("run", "das3-smoke", "--backend", "fake", "--dilation", "2.5", "--out", t.TempDir()); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	if d := ta.runs[0].Plan.Dilation; d != 2.5 {
		t.Fatalf("plan dilation %g, want 2.5", d)
	}
	if ta.runs[0].Plan.DilationAuto || ta.runs[0].Options.Progress == nil || ta.runs[0].Options.RequireFaithful {
		t.Fatalf("plan %+v, options %+v: want no auto dilation, progress on, faithful not required", ta.runs[0].Plan, ta.runs[0].Options)
	}
	if !strings.Contains(ta.out.String(), "results in ") {
		t.Fatalf("no summary on stdout: %q", ta.out.String())
	}
}

func TestCalibrateJSON(t *testing.T) {
	ta := newTestApp()
	ta.probe = func(context.Context, io.Writer) []ptimer.Stalls {
		return []ptimer.Stalls{{CPU: 0, P99: 30 * time.Microsecond}}
	}
	ta.exec("calibrate", "das3-smoke", "--backend", "fake", "--shaper", "htb", "--dilation", "3", "--json")
	if len(ta.calibrates) != 1 || ta.calibrates[0].Shaper != "htb" || ta.calibrates[0].Progress == nil || ta.calibrates[0].Dilation != 3 {
		t.Fatalf("calibrations %+v, want one with shaper htb and progress", ta.calibrates)
	}
	var got calibration
	decode(t, ta, &got)
	if got.Scenario != "das3-smoke" || got.Backend != "fake" || got.Shaper != "fake" || len(got.Machine) != 1 {
		t.Fatalf("calibrate --json: %+v", got)
	}
}

// study cluster-count runs one job per combination through the backend and
// prints the rows.
func TestStudyJSON(t *testing.T) {
	ta := newTestApp()
	ta.result = &launch.Result{Jobs: []results.Job{{Status: "completed"}}}
	// By default the first k clusters of the set: 4 runs, each with auto
	// dilation and a wall budget.
	if code := ta.exec("study", "cluster-count", "--backend", "fake", "--apps", "wave", "--interconnect", "gbe", "--size", "8", "--json"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	if len(ta.runs) != 4 || !ta.runs[0].Plan.DilationAuto || ta.runs[0].Plan.WallBudget != 40*time.Second {
		t.Fatalf("%d runs, first plan %+v", len(ta.runs), ta.runs[0].Plan)
	}
	ta = newTestApp()
	ta.result = &launch.Result{Jobs: []results.Job{{Status: "completed"}}}
	code := ta.exec("study", "cluster-count", "--backend", "fake", "--apps", "wave", "--interconnect", "gbe", "--size", "8", "--all-combinations", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	var got studyOutput
	decode(t, ta, &got)
	// GbE: the combinations of Delft, Vrije, Amsterdam, MultimediaN that
	// hold Delft: 1 + 3 + 3 + 1.
	if got.Study != "cluster-count" || got.Backend != "fake" || len(got.Rows) != 8 || len(ta.runs) != 8 {
		t.Fatalf("study --json: %+v, %d runs; want 8 rows and runs", got, len(ta.runs))
	}
	for i, r := range got.Rows {
		if r.App != "wave" || r.Interconnect != "gbe" || r.Status != "completed" || !slices.Contains(r.Clusters, "delft") {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	sizes := 0
	for _, c := range ta.runs[7].Plan.Jobs[0].Components {
		sizes += c.Size
	}
	if sizes != 8 {
		t.Errorf("the 4-cluster run's job has %d nodes, want 8", sizes)
	}
}

// With --json, stdout holds one object whatever happened after the command
// line was read, with the error in it; a wrong command line prints none.
func TestJSONOnFailure(t *testing.T) {
	ta := newTestApp()
	ta.runErr = errors.New("host on fire")
	if code := ta.exec("run", "das3-smoke", "--backend", "fake", "--json", "--out", t.TempDir()); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	var ro runOutput
	decode(t, ta, &ro)
	if ro.Error != "host on fire" || ro.Summary == nil || ro.Scenario != "das3-smoke" {
		t.Fatalf("failed run: %+v", ro)
	}

	ta = newTestApp()
	if code := ta.exec("run", "no-such-scenario", "--backend", "fake", "--json"); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	ro = runOutput{}
	decode(t, ta, &ro)
	if ro.Error == "" || ro.Summary != nil || ro.Scenario != "no-such-scenario" || len(ta.runs) != 0 {
		t.Fatalf("unknown scenario: %+v", ro)
	}

	ta = newTestApp()
	if code := ta.exec("study", "cluster-count", "--backend", "fake", "--scenario", "no-such-scenario", "--json"); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	var so studyOutput
	decode(t, ta, &so)
	if so.Error == "" || so.Rows == nil {
		t.Fatalf("study of an unknown scenario: %+v", so)
	}

	ta = newTestApp()
	if code := ta.exec("calibrate", "no-such-scenario", "--backend", "fake", "--json"); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	var co calibration
	decode(t, ta, &co)
	if co.Error == "" || len(ta.calibrates) != 0 {
		t.Fatalf("calibration of an unknown scenario: %+v", co)
	}

	for _, args := range [][]string{{"run", "das3-smoke", "--backend", "nowhere", "--json"}, {"calibrate", "--json"}, {"study", "cluster-count", "x", "--json"}} {
		ta = newTestApp()
		if code := ta.exec(args...); code != exitUsage {
			t.Fatalf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if ta.out.Len() != 0 {
			t.Fatalf("%q printed on stdout: %q", args, ta.out.String())
		}
	}
}

// TestScenariosBackends: scenarios --backends covers every built-in
// scenario on every backend; inproc, the reference backend, runs them all;
// every refusal names the scenario field it refuses and the backend; and
// the text matrix agrees with the JSON one.
func TestScenariosBackends(t *testing.T) {
	ta := newTestApp()
	ta.backends = launch.Backends()
	if code := ta.exec("scenarios", "--backends", "--json"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	var got scenariosOutput
	decode(t, ta, &got)
	names, backends := scenarios.Builtins(), launch.BackendNames()
	if len(got.Support) != len(names)*len(backends) {
		t.Fatalf("%d support entries, want %d scenarios x %d backends", len(got.Support), len(names), len(backends))
	}
	refused := 0
	for _, s := range got.Support {
		switch {
		case s.Backend == "inproc" && !s.Runs:
			t.Errorf("%s refused on inproc: %s", s.Scenario, s.Refused)
		case s.Scenario == "das3-smoke" && !s.Runs:
			t.Errorf("das3-smoke refused on %s: %s", s.Backend, s.Refused)
		case s.Runs != (s.Refused == ""):
			t.Errorf("%s on %s: runs %v with refusal %q", s.Scenario, s.Backend, s.Runs, s.Refused)
		case !s.Runs:
			refused++
			field, _, ok := strings.Cut(s.Refused, ":")
			if !ok || strings.Contains(field, " ") || !strings.Contains(s.Refused, "the "+s.Backend+" backend") {
				t.Errorf("%s on %s: refusal %q names no field or not the backend", s.Scenario, s.Backend, s.Refused)
			}
		}
	}
	if refused == 0 {
		t.Error("no scenario refused anywhere: the batch scenarios cannot run on the grid backends")
	}
	ta = newTestApp()
	ta.backends = launch.Backends()
	if code := ta.exec("scenarios", "--backends"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	if n := strings.Count(ta.out.String(), "refused ["); n != refused {
		t.Errorf("text matrix shows %d refusals, JSON %d:\n%s", n, refused, ta.out.String())
	}
}

// A run of a study that fails is a row with its error, the study goes on
// to the next run, writes every row and exits with an error that counts
// the failures.
func TestStudyGoesOnAfterAFailedRun(t *testing.T) {
	ta := newTestApp()
	ta.runErr = errors.New("first probe round did not complete")
	dir := t.TempDir()
	code := ta.exec("study", "cluster-count", "--backend", "fake", "--apps", "wave", "--interconnect", "gbe", "--size", "8", "--out", dir)
	if code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	if len(ta.runs) != 4 || !strings.Contains(ta.errOut.String(), "4 of 4 runs failed") {
		t.Fatalf("%d runs; stderr: %s", len(ta.runs), ta.errOut.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "study.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []StudyRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[3].Status != "error" || !strings.Contains(rows[3].Reason, "first probe round") {
		t.Fatalf("rows %+v", rows)
	}
}
