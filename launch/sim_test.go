package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/scenarios"
)

// runSimInTemp runs plan on the sim backend with its results in a
// temporary directory, failing the test on an error.
func runSimInTemp(t *testing.T, plan *scenarios.Plan) (*Result, string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := LookupBackend("sim")
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(ctx, plan, Options{Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	return res, dir
}

// das3-smoke, as the scenario states it (dilation auto, a wall budget),
// runs on the sim backend to completion: every job completed with
// consistent times, dilation and time scale reported as 1, the verdict
// "unmeasured", every results file written.
func TestSimSmoke(t *testing.T) {
	before := runtime.NumGoroutine()
	plan := expand(t)(scenarios.LoadBuiltin("das3-smoke"))
	res, dir := runSimInTemp(t, plan)
	if res.Summary.Jobs.Submitted != len(plan.Jobs) || res.Summary.Jobs.Completed != len(plan.Jobs) {
		t.Fatalf("%d jobs planned, %d submitted, %d completed", len(plan.Jobs), res.Summary.Jobs.Submitted, res.Summary.Jobs.Completed)
	}
	for _, j := range res.Jobs {
		if j.Status != "completed" || j.Exec() <= 0 || j.Start < j.Placement || j.Placement < j.Submit {
			t.Errorf("job %s: %s (%s), times %+v", j.ID, j.Status, j.Reason, j)
		}
	}
	if res.Summary.CoallocatedPct == 0 {
		t.Error("the smoke scenario co-allocates at least one job; none was")
	}
	if missing := wiring.MissingResults(dir, false); len(missing) > 0 {
		t.Errorf("results directory lacks %v", missing)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Backend   string  `json:"backend"`
		TimeScale float64 `json:"time_scale"`
		Dilation  float64 `json:"dilation"`
		Fidelity  struct {
			Verdict string   `json:"verdict"`
			Reasons []string `json:"reasons"`
		} `json:"fidelity"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Backend != "sim" || back.TimeScale != 1 || back.Dilation != 1 {
		t.Errorf("results.json: backend %q, time scale %g, dilation %g; want sim, 1, 1", back.Backend, back.TimeScale, back.Dilation)
	}
	if back.Fidelity.Verdict != "unmeasured" || len(back.Fidelity.Reasons) == 0 || !strings.Contains(back.Fidelity.Reasons[0], "sim backend") {
		t.Errorf("results.json fidelity: %q %v; want unmeasured, with the sim backend's reason", back.Fidelity.Verdict, back.Fidelity.Reasons)
	}
	// Nothing left running (a sweep runs hundreds of simulations in one
	// process): goroutines return to where they were, within a deadline.
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines before the run, %d after:\n%s", before, runtime.NumGoroutine(), firstLines(string(buf[:n]), 80))
		}
		<-time.After(20 * time.Millisecond)
	}
}

// A simulation whose context ends stops at once: its jobs are reported
// interrupted, its books balance, and Run says it was interrupted.
func TestSimInterrupted(t *testing.T) {
	plan := expand(t)(scenarios.LoadBuiltin("das3-smoke"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := RunSim(ctx, plan, Options{Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("cancelled run: %v; want an interruption", err)
	}
	if res == nil || len(res.Jobs) != len(plan.Jobs) {
		t.Fatalf("cancelled run: result %v; want every job reported", res)
	}
	for _, j := range res.Jobs {
		if j.Status != "interrupted" {
			t.Errorf("job %s: %s, want interrupted", j.ID, j.Status)
		}
	}
}

// Two runs of the same plan give the same jobs.csv, byte for byte, and the
// same events apart from their wall-clock stamps.
func TestSimDeterministic(t *testing.T) {
	plan := func() *scenarios.Plan { return expand(t)(scenarios.LoadBuiltin("das3-coalloc")) }
	_, a := runSimInTemp(t, plan())
	_, b := runSimInTemp(t, plan())
	ja, err := os.ReadFile(filepath.Join(a, "jobs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	jb, err := os.ReadFile(filepath.Join(b, "jobs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Fatalf("two runs of one plan wrote different jobs.csv:\n%s\n---\n%s", firstLines(string(ja), 20), firstLines(string(jb), 20))
	}
	if n := bytes.Count(ja, []byte("\n")); n < 20 {
		t.Fatalf("jobs.csv has %d lines; the determinism check needs a real workload", n)
	}
	ea, eb := eventsSansWall(t, a), eventsSansWall(t, b)
	if len(ea) != len(eb) {
		t.Fatalf("%d events against %d", len(ea), len(eb))
	}
	for i := range ea {
		if ea[i] != eb[i] {
			t.Fatalf("event %d differs:\n%s\n%s", i, ea[i], eb[i])
		}
	}
}

// eventsSansWall reads events.jsonl of dir without each event's wall time.
func eventsSansWall(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		delete(ev, "wall_s")
		c, _ := json.Marshal(ev)
		out = append(out, string(c))
	}
	return out
}

// Malleable plans are refused in one place (Check), with the reason.
func TestSimRefusesMalleable(t *testing.T) {
	b, err := LookupBackend("sim")
	if err != nil {
		t.Fatal(err)
	}
	plan := expand(t)(scenarios.LoadBuiltin("das3-malleable-smoke"))
	if err := Check(b, plan, Options{}); err == nil || !strings.Contains(err.Error(), "sim backend") {
		t.Fatalf("malleable plan: %v; want a refusal naming the sim backend", err)
	}
	rigid := expand(t)(scenarios.LoadBuiltin("das3-smoke"))
	rigid.Jobs[0].App = "ft"
	if err := Check(b, rigid, Options{}); err == nil || !strings.Contains(err.Error(), "ft") {
		t.Fatalf("a rigid plan with an ft job: %v; want a refusal naming ft", err)
	}
	if err := Check(b, rigid, Options{Shaper: "netem"}); err == nil {
		t.Fatal("the sim backend accepted the netem shaper")
	}
	if _, err := b.Calibrate(context.Background(), CalibrateRequest{}); err == nil {
		t.Fatal("the sim backend calibrated")
	}
}
