package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/scenarios"
)

// recordedRun is one call of a fake backend's Run.
type recordedRun struct {
	Plan    *scenarios.Plan
	Options launch.Options
}

// testApp is an app whose backends and clean record their calls instead of
// acting.
type testApp struct {
	*app
	out, errOut bytes.Buffer
	runs        []recordedRun
	calibrates  []launch.CalibrateRequest
	cleans      []launch.CleanOptions
	// result and runErr are what the fake backend's Run returns.
	result *launch.Result
	runErr error
}

func newTestApp() *testApp {
	t := &testApp{result: &launch.Result{}}
	t.app = &app{stdout: &t.out, stderr: &t.errOut, backends: []launch.Backend{&fakeBackend{name: "fake", t: t}},
		clean: func(_ context.Context, opts launch.CleanOptions) (*launch.CleanReport, []string, error) {
			t.cleans = append(t.cleans, opts)
			return &launch.CleanReport{DryRun: opts.DryRun}, nil, nil
		},
		probe: func(context.Context, io.Writer) []ptimer.Stalls { return nil },
	}
	return t
}

// addSimulated adds a simulated fake backend of this name.
func (t *testApp) addSimulated(name string) {
	t.backends = append(t.backends, &fakeBackend{name: name, t: t, simulated: true})
}

// setBackends replaces the backends with fakes of these names.
func (t *testApp) setBackends(names ...string) {
	t.backends = nil
	for _, n := range names {
		t.backends = append(t.backends, &fakeBackend{name: n, t: t})
	}
}

// fakeBackend records what it is asked; a simulated one says it predicts
// (Capabilities.Simulated), so that launch.Check lets a model through.
type fakeBackend struct {
	name      string
	t         *testApp
	simulated bool
}

var _ launch.Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Name() string { return f.name }

func (f *fakeBackend) Capabilities() launch.Capabilities {
	return launch.Capabilities{Shapers: []string{"userspace"}, Malleability: true, Simulated: f.simulated}
}

// Run records the run; a sweep runs cells at once, hence the lock.
func (f *fakeBackend) Run(_ context.Context, plan *scenarios.Plan, opts launch.Options) (*launch.Result, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	f.t.runs = append(f.t.runs, recordedRun{Plan: plan, Options: opts})
	return f.t.result, f.t.runErr
}

var fakeMu sync.Mutex

func (f *fakeBackend) Calibrate(_ context.Context, req launch.CalibrateRequest) (*launch.Calibration, error) {
	f.t.calibrates = append(f.t.calibrates, req)
	return &launch.Calibration{Mechanism: f.name}, nil
}

func (f *fakeBackend) Clean(context.Context, launch.CleanOptions) (*launch.CleanReport, error) {
	return &launch.CleanReport{}, nil
}

// exec runs one command line on a fresh command tree.
func (t *testApp) exec(args ...string) int {
	return execute(context.Background(), args, t.app)
}

// Every command's --help exits 0, lists every flag the command takes, and
// runs nothing: no backend, no clean.
func TestHelpListsEveryFlag(t *testing.T) {
	cmds := allCommands(newRoot(newTestApp().app))
	if len(cmds) < 12 {
		t.Fatalf("the tree has %d commands, want at least 12 (root, run, validate, calibrate, study, cluster-count, clean, scenarios, node, help, completion and its shells)", len(cmds))
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		name := strings.Join(path, " ")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			ta := newTestApp()
			if code := ta.exec(append(path, "--help")...); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, ta.errOut.String())
			}
			help := ta.out.String()
			if !strings.Contains(help, "Usage:") {
				t.Fatalf("no usage in the help:\n%s", help)
			}
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(help, "--"+f.Name) {
					t.Errorf("flag --%s is missing from the help:\n%s", f.Name, help)
				}
				if f.Name != "help" && f.Usage == "" {
					t.Errorf("flag --%s has no usage text", f.Name)
				}
			})
			if len(ta.runs) != 0 || len(ta.calibrates) != 0 || len(ta.cleans) != 0 {
				t.Fatalf("--help ran something: %d runs, %d calibrations, %d cleans", len(ta.runs), len(ta.calibrates), len(ta.cleans))
			}
		})
	}
	for _, want := range []string{"run", "validate", "calibrate", "study", "study cluster-count", "clean", "scenarios", "node", "completion bash", "completion zsh", "completion fish"} {
		if !seen[want] {
			t.Errorf("command %q is missing from the tree", want)
		}
	}
}

