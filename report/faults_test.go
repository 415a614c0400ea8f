package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run whose results.json has a faults section gets a Faults section on
// the page: every fault applied, the job it hit, when it was detected.
func TestFaultsSection(t *testing.T) {
	root := fresh(t)
	dir := filepath.Join(root, "run-wf")
	path := filepath.Join(dir, "results.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	sum["faults"] = map[string]any{
		"applied": []map[string]any{
			{"t_s": 120.0, "kind": "kill", "target": "vrije-n003", "job": "j0007", "detected_after_s": 0.25},
			{"t_s": 180.0, "kind": "degrade", "target": "vrije", "peer": "amsterdam", "latency_factor": 1.0, "bandwidth_factor": 0.5},
		},
		"failed_by_cause": map[string]int{"node_down": 1}, "resubmissions": 2, "jobs_resubmitted": 1,
	}
	if b, err = json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report")
	if err := Write(out, []string{dir, filepath.Join(root, "run-fcm")}, Options{}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, PageHTML))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{`<h2 id="faults">Faults</h2>`, "vrije-n003", "j0007", "0.25", "amsterdam", "node_down 1", "resubmissions: 2 of 1 jobs"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Count(html, "<h3><code>") != 1 {
		t.Errorf("want one run in the faults section (run-fcm has none)")
	}
}
