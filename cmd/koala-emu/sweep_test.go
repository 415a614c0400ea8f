package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/launch"
)

// twoCellSweep writes a sweep of das3-smoke over two seeds and returns its
// path.
func twoCellSweep(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(file, []byte("base: das3-smoke\ngrid:\n  - path: seed\n    values: [1, 2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// sweep --model reaches every cell's run as launch.Options.SimModel, as
// run --model does, and study's runs get it too.
func TestModelFlagReachesEveryRun(t *testing.T) {
	shipped := filepath.Join("..", "..", "launch", "sim", "models", "inproc.json")
	ta := newTestApp()
	ta.addSimulated("fakesim")
	out := t.TempDir()
	if code := ta.exec("sweep", twoCellSweep(t), "--backend", "fakesim", "--model", shipped, "--out", out); code != exitOK {
		t.Fatalf("sweep: exit %d: %s", code, ta.errOut.String())
	}
	if len(ta.runs) != 2 {
		t.Fatalf("sweep: %d runs, want 2", len(ta.runs))
	}
	for i, r := range ta.runs {
		if r.Options.SimModel != shipped || !strings.HasPrefix(r.Options.Out, filepath.Join(out, "cells")) {
			t.Errorf("sweep run %d: options %+v, want model %s and a cell's directory", i, r.Options, shipped)
		}
	}
	for _, args := range [][]string{
		{"run", "das3-smoke", "--backend", "fakesim", "--model", "shipped", "--out", t.TempDir()},
		{"study", "cluster-count", "--backend", "fakesim", "--apps", "wave", "--interconnect", "gbe", "--model", "shipped"},
	} {
		ta = newTestApp()
		ta.addSimulated("fakesim")
		ta.result = &launch.Result{}
		if code := ta.exec(args...); code != exitOK {
			t.Fatalf("%s: exit %d: %s", args[0], code, ta.errOut.String())
		}
		if len(ta.runs) == 0 {
			t.Fatalf("%s: no run", args[0])
		}
		for _, r := range ta.runs {
			if r.Options.SimModel != "shipped" {
				t.Errorf("%s: a run's model %q, want shipped", args[0], r.Options.SimModel)
			}
		}
	}
}

// A model file that is missing or malformed, or a model on a backend that
// runs its jobs, stops sweep, run and study before any run, with an error
// naming the file (or the backend).
func TestModelFlagErrors(t *testing.T) {
	dir := t.TempDir()
	missing, malformed := filepath.Join(dir, "missing.json"), filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte("{\"version\": 1, \"apps\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	sw := twoCellSweep(t)
	for _, c := range []struct {
		backend, model, want string
	}{
		{"fakesim", missing, missing},
		{"fakesim", malformed, malformed},
		{"fake", "shipped", "the fake backend runs its jobs"},
	} {
		for _, args := range [][]string{
			{"sweep", sw, "--out", filepath.Join(dir, "sweep")},
			{"run", "das3-smoke", "--out", filepath.Join(dir, "run")},
			{"study", "cluster-count", "--apps", "wave", "--interconnect", "gbe"},
		} {
			ta := newTestApp()
			ta.addSimulated("fakesim")
			code := ta.exec(append(args, "--backend", c.backend, "--model", c.model)...)
			if code != exitError || len(ta.runs) != 0 || !strings.Contains(ta.errOut.String(), c.want) {
				t.Errorf("%s --backend %s --model %s: exit %d, %d runs, stderr %q; want exit %d, no run, an error naming %q",
					args[0], c.backend, c.model, code, len(ta.runs), ta.errOut.String(), exitError, c.want)
			}
		}
	}
}
