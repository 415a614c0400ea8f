package mrunner

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/invariant"
	mt "github.com/koala-emu/koala-emu/actors/malleabletest"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

const wait = 10 * time.Second

// runnerHarness plays the manager for one MRunner: it claims the initial
// processors, places the job and checks the runner's replies.
type runnerHarness struct {
	*mt.World
	mgr    *mt.Probe
	runner *actor.PID
	job    string
}

func newRunnerHarness(t *testing.T, nodes int, job, app string, min, max int, lag int) *runnerHarness {
	return newRunnerHarnessWith(t, nodes, job, app, min, max, lag, nil)
}

// newRunnerHarnessWith is newRunnerHarness with the runner's config
// adjusted by tweak (when not nil).
func newRunnerHarnessWith(t *testing.T, nodes int, job, app string, min, max int, lag int, tweak func(*Config)) *runnerHarness {
	w := mt.NewWorld(t, 1000, map[string]int{"a": nodes}, "a")
	w.Lag = lag
	w.Start(nil)
	h := &runnerHarness{World: w, mgr: mt.NewProbe(t, w.Sys), job: job}
	spec := &msg.JobSpec{Id: job, App: app, Size: 2, Request: "non-fixed", Args: map[string]float64{"work": 1e9}}
	cfg := Config{Job: spec, Min: min, Max: max, Profile: mt.Profile(app), Manager: h.mgr.PID,
		Clusters: w.Clusters, TimeScale: 1, StartupDelay: 10 * time.Second, Stats: w.Stats, Env: w.Env}
	if tweak != nil {
		tweak(&cfg)
	}
	h.runner = w.Sys.Root.Spawn(Props(cfg))
	sub := mt.Expect[*msg.SubmitMalleable](t, h.mgr, "submission")
	if sub.Job.Id != job || sub.Min != int32(min) || sub.Max != int32(max) || sub.Profile != app {
		t.Fatalf("submission %+v", sub)
	}
	nodes2 := h.claim(2, "initial")
	w.Sys.Root.Send(h.runner, &msg.JobPlaced{JobId: job, Allocations: []*msg.Allocation{{Cluster: "a", Nodes: nodes2}}})
	st := mt.Expect[*msg.MalleableStatus](t, h.mgr, "running status")
	if !st.Running || st.Size != 2 || st.Cluster != "a" {
		t.Fatalf("status %+v", st)
	}
	return h
}

// claim claims n processors of cluster a for the job (or for another holder).
func (h *runnerHarness) claim(n int, holder string) []*msg.NodeRef {
	h.T.Helper()
	id := h.job
	if holder != "initial" {
		id = holder
	}
	h.Sys.Root.Send(h.Clusters["a"], &msg.Claim{JobId: id, Nodes: int32(n), ClaimId: 99, ReplyTo: msg.FromPID(h.mgr.PID)})
	r := mt.Expect[*msg.ClaimReply](h.T, h.mgr, "claim reply")
	if !r.Ok {
		h.T.Fatalf("claim of %d for %s failed: %s", n, id, r.Reason)
	}
	return r.Nodes
}

func (h *runnerHarness) grow(id int64, n int32, wantAccepted int32) {
	h.T.Helper()
	h.Sys.Root.Send(h.runner, &msg.GrowRequest{JobId: h.job, Processors: n, RequestId: id})
	r := mt.Expect[*msg.ResizeReply](h.T, h.mgr, "grow reply")
	if r.RequestId != id || r.Accepted != wantAccepted {
		h.T.Fatalf("grow %d by %d: reply %+v, want %d accepted", id, n, r, wantAccepted)
	}
}

func (h *runnerHarness) shrink(id int64, n int32, mandatory bool, wantAccepted int32) {
	h.T.Helper()
	h.Sys.Root.Send(h.runner, &msg.ShrinkRequest{JobId: h.job, Processors: n, Mandatory: mandatory, RequestId: id})
	r := mt.Expect[*msg.ResizeReply](h.T, h.mgr, "shrink reply")
	if r.RequestId != id || r.Accepted != wantAccepted {
		h.T.Fatalf("shrink %d by %d (mandatory %v): reply %+v, want %d accepted", id, n, mandatory, r, wantAccepted)
	}
}

func (h *runnerHarness) ack(id int64, size int32, ok bool) *msg.ResizeAck {
	h.T.Helper()
	a := mt.Expect[*msg.ResizeAck](h.T, h.mgr, "ack")
	if a.RequestId != id || a.NewSize != size || a.Ok != ok {
		h.T.Fatalf("ack %+v, want request %d size %d ok %v", a, id, size, ok)
	}
	return a
}

