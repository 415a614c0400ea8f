package launch

import (
	"context"
	"math"
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
	plan, res, dir := runTestdata(t, "migrate-qr.yaml", 3*time.Minute)
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
	if mv.From != "vrije" || mv.To != "leiden" || mv.Gain <= 0.3 || mv.MeasuredCostS <= 0 || mv.Phase < 1 {
		t.Errorf("move %+v", mv)
	}
	checkPredictedCost(t, plan, mv.PredictedCostS, "vrije", "leiden")
	t.Logf("moved after phase %d, gain %.2f, predicted cost %.1f s, measured %.1f s; job ran %.0f s", mv.Phase, mv.Gain, mv.PredictedCostS, mv.MeasuredCostS, j.End-j.Start)
	evs := readEvents(t, dir)
	if evs[msg.EventContractViolation] < 1 || evs[msg.EventMigrationStop] != 1 || evs[msg.EventMigrated] != 1 {
		t.Errorf("events %v", evs)
	}
	if !res.Summary.Books.Balanced() || res.Summary.Books.Completed != 1 {
		t.Errorf("books %+v: %v", res.Summary.Books, res.Summary.Books.Err())
	}
	// The matrix survived the move: its checksum is an unmigrated run's.
	if got, ref := endValue(t, dir, j.ID), unmigratedChecksum(t, plan, plan.Jobs[0].Args); got != ref || got == 0 {
		t.Errorf("checksum after the migration %v, unmigrated %v", got, ref)
	}
}

// unmigratedChecksum is the checksum of a qr job of args run on one rank,
// unmigrated (the same on any number of ranks), without its emulated time.
func unmigratedChecksum(t *testing.T, plan *scenarios.Plan, args map[string]float64) float64 {
	t.Helper()
	_, ref, err := apps.RunLocal(context.Background(), apps.QR{}, []apps.RankSpec{{Cluster: "ref"}}, nil,
		apps.Params{TimeScale: plan.TimeScale, Args: args}, apps.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return ref.Value
}

// A prime job holds the fast cluster, so a QR job starts on the slow one;
// when the prime job completes and frees the fast nodes, the rescheduler
// weighs the QR job and moves it onto them, the gain of the decision in its
// event and in the move (its trigger opportunistic: the monitor's upper
// limit is wide, so a loaded host does not make it ask); the job completes
// there with the unmigrated checksum, and results count the opportunistic
// decisions.
func TestInprocOpportunisticMigration(t *testing.T) {
	plan, res, dir := runTestdata(t, "migrate-opportunistic.yaml", 3*time.Minute)
	jobs := map[string]results.Job{}
	for _, j := range res.Jobs {
		if j.Status != results.StatusCompleted {
			t.Fatalf("job %s: %s %q", j.ID, j.Status, j.Reason)
		}
		jobs[j.App] = j
	}
	prime, q := jobs["prime"], jobs["qr"]
	if q.Components != "vrije:4" {
		t.Fatalf("qr job ended on %q, want moved from leiden to vrije", q.Components)
	}
	var decision map[string]any
	for _, ev := range eventLines(t, dir) {
		if ev["kind"] == msg.EventOpportunistic && ev["freed_by"] == prime.ID {
			decision = ev
		}
	}
	if decision == nil || decision["chosen"] != q.ID || decision["migrate"] != "true" || decision["to"] != "vrije" {
		t.Fatalf("opportunistic decision on %s's end: %v", prime.ID, decision)
	}
	gain, here, there, cost := decision["gain"].(float64), decision["here_s"].(float64), decision["there_s"].(float64), decision["cost_s"].(float64)
	if want := (here - there - cost) / here; gain <= 0.3 || math.Abs(gain-want) > 1e-5 {
		t.Errorf("gain %v from here %v s, there %v s, cost %v s (want %v, above 0.3)", gain, here, there, cost, want)
	}
	checkPredictedCost(t, plan, cost, "leiden", "vrije")
	m := res.Summary.Migrations
	if m == nil || len(m.Moves) != 1 || m.Decisions != 0 || m.Opportunistic < 1 || m.OpportunisticChosen != 1 {
		t.Fatalf("migrations %+v", m)
	}
	mv := m.Moves[0]
	if mv.Job != q.ID || mv.From != "leiden" || mv.To != "vrije" || mv.Trigger != "opportunistic" || math.Abs(mv.Gain-gain) > 1e-5 {
		t.Errorf("move %+v", mv)
	}
	t.Logf("moved after phase %d, gain %.2f (here %.0f s, there %.0f s, cost %.1f s), measured cost %.1f s; qr job ran %.0f s",
		mv.Phase, gain, here, there, cost, mv.MeasuredCostS, q.End-q.Start)
	if evs := readEvents(t, dir); evs[msg.EventMigrated] != 1 || evs[msg.EventOpportunistic] != m.Opportunistic {
		t.Errorf("events %v", evs)
	}
	if !res.Summary.Books.Balanced() || res.Summary.Books.Completed != 2 {
		t.Errorf("books %+v: %v", res.Summary.Books, res.Summary.Books.Err())
	}
	var args map[string]float64
	for _, j := range plan.Jobs {
		if j.ID == q.ID {
			args = j.Args
		}
	}
	if got, ref := endValue(t, dir, q.ID), unmigratedChecksum(t, plan, args); got != ref || got == 0 {
		t.Errorf("checksum after the migration %v, unmigrated %v", got, ref)
	}
}

// The same run with the opposite decision forced: the rescheduler's
// "migrate" becomes "stay", the monitor widens its limits and asks again
// later, the job never moves and ends on its loaded nodes, later than the
// migrated one did.
func TestInprocForcedStay(t *testing.T) {
	plan := testdataPlan(t, "migrate-qr.yaml")
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

// checkPredictedCost checks a move's predicted cost (the registry's
// predicted model) against what the grid of plan pays: its start-up delay,
// no wait for a scan (the new nodes are idle), and the checkpoint of the
// plan's qr job, a quarter of it from each of the 4 old nodes, across the
// link between the clusters: within twice that data part.
func checkPredictedCost(t *testing.T, plan *scenarios.Plan, cost float64, from, to string) {
	t.Helper()
	var n float64
	for _, j := range plan.Jobs {
		if j.App == "qr" {
			n = j.Args["n"]
		}
	}
	l, err := plan.Links.Link(from, to)
	if err != nil {
		t.Fatal(err)
	}
	start, data := plan.Policy.StartupDelay.Seconds(), n*(n+1)*8/4/l.Bandwidth
	if cost <= start+data/2 || cost > start+2*data || start <= 0 {
		t.Errorf("predicted cost %v s, want the %v s start-up plus about %v s of data", cost, start, data)
	}
}

// endValue is a job's value (rank 0's checksum) from its end event.
func endValue(t *testing.T, dir, job string) float64 {
	t.Helper()
	for _, ev := range eventLines(t, dir) {
		if ev["kind"] == msg.EventEnd && ev["job"] == job {
			v, _ := ev["value"].(float64)
			return v
		}
	}
	t.Fatalf("no end event of %s", job)
	return 0
}

// Only inproc migrates: the other backends refuse policy.migration before
// anything starts.
func TestCheckRefusesMigration(t *testing.T) {
	plan := testdataPlan(t, "migrate-qr.yaml")
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
