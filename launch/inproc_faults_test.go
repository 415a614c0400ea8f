package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/faultstest"
	"github.com/koala-emu/koala-emu/results"
)

// A killed node fails its job with the typed cause node_down; with
// resubmit(1) the job runs again once, and the second kill fails it for
// good; the other job completes and the books balance with the
// resubmission counted.
func TestInprocKillResubmits(t *testing.T) {
	_, res, _ := runTestdata(t, "faults-kill.yaml", 2*time.Minute)
	byID := jobsByID(res)
	j1, j2 := byID["j0001"], byID["j0002"]
	if j1.App == "" || j2.App == "" {
		t.Fatalf("jobs %+v", res.Jobs)
	}
	// Both jobs arrive at 0: j0001 is the leiden job (explicit order).
	if j1.Status != results.StatusFailed || j1.Cause != msg.FailureCause_FAILURE_NODE_DOWN.Name() || j1.Resubmissions != 1 ||
		!strings.Contains(j1.Reason, "leiden-n002") {
		t.Errorf("leiden job: %s cause %q after %d resubmissions (%q); want failed, node_down, 1, on leiden-n002",
			j1.Status, j1.Cause, j1.Resubmissions, j1.Reason)
	}
	if j2.Status != results.StatusCompleted {
		t.Errorf("vrije job: %s %q, want completed", j2.Status, j2.Reason)
	}
	b := res.Summary.Books
	if b == nil || !b.Balanced() || b.Submitted != 3 || b.Resubmitted != 1 || b.Failed != 1 || b.Completed != 1 {
		t.Errorf("books %+v, want 3 submissions = 1 completed + 1 failed + 1 resubmitted, balanced", b)
	}
	f := res.Summary.Faults
	if f == nil || len(f.Applied) != 2 || f.FailedByCause["node_down"] != 1 || f.Resubmissions != 1 {
		t.Fatalf("faults section %+v", f)
	}
	for _, a := range f.Applied {
		if a.Kind != "kill" || a.Error != "" || a.DetectedAfterS == nil || a.Job != "j0001" {
			t.Errorf("fault %+v: want a kill of j0001's node, applied and detected", a)
		}
	}
}

// A partitioned cluster takes no job until it heals: the job fixed on
// leiden is placed after the heal, the flexible job goes to vrije; a job
// spanning the cut stalls and ends after the heal, completed; the
// degrade and its restore are applied; the information service recorded
// the cluster unreachable and reachable again.
func TestInprocPartitionHeals(t *testing.T) {
	_, res, dir := runTestdata(t, "faults-partition.yaml", 2*time.Minute)
	for _, j := range res.Jobs {
		if j.Status != results.StatusCompleted {
			t.Errorf("job %s: %s %q", j.ID, j.Status, j.Reason)
		}
	}
	byID := jobsByID(res)
	if j := byID["j0001"]; j.Clusters != 2 || j.End < 220 {
		t.Errorf("the job spanning the cut ran on %d clusters and ended at %.1f s, before the heal at 220 s", j.Clusters, j.End)
	}
	if j := byID["j0002"]; j.Placement < 220 {
		t.Errorf("the job fixed on leiden was placed at %.1f s, before the heal at 220 s", j.Placement)
	}
	if j := byID["j0003"]; !strings.HasPrefix(j.Components, "vrije:") || strings.Contains(j.Components, "leiden") {
		t.Errorf("the flexible job went to %q during the partition, want vrije only", j.Components)
	}
	f := res.Summary.Faults
	var kinds []string
	for _, a := range f.Applied {
		kinds = append(kinds, a.Kind)
		if a.Error != "" {
			t.Errorf("fault %+v not applied", a)
		}
	}
	if got := strings.Join(kinds, ","); got != "partition,heal,degrade,restore" {
		t.Errorf("faults applied: %s", got)
	}
	evs := readEvents(t, dir)
	if evs[msg.EventUnreachable] != 1 || evs[msg.EventReachable] != 1 {
		t.Errorf("unreachable/reachable events: %d/%d, want 1/1", evs[msg.EventUnreachable], evs[msg.EventReachable])
	}
	if !res.Summary.Books.Balanced() {
		t.Errorf("books: %v", res.Summary.Books.Err())
	}
}

// Loading programs on a cluster's nodes stretch the computation of the job
// running there while they last, and only there: the leiden job computes
// at half speed from 50 s to 150 s and takes about 50 s longer than the
// vrije job; every node records its load and its unload.
func TestInprocLoadSlowsJob(t *testing.T) {
	_, res, dir := runTestdata(t, "faults-load.yaml", 2*time.Minute)
	loads := map[string]int{}
	for _, ev := range eventLines(t, dir) {
		if ev["kind"] == msg.EventNodeLoad {
			loads[fmt.Sprint(ev["node"])]++
		}
	}
	faultstest.CheckLoadRun(t, res.Jobs, res.Summary.Faults.Applied, loads, 0)
	if !res.Summary.Books.Balanced() {
		t.Errorf("books: %v", res.Summary.Books.Err())
	}
}

// A backend that cannot apply a kind of fault refuses the plan before
// anything starts, naming the entry: inproc and the grid backends apply
// every kind, loads included; the sim backend applies nothing.
func TestCheckRefusesFaults(t *testing.T) {
	kill := testdataPlan(t, "faults-kill.yaml")
	part := testdataPlan(t, "faults-partition.yaml")
	load := testdataPlan(t, "faults-load.yaml")
	for _, b := range Backends() {
		errKill, errPart, errLoad := Check(b, kill, Options{}), Check(b, part, Options{}), Check(b, load, Options{})
		if b.Name() != "sim" {
			if errKill != nil || errPart != nil || errLoad != nil {
				t.Errorf("%s: a kill, partition or load refused: %v; %v; %v", b.Name(), errKill, errPart, errLoad)
			}
			continue
		}
		for kind, err := range map[string]error{"kill": errKill, "load": errLoad} {
			if err == nil || !strings.Contains(err.Error(), "faults[0]: the sim backend cannot apply "+kind+" faults (it applies: none") {
				t.Errorf("sim: want a refusal of the %s naming faults[0], got %v", kind, err)
			}
		}
	}
	_, err := RunSim(context.Background(), kill, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot apply kill faults") {
		t.Errorf("sim run: want the refusal, got %v", err)
	}
}

// readEvents counts the events of a run's events.jsonl by kind.
func readEvents(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range eventLines(t, dir) {
		out[fmt.Sprint(ev["kind"])]++
	}
	return out
}

// eventLines is a run's events.jsonl, one map per event.
func eventLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}
