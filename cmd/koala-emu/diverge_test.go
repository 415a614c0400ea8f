package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/report"
)

// The report package's fixtures: four jobs, j4 failed on the emulated run.
const (
	divSim = "../../report/testdata/diverge-sim"
	divEmu = "../../report/testdata/diverge-emu"
)

// Errors: a wrong command line is a usage error (2); a directory that is
// not a run, the runs in the wrong order or runs of different plans fail
// (1), naming the problem.
func TestDivergeErrors(t *testing.T) {
	other := t.TempDir()
	for _, name := range []string{report.ResultsJSON, report.JobsCSV} {
		b, err := os.ReadFile(filepath.Join(divEmu, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == report.ResultsJSON {
			b = []byte(strings.Replace(string(b), `"seed": 7`, `"seed": 9`, 1))
		}
		if err := os.WriteFile(filepath.Join(other, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"diverge", divSim}, exitUsage, "takes 2 argument(s)"},
		{[]string{"diverge", divSim, divEmu, "x"}, exitUsage, `unexpected ["x"]`},
		{[]string{"diverge", divSim, divEmu, "--top", "-1"}, exitUsage, "--top must not be negative"},
		{[]string{"diverge", t.TempDir(), divEmu}, exitError, "is not a run directory: no results.json"},
		{[]string{"diverge", divEmu, divSim}, exitError, "is not a simulated run"},
		{[]string{"diverge", divSim, other}, exitError, "seed differs: 7 against 9"},
	}
	for _, c := range cases {
		ta := newTestApp()
		if code := ta.exec(c.args...); code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, c.code, ta.errOut.String())
			continue
		}
		if !strings.Contains(ta.errOut.String(), c.want) {
			t.Errorf("%q: stderr %q lacks %q", c.args, ta.errOut.String(), c.want)
		}
		if ta.out.Len() != 0 {
			t.Errorf("%q printed %q on stdout", c.args, ta.out.String())
		}
	}
}

// With --json a failure still prints one object, with the error.
func TestDivergeJSONError(t *testing.T) {
	ta := newTestApp()
	if code := ta.exec("diverge", divEmu, divSim, "--json"); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	var got divergeOutput
	decode(t, ta, &got)
	if !strings.Contains(got.Error, "is not a simulated run") || got.Divergence != nil {
		t.Errorf("got %+v, want only an error", got)
	}
}

// --out writes the per-job table; --json prints the divergence with the
// top jobs and the table's path; without --out the table is printed.
func TestDivergeOutputs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "div")
	ta := newTestApp()
	if code := ta.exec("diverge", divSim, divEmu, "--top", "1", "--out", out, "--json"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	var got divergeOutput
	decode(t, ta, &got)
	if len(got.Top) != 1 || got.Top[0].ID != "j2" || got.Largest != report.AggWait || len(got.Jobs) != 4 {
		t.Errorf("top %+v, largest %q, %d jobs; want j2, %s, 4", got.Top, got.Largest, len(got.Jobs), report.AggWait)
	}
	csvPath := filepath.Join(out, report.DivergenceCSV)
	if got.CSV != csvPath {
		t.Errorf("csv %q, want %q", got.CSV, csvPath)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("%s: %d rows, %v; want a header and 4 jobs", csvPath, len(rows), err)
	}

	ta = newTestApp()
	if code := ta.exec("diverge", divSim, divEmu, "--top", "2"); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	text := ta.out.String()
	for _, w := range []string{"largest divergence: avg_wait (-62.0 %)", "2 jobs with the largest", "every job", "j4"} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q:\n%s", w, text)
		}
	}
}
