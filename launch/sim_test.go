package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	settled := goroutinesSettle(t)
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
	var back struct {
		Backend   string  `json:"backend"`
		TimeScale float64 `json:"time_scale"`
		Dilation  float64 `json:"dilation"`
		Fidelity  struct {
			Verdict string   `json:"verdict"`
			Reasons []string `json:"reasons"`
		} `json:"fidelity"`
	}
	readResults(t, dir, &back)
	if back.Backend != "sim" || back.TimeScale != 1 || back.Dilation != 1 {
		t.Errorf("results.json: backend %q, time scale %g, dilation %g; want sim, 1, 1", back.Backend, back.TimeScale, back.Dilation)
	}
	if back.Fidelity.Verdict != "unmeasured" || len(back.Fidelity.Reasons) == 0 || !strings.Contains(back.Fidelity.Reasons[0], "sim backend") {
		t.Errorf("results.json fidelity: %q %v; want unmeasured, with the sim backend's reason", back.Fidelity.Verdict, back.Fidelity.Reasons)
	}
	// A sweep runs hundreds of simulations in one process.
	settled()
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

// The sim backend predicts from the typed Traffic unless told otherwise
// (the same as --model typed); with --model shipped das3-smoke's wave jobs
// of 16 nodes (a measured size) and its poisson job of 12 (between two)
// take the file's time, and results.json says so; the file changes the
// measured sizes' times, and a model
// file that does not parse fails the run before it starts. (The fallback
// beyond the file is sim's TestPredictUsesTheFile.)
func TestSimModelFile(t *testing.T) {
	plan := expand(t)(scenarios.LoadBuiltin("das3-smoke"))
	run := func(model string) (*Result, map[string]any, error) {
		dir := t.TempDir()
		res, err := RunSim(context.Background(), plan, Options{Out: dir, SimModel: model})
		if err != nil {
			return nil, nil, err
		}
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Extra struct {
				Model map[string]any `json:"model"`
			} `json:"extra"`
		}
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		return res, back.Extra.Model, nil
	}
	learnt, lm, err := run("shipped")
	if err != nil {
		t.Fatal(err)
	}
	typed, tm, err := run("")
	if err != nil {
		t.Fatal(err)
	}
	src := lm["sources"].(map[string]any)
	if !strings.Contains(lm["file"].(string), "models/inproc.json") || src["wave/16"] != "file" || src["poisson/12"] != "file" {
		t.Fatalf("results.json extra.model with the shipped file: %v", lm)
	}
	if tm["file"] != "typed" || tm["sources"].(map[string]any)["wave/16"] != "typed" {
		t.Fatalf("results.json extra.model with --model typed: %v", tm)
	}
	exec := func(r *Result, id string) float64 {
		for _, j := range r.Jobs {
			if j.ID == id {
				return j.Exec()
			}
		}
		t.Fatalf("no job %s", id)
		return 0
	}
	if a, b := exec(learnt, "j0001"), exec(typed, "j0001"); a == b {
		t.Errorf("j0001 (wave, 16 nodes) takes %v s with the learnt model and with the typed one", a)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1, "provenance": {"backend": "inproc"}, "reference": {"latency_ms": 0.03, "bandwidth_mbps": 560}, "apps": {"wave": {"sizes": [{"ranks": 8, "iterations": 10, "iteration_s": -1}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(bad); err == nil || !strings.Contains(err.Error(), "apps.wave.sizes[0].iteration_s") {
		t.Fatalf("a malformed model file: err %v, want one naming apps.wave.sizes[0].iteration_s", err)
	}
}
