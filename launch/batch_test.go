package launch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/scenarios"
)

func batchBooks(t *testing.T, res *Result) *wiring.BatchBooks {
	t.Helper()
	b, ok := res.Summary.Extra["batch"].(*wiring.BatchBooks)
	if !ok {
		t.Fatalf("results.json has no batch books: %v", res.Summary.Extra)
	}
	return b
}

// Every built-in batch grid replays to the end on sim with every trace job
// of its windows accounted for, the same way twice.
func TestBatchGridSim(t *testing.T) {
	for _, name := range scenarios.Builtins() {
		if !strings.HasPrefix(name, "realloc-") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			plan := expand(t)(scenarios.LoadBuiltin(name))
			res, dir := runSimInTemp(t, plan)
			b := batchBooks(t, res)
			if !b.Balanced || b.Unfinished != 0 || b.Submitted != len(plan.Jobs) || b.WindowJobs != b.Submitted+b.Skipped {
				t.Fatalf("books do not balance: %+v", b)
			}
			if b.Completed == 0 || b.Killed == 0 || b.Skipped == 0 || b.Rounds == 0 {
				t.Errorf("expected completed, killed, skipped jobs and reallocation rounds: %+v", b)
			}
			if strings.Contains(name, "non-dedicated") != (b.Local > b.Grid) {
				t.Errorf("%d local and %d grid jobs", b.Local, b.Grid)
			}
			if name != "realloc-heterogeneous-dedicated" {
				return
			}
			_, again := runSimInTemp(t, plan)
			x, _ := os.ReadFile(filepath.Join(dir, "jobs.csv"))
			y, _ := os.ReadFile(filepath.Join(again, "jobs.csv"))
			if len(x) == 0 || !bytes.Equal(x, y) {
				t.Error("two simulations of the same plan wrote different jobs.csv")
			}
		})
	}
}

func TestBatchGridRefusedWhereItCannotRun(t *testing.T) {
	plan := expand(t)(scenarios.LoadBuiltin("realloc-homogeneous-dedicated"))
	for _, b := range Backends() {
		err := Check(b, plan, Options{})
		if b.Capabilities().BatchGrid != (err == nil) {
			t.Errorf("%s: Check says %v", b.Name(), err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "batch: ") {
			t.Errorf("%s: the refusal does not name the field: %v", b.Name(), err)
		}
	}
}

// A tiny trace on sim and on inproc: the same jobs complete or are killed
// at their walltime on both. On inproc every job ran as processes on node
// actors, one computation a processor (the fidelity monitor counted them);
// on sim nothing computed.
func TestBatchGridInprocMatchesSim(t *testing.T) {
	dir := t.TempDir()
	trace := "; MaxProcs: 8\n" +
		"1 0 0 100 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1\n" +
		"2 10 0 300 8 -1 -1 8 400 -1 1 1 1 -1 -1 -1 -1 -1\n" +
		"3 20 0 500 4 -1 -1 4 300 -1 1 1 1 -1 -1 -1 -1 -1\n" + // killed at its walltime
		"4 30 0 50 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n" +
		"5 40 0 0 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n" + // skipped: no run time
		"6 50 0 200 6 -1 -1 6 600 -1 1 1 1 -1 -1 -1 -1 -1\n"
	yaml := `name: tiny-batch
seed: 3
time_scale: 50
batch:
  clusters:
    - {name: a, processors: 8}
    - {name: b, processors: 8, speed: 1.4}
  local_share: 0.3
  traces:
    - {file: tiny.swf, cluster: a}
  realloc: {mode: all-cancellation, heuristic: minmin, period_s: 60}
`
	for name, data := range map[string]string{"tiny.swf": trace, "tiny.yaml": yaml} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan := expand(t)(scenarios.Load(filepath.Join(dir, "tiny.yaml")))
	sim, _ := runSimInTemp(t, plan)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inp, err := RunInproc(ctx, plan, Options{Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, b := batchBooks(t, sim), batchBooks(t, inp)
	if !a.Balanced || !b.Balanced || a.Submitted != 5 || a.Skipped != 1 || a.Killed < 1 {
		t.Fatalf("books: sim %+v, inproc %+v", a, b)
	}
	if a.Completed != b.Completed || a.Killed != b.Killed {
		t.Errorf("sim: %d completed, %d killed; inproc: %d, %d", a.Completed, a.Killed, b.Completed, b.Killed)
	}
	if got := sim.Summary.Fidelity.Run.ComputeCalls; got != 0 {
		t.Errorf("sim: %d computations, want none", got)
	}
	// A killed job's processes were cut in their computation, which is
	// not counted.
	want := int64(0)
	for _, j := range inp.Jobs {
		if j.Status != "completed" {
			continue
		}
		_, procs, _ := strings.Cut(j.Components, ":")
		n, err := strconv.Atoi(procs)
		if err != nil {
			t.Fatalf("job %s: components %q", j.ID, j.Components)
		}
		want += int64(n)
	}
	if got := inp.Summary.Fidelity.Run.ComputeCalls; want == 0 || got != want {
		t.Errorf("inproc: %d computations, want %d (one a processor of every completed job)", got, want)
	}
}
