package batch_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
	"github.com/koala-emu/koala-emu/actors/virtualtest"
)

const s = time.Second

func cluster(t *testing.T, w *virtualtest.World, pol string, capacity int) *actor.PID {
	t.Helper()
	return clusterWith(t, w, pol, capacity, func(*batch.Config) {})
}

// clusterWith spawns batch cluster c0, its configuration changed by set.
func clusterWith(t *testing.T, w *virtualtest.World, pol string, capacity int, set func(*batch.Config)) *actor.PID {
	t.Helper()
	p, err := policy.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	cfg := batch.Config{Name: "c0", Capacity: capacity, Policy: p, Env: w.Env}
	set(&cfg)
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	return w.Spawn(batch.Props(cfg), "batch-c0")
}

func job(id string, procs int, wall, run time.Duration) *msg.BatchSubmit {
	return &msg.BatchSubmit{Job: &msg.BatchJob{Id: id, Procs: int32(procs), WalltimeNs: int64(wall), RuntimeNs: int64(run)}}
}

// at returns the instant of the job's event of the given kind (-1 if none).
func at(w *virtualtest.World, kind, id string) time.Duration {
	for _, ev := range w.Events(kind) {
		if ev.JobId == id {
			return time.Duration(ev.TS * float64(time.Second))
		}
	}
	return -1
}

// endedOnce checks that n jobs had one event of the kinds each.
func endedOnce(t *testing.T, w *virtualtest.World, n int, kinds ...string) {
	t.Helper()
	ends := map[string]int{}
	for _, ev := range w.Events(kinds...) {
		ends[ev.JobId]++
	}
	if len(ends) != n {
		t.Errorf("%d jobs ended, want %d", len(ends), n)
	}
	for id, k := range ends {
		if k != 1 {
			t.Errorf("job %s ended %d times", id, k)
		}
	}
}

// neverOver checks that the jobs between their event start and one of
// ends never held more processors than capacity (a job's processors are
// those it was queued with; an end without a start holds none).
func neverOver(t *testing.T, w *virtualtest.World, capacity int, start string, ends ...string) {
	t.Helper()
	procs := map[string]int{}
	for _, ev := range w.Events(msg.EventBatchQueued) {
		procs[ev.JobId] = int(ev.Values["procs"])
	}
	busy, held := 0, map[string]bool{}
	for _, ev := range w.Events(append(ends, start)...) {
		switch {
		case ev.Kind == start:
			busy += procs[ev.JobId]
			held[ev.JobId] = true
		case held[ev.JobId]:
			busy -= procs[ev.JobId]
			held[ev.JobId] = false
		}
		if busy > capacity {
			t.Fatalf("at %vs: %s to %v hold %d processors of %d", ev.TS, start, ends, busy, capacity)
		}
	}
}

func noViolations(t *testing.T, w *virtualtest.World) {
	t.Helper()
	for _, ev := range w.Events(msg.EventInvariantViolation) {
		t.Errorf("violation at %vs: %v", ev.TS, ev.Fields)
	}
}

func TestEarlyFinishMovesQueuedJobsForward(t *testing.T) {
	for _, pol := range []string{"fcfs", "cbf"} {
		t.Run(pol, func(t *testing.T) {
			w := virtualtest.New(t)
			c := cluster(t, w, pol, 4)
			w.Send(0, c, job("a", 4, 100*s, 30*s)) // ends at 30, its walltime says 100
			w.Send(0, c, job("b", 2, 50*s, 50*s))  // reserved at 100
			w.Send(0, c, job("c", 2, 50*s, 10*s))  // reserved at 100 beside b
			w.Run(0)
			noViolations(t, w)
			if got := at(w, msg.EventBatchStart, "b"); got != 30*s {
				t.Errorf("b started at %v, want 30s (a ended early)", got)
			}
			if got := at(w, msg.EventBatchStart, "c"); got != 30*s {
				t.Errorf("c started at %v, want 30s", got)
			}
			for _, ev := range w.Events(msg.EventBatchStart) {
				if ev.JobId == "b" && ev.Values["reserved_s"] != 100 {
					t.Errorf("b's reservation before it moved was %vs, want 100s", ev.Values["reserved_s"])
				}
			}
			if got := at(w, msg.EventBatchEnd, "b"); got != 80*s {
				t.Errorf("b ended at %v, want 80s", got)
			}
		})
	}
}

func TestWalltimeKill(t *testing.T) {
	w := virtualtest.New(t)
	c := cluster(t, w, "cbf", 2)
	w.Send(0, c, job("long", 2, 100*s, 500*s))
	w.Send(5*s, c, job("next", 2, 10*s, 10*s))
	w.Run(0)
	noViolations(t, w)
	if got := at(w, msg.EventBatchKill, "long"); got != 100*s {
		t.Errorf("long killed at %v, want 100s (its walltime)", got)
	}
	if got := at(w, msg.EventBatchEnd, "long"); got != -1 {
		t.Errorf("long also ended normally at %v", got)
	}
	if got := at(w, msg.EventBatchStart, "next"); got != 100*s {
		t.Errorf("next started at %v, want 100s", got)
	}
	if got := at(w, msg.EventBatchEnd, "next"); got != 110*s {
		t.Errorf("next ended at %v, want 110s", got)
	}
}

