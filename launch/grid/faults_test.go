package grid

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/faultstest"
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

// A load on the faults timeline reaches the nodes' hosts (GridLoad) and
// their node actors as on inproc: launch/testdata's faults-load.yaml, the
// inproc backend's test scenario, puts two programs on each leiden node
// from 50 s to 150 s, so the leiden job computes at half speed for 100 s
// and runs about 50 s longer than the vrije job, which nothing loads.
// Both faults are applied without error and every leiden node records its
// load and its unload (node_load).
func TestFaultsTimelineLoadsNodes(t *testing.T) {
	p := newProcTest(t, filepath.Join("..", "..", "testdata", "faults-load.yaml"))
	var mu sync.Mutex
	loads := map[string]int{} // node -> node_load events
	res, err := p.run("", Config{OnEvent: func(ev *msg.Event) {
		if ev.Kind == msg.EventNodeLoad {
			mu.Lock()
			loads[ev.Fields["node"]]++
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, p.progress.String())
	}
	mu.Lock()
	defer mu.Unlock()
	faultstest.CheckLoadRun(t, res.Jobs, res.Summary.Faults.Applied, loads, 10)
}