func (h *runnerHarness) end() *msg.Event {
	h.T.Helper()
	h.Finish(h.job)
	f := mt.Expect[*msg.JobFinished](h.T, h.mgr, "job finished")
	if !f.Ok {
		h.T.Fatalf("job failed: %s", f.Reason)
	}
	var end *msg.Event
	waittest.Until(h.T, wait, "end event", func() bool {
		evs := h.Events.JobOf("end", h.job)
		if len(evs) == 1 {
			end = evs[0]
		}
		return end != nil
	})
	return end
}

// allFree checks that every processor of cluster a is free again.
func (h *runnerHarness) allFree() {
	h.T.Helper()
	waittest.Until(h.T, wait, "all processors free", func() bool {
		h.Sys.Root.Send(h.Clusters["a"], &msg.Claim{JobId: "probe-all", Nodes: int32(h.Sizes["a"]), ClaimId: 7, ReplyTo: msg.FromPID(h.mgr.PID)})
		r := mt.Expect[*msg.ClaimReply](h.T, h.mgr, "claim of every processor")
		if r.Ok {
			h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "probe-all"})
		}
		return r.Ok
	})
}

func TestRunnerGrowShrinkExchange(t *testing.T) {
	h := newRunnerHarness(t, 12, "j1", "nbody", 2, 46, 0)

	h.grow(1, 6, 6)
	if a := h.ack(1, 8, true); a.OldSize != 2 || a.ResizeS != 0.5 {
		t.Fatalf("grow ack %+v", a)
	}
	h.shrink(2, 3, true, 3)
	h.ack(2, 5, true)
	// A voluntary shrink that would slow the n-body code down is declined.
	h.shrink(3, 1, false, 0)
	// Claims that fall short: 6 of the 7 free processors go to someone else.
	h.claim(6, "other")
	h.grow(4, 4, 4)
	if a := h.ack(4, 6, true); a.OldSize != 5 {
		t.Fatalf("partial grow ack %+v", a)
	}

	end := h.end()
	v := end.Values
	if end.Fields["status"] != "completed" || v["max_procs"] != 8 || v["grows"] != 2 || v["shrinks"] != 1 || v["final_procs"] != 6 {
		t.Fatalf("end event %v %v", end.Fields, v)
	}
	if v["avg_procs"] <= 2 || v["avg_procs"] >= 8 {
		t.Fatalf("average processors %v not between the extremes", v["avg_procs"])
	}
	if v["resize_s"] != 1.5 {
		t.Fatalf("total resize time %v, want 3 x 0.5", v["resize_s"])
	}
	shr := h.Events.JobOf("shrink", "j1")
	if len(shr) != 1 || shr[0].Values["safe_points"] != 1 || shr[0].Fields["mandatory"] != "true" || shr[0].Values["to"] != 5 {
		t.Fatalf("shrink events %v", shr)
	}
	if d := h.Events.JobOf("resize_declined", "j1"); len(d) != 1 {
		t.Fatalf("declined events %v", d)
	}
	var sizes []float64
	for _, e := range h.Events.JobOf("procs", "j1") {
		sizes = append(sizes, e.Values["size"])
	}
	want := []float64{2, 8, 5, 6, 0}
	if len(sizes) != len(want) {
		t.Fatalf("procs series %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("procs series %v, want %v", sizes, want)
		}
	}
	inv := h.Stats.Snapshot()
	if !inv.OK() || inv.Checks[invariant.Mandatory] != 1 || inv.Checks[invariant.Bounds] < 4 {
		t.Fatalf("invariants %+v", inv)
	}
	// Release the other holder; then the job must have freed everything.
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "other"})
	h.allFree()
}

