package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// goroutinesSettle counts the goroutines now and returns the check that a
// run left nothing running: within a deadline the count is back to at most
// what it was plus 2 (listeners, ranks, shapers and timers all returned).
func goroutinesSettle(t *testing.T) func() {
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		waittest.Until(t, 20*time.Second, fmt.Sprintf("at most %d goroutines (%d before the run, plus 2)", before+2, before),
			func() bool { return runtime.NumGoroutine() <= before+2 })
	}
}

// readResults checks that the results directory dir holds every results
// file and decodes its results.json into v.
func readResults(t *testing.T, dir string, v any) {
	t.Helper()
	if missing := wiring.MissingResults(dir, false); len(missing) > 0 {
		t.Errorf("results directory lacks %v", missing)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// testdataPlan is the plan of the scenario file testdata/name, failing the
// test on any error.
func testdataPlan(t *testing.T, name string) *scenarios.Plan {
	t.Helper()
	return expand(t)(scenarios.Load(filepath.Join("testdata", name)))
}

// runTestdata runs the scenario file testdata/name on the inproc backend
// (runInTemp) and returns its plan, its result and its results directory.
func runTestdata(t *testing.T, name string, timeout time.Duration) (*scenarios.Plan, *Result, string) {
	t.Helper()
	plan := testdataPlan(t, name)
	res, dir := runInTemp(t, plan, Options{}, timeout)
	return plan, res, dir
}

// jobsByID are the records of res's jobs by their IDs.
func jobsByID(res *Result) map[string]results.Job {
	byID := make(map[string]results.Job, len(res.Jobs))
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	return byID
}
