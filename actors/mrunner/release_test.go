package mrunner

import (
	"strings"
	"testing"
	"time"

	mt "github.com/koala-emu/koala-emu/actors/malleabletest"
	"github.com/koala-emu/koala-emu/actors/mmanager"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/runner"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

// A node must never be given to a second job while the first still holds
// it ("rank 1 on vrije-n103: node vrije-n103 is busy with job j0073"). The
// interleaving: a malleable job ends while ranks it started for a grow wait
// to join; the runner aborts them, but a real node lets go of a rank only
// when the rank's goroutine has ended, some time after the abort. Here the
// fake nodes hold aborted ranks until the test lets them go, so the order
// of events is fixed: the next job asks for the processors while the nodes
// still hold the aborted ranks. The runner gives a processor back only once
// its node has let go, so the next job waits for it and then runs.
func TestReleaseWaitsForTheNodeToLetGo(t *testing.T) {
	w := mt.NewWorld(t, 1000, map[string]int{"a": 4}, "a")
	w.Lag = 1_000_000 // the grow never applies: the new ranks wait to join
	w.HoldAborts = true
	props, err := mmanager.Props(mmanager.Config{Approach: "pra", Policy: "fpsma", Threshold: 1, PollPeriod: 30 * time.Second,
		Clusters: w.Clusters, Order: w.Order, Stats: w.Stats, Env: w.Env})
	if err != nil {
		t.Fatal(err)
	}
	mm, err := w.Sys.Root.SpawnNamed(props, "mm")
	if err != nil {
		t.Fatal(err)
	}
	w.Start(mm)
	a := &msg.JobSpec{Id: "ja", App: "nbody", Size: 2, Request: "non-fixed", Args: map[string]float64{"work": 1e9}}
	w.Sys.Root.Spawn(Props(Config{Job: a, Min: 2, Max: 46, Profile: mt.Profile("nbody"), Manager: mm, Clusters: w.Clusters,
		TimeScale: 1, StartupDelay: 10 * time.Second, Stats: w.Stats, Env: w.Env}))
	// The manager grows ja onto the two other processors; their ranks
	// start and wait to join.
	waittest.Until(t, wait, "ja's new ranks waiting to join", func() bool {
		return w.Joiners("ja") == 2
	})
	// ja ends: its two ranks end, the two joining ones are aborted and
	// their nodes hold them.
	w.Finish("ja")
	waittest.Until(t, wait, "ja's end", func() bool { return len(w.Events.JobOf("end", "ja")) == 1 })
	waittest.Until(t, wait, "the aborted ranks held", func() bool { return w.HeldCount() == 2 })

	// jb needs all four processors.
	b := &msg.JobSpec{Id: "jb", App: "nbody", Size: 4, Request: "non-fixed", Args: map[string]float64{"work": 40}}
	w.Sys.Root.Spawn(runner.Props(runner.Config{Job: b, Scheduler: mm, Clusters: w.Clusters,
		TimeScale: 1, StartupDelay: 10 * time.Second, Env: w.Env}))
	waittest.Until(t, wait, "jb's submission", func() bool { return len(w.Events.JobOf("submit", "jb")) == 1 })
	// Three polls pass: jb must not be placed on nodes that hold ja's ranks.
	n := len(w.Events.Of("cluster_util")) + 3
	waittest.Until(t, wait, "three polls", func() bool { return len(w.Events.Of("cluster_util")) >= n })
	if p := w.Events.JobOf("placed", "jb"); len(p) != 0 {
		t.Fatalf("jb placed while two of its processors still held ja's ranks: %v", p[0].Fields)
	}
	if got := w.LetGo(); got != 2 {
		t.Fatalf("%d aborted ranks held, want 2", got)
	}
	waittest.Until(t, wait, "jb's end", func() bool { return len(w.Events.JobOf("end", "jb")) == 1 })
	if e := w.Events.JobOf("end", "jb")[0]; e.Fields["status"] != "completed" {
		t.Fatalf("jb %s: %s", e.Fields["status"], e.Fields["reason"])
	}
	for _, e := range w.Events.Of("end") {
		if strings.Contains(e.Fields["reason"], "busy") {
			t.Fatalf("job %s: %s", e.JobId, e.Fields["reason"])
		}
	}
	if inv := w.Stats.Snapshot(); !inv.OK() {
		t.Fatalf("invariants %+v", inv)
	}
}

// A node that refuses a rank at the start (it is busy) never held it: the
// job fails, the runner aborts the other rank, and every processor is given
// back (the refused one at once, the other once its node let go) before the
// manager hears that the job left.
func TestRunnerRefusedStartGivesEverythingBack(t *testing.T) {
	w := mt.NewWorld(t, 1000, map[string]int{"a": 4}, "a")
	w.Start(nil)
	mgr := mt.NewProbe(t, w.Sys)
	spec := &msg.JobSpec{Id: "j1", App: "nbody", Size: 2, Request: "non-fixed", Args: map[string]float64{"work": 1e9}}
	r := w.Sys.Root.Spawn(Props(Config{Job: spec, Min: 2, Max: 46, Profile: mt.Profile("nbody"), Manager: mgr.PID, Clusters: w.Clusters,
		TimeScale: 1, StartupDelay: 10 * time.Second, Stats: w.Stats, Env: w.Env}))
	mt.Expect[*msg.SubmitMalleable](t, mgr, "submission")
	w.Sys.Root.Send(w.Clusters["a"], &msg.Claim{JobId: "j1", Nodes: 2, ClaimId: 1, ReplyTo: msg.FromPID(mgr.PID)})
	c := mt.Expect[*msg.ClaimReply](t, mgr, "claim")
	// Something else runs on the second node.
	other := mt.NewProbe(t, w.Sys)
	w.Sys.Root.Send(c.Nodes[1].Pid.PID(), &msg.StartRank{JobId: "intruder", Rank: 0, Size: 1, App: "nbody", Runner: msg.FromPID(other.PID)})
	mt.Expect[*msg.RankReady](t, other, "intruder ready")
	w.Sys.Root.Send(r, &msg.JobPlaced{JobId: "j1", Allocations: []*msg.Allocation{{Cluster: "a", Nodes: c.Nodes}}})
	f := mt.Expect[*msg.JobFinished](t, mgr, "job finished")
	if f.Ok || !strings.Contains(f.Reason, "busy with job intruder") {
		t.Fatalf("job finished %+v", f)
	}
	// Both processors are back: a claim of all four succeeds.
	waittest.Until(t, wait, "all processors free", func() bool {
		w.Sys.Root.Send(w.Clusters["a"], &msg.Claim{JobId: "all", Nodes: 4, ClaimId: 2, ReplyTo: msg.FromPID(mgr.PID)})
		ok := mt.Expect[*msg.ClaimReply](t, mgr, "claim of every processor").Ok
		if ok {
			w.Sys.Root.Send(w.Clusters["a"], &msg.ReleaseNodes{JobId: "all"})
		}
		return ok
	})
}