func TestRunnerFTKeepsPowerOfTwo(t *testing.T) {
	h := newRunnerHarness(t, 8, "f1", "ft", 2, 32, 0)

	// Offered 5 at size 2, FT takes 2 (to 4).
	h.grow(1, 5, 2)
	h.ack(1, 4, true)
	// Offered 4 it takes 4, but only 1 processor can be claimed: FT cannot
	// run on 5, keeps 4 and gives the claimed processor back at once.
	h.claim(3, "other")
	h.grow(2, 4, 4)
	vr := mt.Expect[*msg.VoluntaryRelease](t, h.mgr, "voluntary release")
	if vr.Processors != 1 || vr.NewSize != 4 || vr.RequestId != 2 {
		t.Fatalf("voluntary release %+v", vr)
	}
	h.ack(2, 4, false)
	// A mandatory shrink of 1 takes FT down to the next power of two.
	h.shrink(3, 1, true, 2)
	h.ack(3, 2, true)
	// At its minimum it cannot shrink any more.
	h.shrink(4, 2, true, 0)

	end := h.end()
	if end.Values["max_procs"] != 4 || end.Values["grows"] != 1 || end.Values["shrinks"] != 1 || end.Values["released"] != 1 {
		t.Fatalf("end %v", end.Values)
	}
	if len(h.Events.JobOf("grow_failed", "f1")) != 1 || len(h.Events.JobOf("voluntary_release", "f1")) != 1 {
		t.Fatal("missing grow_failed or voluntary_release event")
	}
	inv := h.Stats.Snapshot()
	if !inv.OK() || inv.Checks[invariant.Pow2] < 3 {
		t.Fatalf("invariants %+v", inv)
	}
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "other"})
	h.allFree()
}

// An application that passes a safe point without applying a mandatory
// shrink is caught by the run's own check.
func TestMandatoryShrinkLateIsReported(t *testing.T) {
	h := newRunnerHarness(t, 8, "j1", "nbody", 2, 46, 1)
	h.grow(1, 4, 4)
	h.ack(1, 6, true)
	h.shrink(2, 2, true, 2)
	h.ack(2, 4, true)
	h.end()
	inv := h.Stats.Snapshot()
	if inv.Violations[invariant.Mandatory] != 1 {
		t.Fatalf("invariants %+v, want one late mandatory shrink", inv)
	}
	v := h.Events.Of("invariant_violation")
	if len(v) != 1 || v[0].Fields["invariant"] != invariant.Mandatory || v[0].JobId != "j1" {
		t.Fatalf("violation events %v", v)
	}
	if s := h.Events.JobOf("shrink", "j1"); len(s) != 1 || s[0].Values["safe_points"] != 2 {
		t.Fatalf("shrink events %v", s)
	}
}

// A mandatory shrink whose ranks never switch (j0066 of the das3-malleable
// PWA run: one kept rank never reported RankResized) must not leave the job
// running until the run ends: past ResizeTimeout the job fails with a typed
// cause, its ranks are aborted and every processor comes back.
func TestStuckShrinkFailsTheJob(t *testing.T) {
	h := newRunnerHarnessWith(t, 8, "j1", "nbody", 2, 46, 0, func(c *Config) { c.ResizeTimeout = 300 * time.Millisecond })
	h.grow(1, 4, 4)
	h.ack(1, 6, true)
	// From now on the ranks never reach the switch.
	h.SetLag(1_000_000)
	h.shrink(2, 2, true, 2)
	f := mt.Expect[*msg.JobFinished](t, h.mgr, "job finished after the stuck shrink")
	if f.Ok || f.Cause != msg.FailureCause_FAILURE_RANK_TIMEOUT || !strings.Contains(f.Reason, "shrink") {
		t.Fatalf("job finished %+v, want a failure by rank timeout naming the shrink", f)
	}
	var end *msg.Event
	waittest.Until(t, wait, "end event", func() bool {
		evs := h.Events.JobOf("end", "j1")
		if len(evs) == 1 {
			end = evs[0]
		}
		return end != nil
	})
	if end.Fields["status"] != "failed" || end.Fields["cause"] != msg.FailureCause_FAILURE_RANK_TIMEOUT.Name() || end.Values["shrinks"] != 0 {
		t.Fatalf("end event %v %v", end.Fields, end.Values)
	}
	h.allFree()
}

// The application ends while new ranks wait to join: the runner aborts them
// and frees every processor, the claimed ones included.
func TestRunnerEndsDuringGrow(t *testing.T) {
	h := newRunnerHarness(t, 10, "j1", "nbody", 2, 46, 1_000_000)
	h.grow(1, 5, 5)
	waittest.Until(t, wait, "new ranks asked to join", func() bool {
		return h.Members("j1") == 7
	})
	end := h.end()
	if end.Values["grows"] != 0 || end.Values["max_procs"] != 2 {
		t.Fatalf("end %v", end.Values)
	}
	h.allFree()
}

