package scenarios

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func batchScenario(t *testing.T, yaml string, files map[string]string) (*Plan, error) {
	t.Helper()
	dir := t.TempDir()
	files["s.yaml"] = yaml
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s.Expand(fakeEnv(), Overrides{})
}

const okTrace = "; MaxProcs: 8\n" +
	"1 0 0 100 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1\n" +
	"2 10 0 300 8 -1 -1 8 400 -1 1 1 1 -1 -1 -1 -1 -1\n" +
	"3 20 0 500 16 -1 -1 16 300 -1 1 1 1 -1 -1 -1 -1 -1\n" + // wider than the cluster: skipped
	"4 30 0 0 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n" + // no run time: skipped
	"5 99999 0 50 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n" // after the window

func TestBatchPlan(t *testing.T) {
	p, err := batchScenario(t, `name: b
batch:
  clusters: [{name: a, processors: 8}, {name: b, processors: 4, speed: 1.2}]
  traces: [{file: t.swf, cluster: a, length_s: 1000}]
  realloc: {mode: regular, heuristic: minmin}
`, map[string]string{"t.swf": okTrace})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Batch
	if b == nil || b.Policy != "cbf" || b.Mode != "regular" || b.Heuristic != "minmin" || b.Period != DefaultReallocPeriod || b.Threshold != DefaultReallocThreshold {
		t.Fatalf("batch plan %+v", b)
	}
	if len(p.Jobs) != 2 || p.Jobs[0].ID != "a-1" || p.Jobs[1].ID != "a-2" || p.Jobs[1].Size != 8 || p.Jobs[0].Request != RequestGrid {
		t.Fatalf("jobs %+v", p.Jobs)
	}
	tb := b.Traces[0]
	if tb.Window != 4 || tb.Kept != 2 || tb.Skipped["wider-than-max-procs"] != 1 || tb.Skipped["zero-or-unknown-run-time"] != 1 {
		t.Errorf("trace books %+v", tb)
	}
	if p.TotalNodes() != 12 || p.Duration < p.Jobs[1].Submit {
		t.Errorf("%d nodes, duration %v", p.TotalNodes(), p.Duration)
	}
}

func TestBatchErrorsNameTheField(t *testing.T) {
	cases := []struct {
		yaml, trace, path, msg string
	}{
		{"policy: sjf\n  clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]", okTrace, "batch.policy", "sjf"},
		{"clusters: [{name: a, processors: 0}]\n  traces: [{file: t.swf, cluster: a}]", okTrace, "batch.clusters[0].processors", "at least 1"},
		{"clusters: [{name: a, processors: 8}, {name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]", okTrace, "batch.clusters[1].name", "duplicate"},
		{"clusters: [{name: a, processors: 8, speed: -1}]\n  traces: [{file: t.swf, cluster: a}]", okTrace, "batch.clusters[0].speed", "(0, 100]"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: z}]", okTrace, "batch.traces[0].cluster", "unknown"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a, max_procs: 9}]", okTrace, "batch.traces[0].max_procs", "[0, 8]"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: nope.swf, cluster: a}]", okTrace, "batch.traces[0].file", "does not exist"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]\n  local_share: 1.5", okTrace, "batch.local_share", "[0, 1]"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]\n  realloc: {mode: sometimes}", okTrace, "batch.realloc.mode", "sometimes"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]\n  realloc: {heuristic: maxmin}", okTrace, "batch.realloc.heuristic", "maxmin"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]\n  realloc: {period_s: 0}", okTrace, "batch.realloc.period_s", "greater than 0"},
		// A malformed trace: the error names the file, the line and the field.
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]", okTrace + "6 100 0 50 -3 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n", "batch.traces[0].file", "t.swf:7"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]", okTrace + "6 100 0 fifty 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n", "batch.traces[0].file", "run time"},
		{"clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]", okTrace + "6 100 0\n", "batch.traces[0].file", "t.swf:7"},
	}
	for _, c := range cases {
		_, err := batchScenario(t, "name: b\nbatch:\n  "+c.yaml+"\n", map[string]string{"t.swf": c.trace})
		es, ok := err.(Errors)
		if !ok || !es.HasPath(c.path) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want an error at %s with %q", c.path, err, c.path, c.msg)
		}
	}
	// A batch grid takes no KOALA sections.
	_, err := batchScenario(t, "name: b\nworkload: {application: prime}\nbatch:\n  clusters: [{name: a, processors: 8}]\n  traces: [{file: t.swf, cluster: a}]\n",
		map[string]string{"t.swf": okTrace})
	if es, ok := err.(Errors); !ok || !es.HasPath("workload") {
		t.Errorf("workload beside batch: %v", err)
	}
}

// The local share is drawn per job from the seed: about two thirds at
// 0.667, the same draw for the same seed.
func TestBatchLocalShare(t *testing.T) {
	for _, name := range []string{"realloc-homogeneous-non-dedicated", "realloc-heterogeneous-non-dedicated"} {
		s, err := LoadBuiltin(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Expand(fakeEnv(), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		local := 0
		for _, j := range p.Batch.Jobs {
			if j.Local {
				local++
			}
		}
		if f := float64(local) / float64(len(p.Batch.Jobs)); f < 0.6 || f > 0.73 {
			t.Errorf("%s: %d of %d jobs local (%.2f)", name, local, len(p.Batch.Jobs), f)
		}
	}
}

func TestReallocOverrides(t *testing.T) {
	s, err := LoadBuiltin("realloc-homogeneous-dedicated")
	if err != nil {
		t.Fatal(err)
	}
	mode, h := "all-cancellation", "minmin"
	p, err := s.Expand(fakeEnv(), Overrides{ReallocMode: &mode, ReallocHeuristic: &h})
	if err != nil {
		t.Fatal(err)
	}
	if p.Batch.Mode != mode || p.Batch.Heuristic != h || s.Batch.Realloc.Mode != "regular" {
		t.Errorf("mode %s, heuristic %s; the scenario's mode is now %s", p.Batch.Mode, p.Batch.Heuristic, s.Batch.Realloc.Mode)
	}
	bad := "sometimes"
	if _, err := s.Expand(fakeEnv(), Overrides{ReallocMode: &bad}); err == nil || !err.(Errors).HasPath("batch.realloc.mode") {
		t.Errorf("a bad mode override: %v", err)
	}
	koala, err := LoadBuiltin("das3-smoke")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := koala.Expand(fakeEnv(), Overrides{ReallocMode: &mode}); err == nil || !err.(Errors).HasPath("batch") {
		t.Errorf("a reallocation override on a KOALA grid: %v", err)
	}
}