// The flags the old usage text left out are registered, with their
// defaults shown where they are not the zero value.
func TestHelpNamesFlagsAndDefaults(t *testing.T) {
	cases := map[string][]string{
		"run":                 {"--quiet", "--dilation auto|N", "--malleability-policy", "--approach", "--malleable-fraction", "--require-faithful", `(default "inproc")`, `(default "auto")`},
		"study cluster-count": {"--size int", "(default 32)", "--scenario string", `(default "cluster-count")`, "--dilation", "--require-faithful", "--model string", "--json"},
		"sweep":               {"--model string", "--parallel int", "--backend string", `(default "sweep")`, "--json"},
		"calibrate":           {"--json", "--shaper", "--backend"},
		"clean":               {"--run string", "--all", "--dry-run", "--json"},
		"validate":            {"--json"},
		"scenarios":           {"--json"},
	}
	for cmd, wants := range cases {
		ta := newTestApp()
		if code := ta.exec(append(strings.Fields(cmd), "--help")...); code != exitOK {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		for _, w := range wants {
			if !strings.Contains(ta.out.String(), w) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, w, ta.out.String())
			}
		}
	}
}

// clean --help, -h and help clean remove nothing: the clean is never
// called; clean with a bad flag or an argument does not call it either.
func TestCleanHelpCleansNothing(t *testing.T) {
	for _, args := range [][]string{{"clean", "--help"}, {"clean", "-h"}, {"help", "clean"}, {"clean", "--all", "--help"}} {
		ta := newTestApp()
		if code := ta.exec(args...); code != exitOK {
			t.Fatalf("%q: exit %d", args, code)
		}
		if len(ta.cleans) != 0 {
			t.Fatalf("%q called clean %v", args, ta.cleans)
		}
	}
	for _, args := range [][]string{{"clean", "--bogus"}, {"clean", "now"}, {"clean", "--all", "--run", "x"}} {
		ta := newTestApp()
		if code := ta.exec(args...); code != exitUsage {
			t.Fatalf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if len(ta.cleans) != 0 {
			t.Fatalf("%q called clean %v", args, ta.cleans)
		}
	}
}

func TestCleanPassesItsFlags(t *testing.T) {
	cases := map[string]launch.CleanOptions{
		"clean":                      {},
		"clean --dry-run":            {DryRun: true},
		"clean --all":                {All: true},
		"clean --run 1a2b --dry-run": {RunID: "1a2b", DryRun: true},
		"clean --json":               {},
	}
	for line, want := range cases {
		ta := newTestApp()
		if code := ta.exec(strings.Fields(line)...); code != exitOK {
			t.Fatalf("%s: exit %d, stderr %q", line, code, ta.errOut.String())
		}
		if len(ta.cleans) != 1 || ta.cleans[0] != want {
			t.Fatalf("%s: clean called with %v, want [%v]", line, ta.cleans, want)
		}
	}
}

func TestCountItems(t *testing.T) {
	got := countItems([]string{"namespace a", "namespace b", "record a.json", "container c"})
	if want := "2 namespaces, 1 record, 1 container"; got != want {
		t.Fatalf("countItems = %q, want %q", got, want)
	}
	if got := countItems(nil); got != "nothing" {
		t.Fatalf("countItems(nil) = %q", got)
	}
}

// clean --json prints the report with lists, never nulls.
func TestCleanJSON(t *testing.T) {
	ta := newTestApp()
	if code := ta.exec("clean", "--json", "--dry-run"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal(ta.out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"removed", "kept", "skipped"} {
		if _, ok := got[k].([]any); !ok {
			t.Errorf("%s is %v, want a list", k, got[k])
		}
	}
	if got["dry_run"] != true {
		t.Errorf("dry_run %v, want true", got["dry_run"])
	}
}