// The application ends just as new ranks are handed the grown table: a
// new rank finds a current rank's communicator closed and reports its
// switch failed. That alone does not fail the job: the current ranks end
// the application, the new ranks are aborted and the job completes
// (TestMalleableEndToEnd failed this way on a loaded host).
func TestRunnerJoinerFailsAsTheApplicationEnds(t *testing.T) {
	h := newRunnerHarness(t, 10, "j1", "nbody", 2, 46, 1_000_000)
	h.grow(1, 2, 2)
	waittest.Until(t, wait, "new ranks holding the grown table", func() bool { return h.Joiners("j1") == 2 })
	node, rank := h.JoinerNode("j1")
	h.Sys.Root.Send(h.runner, &msg.RankResized{JobId: "j1", ResizeId: 1, Rank: rank, Node: node,
		Error: "join: resize: rank 1: peer closed its communicator"})
	end := h.end()
	if end.Values["grows"] != 0 || end.Values["max_procs"] != 2 {
		t.Fatalf("end %v", end.Values)
	}
	h.allFree()
}

func TestRunnerRequestsBeforeStartAreDeclined(t *testing.T) {
	w := mt.NewWorld(t, 1000, map[string]int{"a": 4}, "a")
	w.Start(nil)
	mgr := mt.NewProbe(t, w.Sys)
	spec := &msg.JobSpec{Id: "j1", App: "nbody", Size: 2}
	r := w.Sys.Root.Spawn(Props(Config{Job: spec, Min: 2, Max: 46, Profile: mt.Profile("nbody"), Manager: mgr.PID, Clusters: w.Clusters, Env: w.Env}))
	mt.Expect[*msg.SubmitMalleable](t, mgr, "submission")
	w.Sys.Root.Send(r, &msg.GrowRequest{JobId: "j1", Processors: 2, RequestId: 5})
	if rep := mt.Expect[*msg.ResizeReply](t, mgr, "reply"); rep.Accepted != 0 || rep.RequestId != 5 {
		t.Fatalf("reply %+v", rep)
	}
	w.Sys.Root.Send(r, &msg.JobRejected{JobId: "j1", Reason: "no room", Tries: 3})
	if f := mt.Expect[*msg.JobFinished](t, mgr, "finished"); f.Ok {
		t.Fatal("rejected job finished ok")
	}
	waittest.Until(t, wait, "failed end event", func() bool {
		e := w.Events.JobOf("end", "j1")
		return len(e) == 1 && e[0].Fields["status"] == "failed"
	})
}

// The application gives processors back on its own (rank 0 speaks for the
// job): the runner shrinks at the next safe point and reports it.
func TestRunnerAppRelease(t *testing.T) {
	h := newRunnerHarness(t, 8, "j1", "nbody", 2, 46, 0)
	h.grow(1, 4, 4)
	h.ack(1, 6, true)
	h.Sys.Root.Send(h.runner, &msg.AppRelease{JobId: "j1", Rank: 3, Processors: 1}) // not rank 0: ignored
	h.Sys.Root.Send(h.runner, &msg.AppRelease{JobId: "j1", Rank: 0, Processors: 2})
	vr := mt.Expect[*msg.VoluntaryRelease](t, h.mgr, "voluntary release")
	if vr.Processors != 2 || vr.NewSize != 4 || vr.RequestId != 0 {
		t.Fatalf("voluntary release %+v", vr)
	}
	end := h.end()
	if end.Values["shrinks"] != 1 || end.Values["released"] != 2 || end.Values["final_procs"] != 4 {
		t.Fatalf("end %v", end.Values)
	}
	if s := h.Events.JobOf("shrink", "j1"); len(s) != 1 || s[0].Fields["initiator"] != ByApp || s[0].Fields["mandatory"] != "false" {
		t.Fatalf("shrink events %v", s)
	}
	h.allFree()
}

// Once a rank of the application has ended (its last iteration is done),
// the remaining ranks are no longer a complete table: the runner resizes no
// more, it declines new requests and the job still completes.
func TestRunnerDeclinesResizesOnceTheApplicationEnds(t *testing.T) {
	h := newRunnerHarness(t, 8, "j1", "nbody", 2, 46, 0)
	last := h.NodeOf("j1", 1)
	if last == "" {
		t.Fatal("no node runs rank 1")
	}
	h.Sys.Root.Send(h.runner, &msg.RankDone{JobId: "j1", Rank: 1, Node: last, Ok: true, Iterations: 3})
	h.Sys.Root.Send(h.runner, &msg.GrowRequest{JobId: "j1", Processors: 4, RequestId: 1})
	r := mt.Expect[*msg.ResizeReply](t, h.mgr, "grow reply")
	if r.Accepted != 0 || r.Reason == "" {
		t.Fatalf("grow while ending: reply %+v", r)
	}
	if end := h.end(); end.Fields["status"] != "completed" || end.Values["grows"] != 0 {
		t.Fatalf("end %v %v", end.Fields, end.Values)
	}
	h.allFree()
}
