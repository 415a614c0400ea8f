package launch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/scenarios"
)

// The das3-smoke scenario runs end to end in one process: every submitted
// job ends completed (or failed with a reason), the results directory holds
// every file, and nothing keeps running afterwards.
func TestSmokeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	settled := goroutinesSettle(t)
	s, err := scenarios.LoadBuiltin("das3-smoke")
	if err != nil {
		t.Fatal(err)
	}
	// Dilation 1 and time scale 3000 rather than the scenario's auto and
	// wall budget: the test checks the wiring, not the fidelity, and a
	// dilation chosen on a loaded (or -race) host would make it minutes
	// long. The host then runs behind scenario time, so the drain is long:
	// 48 h of scenario time is a minute of wall time.
	one, k := 1.0, 3000.0
	plan, err := s.Expand(ScenarioEnv(), scenarios.Overrides{Dilation: &one, TimeScale: &k})
	if err != nil {
		t.Fatal(err)
	}
	res, dir := runInTemp(t, plan, Options{Drain: 48 * time.Hour}, 5*time.Minute)
	if res.Summary.Jobs.Submitted != len(plan.Jobs) {
		t.Fatalf("submitted %d of %d jobs", res.Summary.Jobs.Submitted, len(plan.Jobs))
	}
	for _, j := range res.Jobs {
		switch {
		case j.Status == "completed":
			if j.Exec() <= 0 || j.Start < j.Placement || j.Placement < j.Submit {
				t.Errorf("job %s: inconsistent times %+v", j.ID, j)
			}
		case j.Status == "failed" && j.Reason != "":
		default:
			t.Errorf("job %s ended %q without a reason", j.ID, j.Status)
		}
	}
	if res.Summary.Jobs.Completed == 0 {
		t.Fatal("no job completed")
	}
	if res.Summary.CoallocatedPct == 0 {
		var ends []string
		for _, j := range res.Jobs {
			ends = append(ends, fmt.Sprintf("%s %s on %d clusters %q", j.ID, j.Status, j.Clusters, j.Reason))
		}
		t.Errorf("the smoke scenario co-allocates at least one job; none was: %s", strings.Join(ends, "; "))
	}
	var back map[string]any
	readResults(t, dir, &back)
	if back["backend"] != "inproc" || back["scenario"] != "das3-smoke" {
		t.Errorf("results.json header: backend %v scenario %v", back["backend"], back["scenario"])
	}
	settled()
}

// expand returns a function that expands a loaded scenario, failing the
// test on any error.
func expand(t *testing.T) func(*scenarios.Scenario, error) *scenarios.Plan {
	return func(s *scenarios.Scenario, err error) *scenarios.Plan {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		plan, err := s.Expand(ScenarioEnv(), scenarios.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
}

// runInTemp runs plan on the inproc backend with its results in a
// temporary directory, failing the test on an error.
func runInTemp(t *testing.T, plan *scenarios.Plan, opts Options, timeout time.Duration) (*Result, string) {
	t.Helper()
	opts.Out = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := RunInproc(ctx, plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, opts.Out
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// A malformed choice of shaper fails before anything starts.
func TestInprocRefusesKernelShapers(t *testing.T) {
	plan := expand(t)(scenarios.LoadBuiltin("das3-smoke"))
	_, err := RunInproc(context.Background(), plan, Options{Shaper: "netem"})
	if err == nil || !strings.Contains(err.Error(), "not available on the inproc backend") {
		t.Fatalf("want a clear refusal, got %v", err)
	}
}