// Backfilling: d fits in the hole before b's reservation, c would delay b.
func TestBackfillKeepsReservations(t *testing.T) {
	cases := map[string]map[string]time.Duration{
		"cbf":  {"a": 0, "b": 100 * s, "c": 150 * s, "d": 0},
		"fcfs": {"a": 0, "b": 100 * s, "c": 150 * s, "d": 150 * s},
	}
	for pol, want := range cases {
		t.Run(pol, func(t *testing.T) {
			w := virtualtest.New(t)
			c := cluster(t, w, pol, 4)
			w.Send(0, c, job("a", 3, 100*s, 100*s))
			w.Send(0, c, job("b", 4, 50*s, 50*s))
			w.Send(0, c, job("c", 1, 150*s, 150*s))
			w.Send(0, c, job("d", 1, 100*s, 100*s))
			w.Run(0)
			noViolations(t, w)
			for id, st := range want {
				if got := at(w, msg.EventBatchStart, id); got != st {
					t.Errorf("%s started at %v, want %v", id, got, st)
				}
			}
		})
	}
}

func TestCancelOnlyWaitingJobs(t *testing.T) {
	w := virtualtest.New(t)
	c := cluster(t, w, "cbf", 2)
	w.Send(0, c, job("run", 2, 100*s, 100*s))
	w.Send(0, c, job("wait", 2, 100*s, 100*s))
	w.Send(0, c, job("later", 1, 10*s, 10*s))
	w.Send(10*s, c, &msg.BatchCancel{JobIds: []string{"run", "wait", "nobody"}, ReplyTo: msg.FromPID(w.Probe()), Tag: 7})
	w.Run(0)
	noViolations(t, w)
	var got *msg.BatchCancelled
	for _, m := range w.Inbox() {
		if x, ok := m.(*msg.BatchCancelled); ok {
			got = x
		}
	}
	if got == nil || got.Tag != 7 || len(got.JobIds) != 1 || got.JobIds[0] != "wait" {
		t.Fatalf("cancel reply %v, want only the waiting job", got)
	}
	if at(w, msg.EventBatchStart, "wait") != -1 {
		t.Error("the cancelled job started")
	}
	if got := at(w, msg.EventBatchStart, "later"); got != 100*s {
		t.Errorf("later started at %v, want 100s (after run, no longer behind wait)", got)
	}
	if got := at(w, msg.EventBatchEnd, "run"); got != 100*s {
		t.Errorf("the running job ended at %v, want 100s", got)
	}
}

func TestRefusals(t *testing.T) {
	w := virtualtest.New(t)
	c := cluster(t, w, "cbf", 2)
	w.Send(0, c, job("a", 3, 10*s, 10*s))
	w.Send(0, c, job("b", 1, 0, 10*s))
	w.Send(0, c, job("c", 1, 10*s, 10*s))
	w.Send(0, c, job("c", 1, 10*s, 10*s))
	w.Run(0)
	reasons := map[string]string{}
	for _, ev := range w.Events(msg.EventBatchRefused) {
		reasons[ev.JobId] = ev.Fields["reason"]
	}
	want := map[string]string{"a": batch.RefuseProcs, "b": batch.RefuseTimes, "c": batch.RefuseDuplicate}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("refusals %v, want %v", reasons, want)
	}
}

// Random workloads: every job submitted ends once (completed or killed at
// its walltime), no cluster is ever over capacity (checked from the events),
// no reservation is broken, and no job starts later than its first
// reservation.
func TestRandomWorkloadsBalance(t *testing.T) {
	for seed := range uint64(8) {
		for _, pol := range []string{"fcfs", "cbf"} {
			t.Run(fmt.Sprintf("%s/%d", pol, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 1))
				w := virtualtest.New(t)
				const capacity = 16
				c := cluster(t, w, pol, capacity)
				n := 60
				for i := range n {
					at := time.Duration(r.IntN(2000)) * s
					wall := time.Duration(1+r.IntN(300)) * s
					run := time.Duration(1+r.IntN(400)) * s
					w.Send(at, c, job(fmt.Sprintf("j%d", i), 1+r.IntN(capacity), wall, run))
				}
				w.Run(0)
				noViolations(t, w)
				endedOnce(t, w, n, msg.EventBatchEnd, msg.EventBatchKill)
				neverOver(t, w, capacity, msg.EventBatchStart, msg.EventBatchEnd, msg.EventBatchKill)
			})
		}
	}
}
