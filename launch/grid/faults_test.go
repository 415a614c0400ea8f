package grid

import (
	"strings"
	"testing"
)

// A kill on the faults timeline kills the node's host as a crash would;
// the membership detects it, as it detects any host lost, and the job with
// a rank there fails with cause node_down. The fault is in the results.
func TestFaultsTimelineKillsAHost(t *testing.T) {
	p := newProcTest(t, "fail-faults.yaml")
	res, err := p.run("", Config{})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, p.progress.String())
	}
	for _, j := range res.Jobs {
		switch {
		case j.ID == "j0001":
			if j.Status != "failed" || j.Cause != "node_down" || !strings.HasPrefix(j.Reason, "node alpha-n002 of cluster alpha went down") {
				t.Errorf("j0001: %s %q (cause %q), want failed by the node (cause node_down)", j.Status, j.Reason, j.Cause)
			}
		case j.Status != "completed":
			t.Errorf("%s: %s %q, want completed", j.ID, j.Status, j.Reason)
		}
	}
	f := res.Summary.Faults
	if f == nil || len(f.Applied) != 1 || f.Applied[0].Kind != "kill" || f.Applied[0].Target != "alpha-n002" || f.Applied[0].Error != "" {
		t.Fatalf("faults section %+v", f)
	}
	if f.Applied[0].DetectedAfterS == nil {
		t.Error("the kill was never detected (no node_down)")
	} else {
		t.Logf("kill detected %.1f s (scenario) after it", *f.Applied[0].DetectedAfterS)
	}
	if f.FailedByCause["node_down"] != 1 || res.Summary.Extra["jobs_failed_by_node_failure"] != 1 {
		t.Errorf("failed by cause %v, extra %v", f.FailedByCause, res.Summary.Extra)
	}
	if !res.Summary.Books.Balanced() {
		t.Errorf("books: %v", res.Summary.Books.Err())
	}
}
