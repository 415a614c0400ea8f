package launch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// A QR job whose nodes get loaded violates its contract, the rescheduler
// decides to migrate it, its checkpoint moves to the other cluster and it
// completes there with the matrix's checksum of an unmigrated run; the
// migration is in results.json with its predicted and measured cost, and
// the books balance.
func TestInprocMigratesLoadedJob(t *testing.T) {
	plan := expand(t)(scenarios.Load(filepath.Join("testdata", "migrate-qr.yaml")))
	res, dir := runInTemp(t, plan, Options{}, 3*time.Minute)
	if len(res.Jobs) != 1 {
		t.Fatalf("jobs %+v", res.Jobs)
	}
	j := res.Jobs[0]
	if j.Status != results.StatusCompleted || j.Components != "leiden:8" {
		t.Fatalf("job %s on %q: %s %q; want completed, moved from vrije to leiden", j.ID, j.Components, j.Status, j.Reason)
	}
	m := res.Summary.Migrations
	if m == nil || len(m.Moves) != 1 || m.Decisions < 1 {
		t.Fatalf("migrations %+v", m)
	}
	mv := m.Moves[0]
	if mv.From != "vrije" || mv.To != "leiden" || mv.Gain <= 0.3 || mv.PredictedCostS < 360 || mv.MeasuredCostS <= 0 || mv.Phase < 1 {
		t.Errorf("move %+v", mv)
	}
	t.Logf("moved after phase %d, gain %.2f, predicted cost %.1f s, measured %.1f s; job ran %.0f s", mv.Phase, mv.Gain, mv.PredictedCostS, mv.MeasuredCostS, j.End-j.Start)
	evs := readEvents(t, dir)
	if evs[msg.EventContractViolation] < 1 || evs[msg.EventMigrationStop] != 1 || evs[msg.EventMigrated] != 1 {
		t.Errorf("events %v", evs)
	}
	if !res.Summary.Books.Balanced() || res.Summary.Books.Completed != 1 {
		t.Errorf("books %+v: %v", res.Summary.Books, res.Summary.Books.Err())
	}
	// The matrix survived the move: its checksum is an unmigrated run's.
	args := plan.Jobs[0].Args
	_, ref, err := apps.RunLocal(context.Background(), apps.QR{}, []apps.RankSpec{{Cluster: "vrije"}}, nil,
		apps.Params{TimeScale: plan.TimeScale, Args: args}, apps.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if got := endValue(t, dir, j.ID); got != ref.Value || got == 0 {
		t.Errorf("checksum after the migration %v, unmigrated %v", got, ref.Value)
	}
}

// The same run with the opposite decision forced: the rescheduler's
// "migrate" becomes "stay", the monitor widens its limits and asks again
// later, the job never moves and ends on its loaded nodes, later than the
// migrated one did.
func TestInprocForcedStay(t *testing.T) {
	plan := expand(t)(scenarios.Load(filepath.Join("testdata", "migrate-qr.yaml")))
	plan.Policy.Migration.Invert = true
	res, dir := runInTemp(t, plan, Options{}, 3*time.Minute)
	j := res.Jobs[0]
	if j.Status != results.StatusCompleted || j.Components != "vrije:4" {
		t.Fatalf("job on %q: %s %q; want completed on vrije", j.Components, j.Status, j.Reason)
	}
	m := res.Summary.Migrations
	if m == nil || len(m.Moves) != 0 || m.Decisions < 1 || m.Declined != m.Decisions {
		t.Fatalf("migrations %+v: want decisions, all declined, no move", m)
	}
	if evs := readEvents(t, dir); evs[msg.EventMigrated] != 0 || evs[msg.EventContractViolation] != m.Decisions {
		t.Errorf("events %v", evs)
	}
	t.Logf("forced to stay: %d requests declined, job ran %.0f s", m.Decisions, j.End-j.Start)
	if j.End-j.Start < 900 {
		t.Errorf("the loaded job ran %.0f s: the load did not slow it", j.End-j.Start)
	}
}

// endValue is a job's value (rank 0's checksum) from its end event.
func endValue(t *testing.T, dir, job string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Kind  string  `json:"kind"`
			Job   string  `json:"job"`
			Value float64 `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == msg.EventEnd && ev.Job == job {
			return ev.Value
		}
	}
	t.Fatalf("no end event of %s", job)
	return 0
}

// Only inproc migrates: the other backends refuse policy.migration before
// anything starts.
func TestCheckRefusesMigration(t *testing.T) {
	plan := expand(t)(scenarios.Load(filepath.Join("testdata", "migrate-qr.yaml")))
	plan.Faults = nil
	for _, b := range Backends() {
		err := Check(b, plan, Options{})
		if b.Name() == "inproc" {
			if err != nil {
				t.Errorf("inproc: %v", err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "policy.migration: the "+b.Name()+" backend cannot migrate running jobs") {
			t.Errorf("%s: want a refusal of policy.migration, got %v", b.Name(), err)
		}
	}
}
