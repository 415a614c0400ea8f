package grid

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/wiring"
)

// A whole run with every host in this process: every job completes, the
// results directory is complete with backend "docker", the manifest says
// which mechanism every link uses, events come from the hosts.
func TestRunInProcess(t *testing.T) {
	p := newProcTest(t, "small.yaml")
	plan, plat, progress := p.plan, p.plat, &p.progress
	dir := t.TempDir()
	res, err := p.run(dir, Config{})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s\nhosts:\n%s", err, progress.String(), p.logs.String())
	}
	for _, j := range res.Jobs {
		if j.Status != "completed" {
			t.Errorf("job %s: %s %q", j.ID, j.Status, j.Reason)
		}
		if j.Submit < 0 || j.Start < j.Placement || j.Placement < j.Submit || j.Exec() <= 0 {
			t.Errorf("job %s: inconsistent times %+v", j.ID, j)
		}
	}
	if res.Summary.Jobs.Completed != len(plan.Jobs) {
		t.Fatalf("completed %d of %d jobs\n%s", res.Summary.Jobs.Completed, len(plan.Jobs), progress.String())
	}
	if res.Summary.Backend != "docker" || res.Summary.Shaper != "userspace" {
		t.Errorf("summary: backend %q shaper %q", res.Summary.Backend, res.Summary.Shaper)
	}
	if res.Summary.Extra["node_failures"] != 0 {
		t.Errorf("node failures: %v", res.Summary.Extra["node_failures"])
	}
	// No job is submitted before its planned time (scenario time 0 is
	// shared); how late it comes depends on the host and is not asserted.
	for i, j := range res.Jobs {
		if want := plan.Jobs[i].Submit.Seconds(); j.Submit < want-1 {
			t.Errorf("job %s submitted at %.2f s, before its planned %.2f s", j.ID, j.Submit, want)
		}
	}
	if got := len(res.Manifest.Entries); got != 4 {
		t.Errorf("manifest has %d entries, want 4 (2x2 pairs)", got)
	}
	for _, e := range res.Manifest.Entries {
		if e.Mechanism != "userspace" || !strings.Contains(e.Reason, "nodes of "+e.Src) {
			t.Errorf("manifest %s-%s: mechanism %q reason %q", e.Src, e.Dst, e.Mechanism, e.Reason)
		}
	}
	if missing := wiring.MissingResults(dir, false); len(missing) > 0 {
		t.Errorf("results directory lacks %v", missing)
	}
	ev, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{`"source":"scheduler"`, `"source":"runner"`, `"kind":"probe"`} {
		if !strings.Contains(string(ev), src) {
			t.Errorf("events.jsonl has no %s event", src)
		}
	}
	if !strings.Contains(progress.String(), "joined the membership") {
		t.Errorf("no startup progress:\n%s", progress.String())
	}
	t.Logf("progress:\n%s", progress.String())
	if left, _ := plat.Exited(context.Background()); len(left) != 0 {
		t.Errorf("hosts left behind: %v", left)
	}
}

// A node the membership declares dead mid-run: the job with a rank there
// fails with a reason naming the node, the cluster manager takes the node
// out of service, every other job completes, results.json counts it.
func TestNodeFailureInProcess(t *testing.T) {
	p := newProcTest(t, "fail.yaml")
	plan, progress, logs := p.plan, &p.progress, &p.logs
	var once sync.Once
	killed := make(chan error, 1)
	res, err := p.run("", Config{OnEvent: func(ev *msg.Event) {
		if ev.Kind == "start" && ev.JobId == "j0001" {
			once.Do(func() { go func() { killed <- p.plat.kill("alpha-n002") }() })
		}
	}})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("job j0001 never started, so no node was failed")
	}
	byID := map[string]string{}
	for _, j := range res.Jobs {
		byID[j.ID] = j.Status + ": " + j.Reason
		switch j.ID {
		case "j0001":
			if j.Status != "failed" || !strings.HasPrefix(j.Reason, "node alpha-n002 of cluster alpha went down") || j.Cause != "node_down" {
				t.Errorf("j0001: %s %q (cause %q), want failed by the node (cause node_down)", j.Status, j.Reason, j.Cause)
			}
		default:
			if j.Status != "completed" {
				t.Errorf("%s: %s %q, want completed", j.ID, j.Status, j.Reason)
			}
		}
	}
	if len(res.Jobs) != len(plan.Jobs) {
		t.Errorf("%d of %d jobs recorded: %v", len(res.Jobs), len(plan.Jobs), byID)
	}
	if res.Summary.Extra["node_failures"] != 1 || res.Summary.Extra["jobs_failed_by_node_failure"] != 1 {
		t.Errorf("extra: %v", res.Summary.Extra)
	}
	if !strings.Contains(progress.String(), "node alpha-n002 of alpha fail") {
		t.Errorf("progress does not report the failure:\n%s", progress.String())
	}
	if !strings.Contains(logs.String(), "node alpha-n002 failed") {
		t.Errorf("the cluster manager's host did not log the failure:\n%s", logs.String())
	}
}
