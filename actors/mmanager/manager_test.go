package mmanager

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/invariant"
	mt "github.com/koala-emu/koala-emu/actors/malleabletest"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

const wait = 10 * time.Second

// managerHarness runs the manager against real cluster managers; the test
// plays the runners through probes.
type managerHarness struct {
	*mt.World
	mm *actor.PID
}

func newManagerHarness(t *testing.T, approach, policy string, threshold float64, sizes map[string]int, order ...string) *managerHarness {
	w := mt.NewWorld(t, 1000, sizes, order...)
	h := &managerHarness{World: w}
	props, err := Props(Config{Approach: approach, Policy: policy, Threshold: threshold,
		PollPeriod: 30 * time.Second, Clusters: w.Clusters, Order: order, Stats: w.Stats, Env: w.Env})
	if err != nil {
		t.Fatal(err)
	}
	h.mm, err = w.Sys.Root.SpawnNamed(props, "mm")
	if err != nil {
		t.Fatal(err)
	}
	w.Start(h.mm)
	return h
}

// fakeRunner is a runner played by the test.
type fakeRunner struct {
	h   *managerHarness
	p   *mt.Probe
	job string
}

func (h *managerHarness) submit(job, app string, size, min, max int) *fakeRunner {
	r := &fakeRunner{h: h, p: mt.NewProbe(h.T, h.Sys), job: job}
	spec := &msg.JobSpec{Id: job, App: app, Size: int32(size), Request: "non-fixed"}
	if min == 0 {
		h.Sys.Root.Send(h.mm, &msg.SubmitJob{Job: spec, Runner: msg.FromPID(r.p.PID)})
	} else {
		h.Sys.Root.Send(h.mm, &msg.SubmitMalleable{Job: spec, Runner: msg.FromPID(r.p.PID), Min: int32(min), Max: int32(max), Profile: app, PowerOfTwo: mt.Profile(app).PowerOfTwo})
	}
	return r
}

func (r *fakeRunner) placed() *msg.JobPlaced {
	r.h.T.Helper()
	p := mt.Expect[*msg.JobPlaced](r.h.T, r.p, r.job+" placed")
	if p.JobId != r.job || len(p.Allocations) != 1 {
		r.h.T.Fatalf("placement %+v", p)
	}
	return p
}

// quiet checks that nothing arrived for the runner during the next polls
// (each poll emits one cluster_util event per cluster).
func (r *fakeRunner) quiet(polls int) {
	r.h.T.Helper()
	n := len(r.h.Events.Of("cluster_util")) + polls*len(r.h.Order)
	waittest.Until(r.h.T, wait, "manager polls", func() bool { return len(r.h.Events.Of("cluster_util")) >= n })
	select {
	case m := <-r.p.Ch:
		r.h.T.Fatalf("%s: unexpected %T %v", r.job, m, m)
	default:
	}
}

func (r *fakeRunner) running(size int) {
	r.h.Sys.Root.Send(r.h.mm, &msg.MalleableStatus{JobId: r.job, Cluster: "a", Size: int32(size), Running: true,
		StartS: r.h.Env.Now()})
}

// claimAndAck plays a grow: claims the processors itself and acknowledges.
func (r *fakeRunner) growTo(req *msg.GrowRequest, accepted int, from int) {
	r.h.T.Helper()
	r.h.Sys.Root.Send(r.h.mm, &msg.ResizeReply{JobId: r.job, RequestId: req.RequestId, Accepted: int32(accepted)})
	r.h.Sys.Root.Send(r.h.Clusters["a"], &msg.Claim{JobId: r.job, Nodes: int32(accepted), ClaimId: 1, ReplyTo: msg.FromPID(r.p.PID)})
	if c := mt.Expect[*msg.ClaimReply](r.h.T, r.p, "grow claim"); !c.Ok {
		r.h.T.Fatalf("%s: grow claim failed: %s", r.job, c.Reason)
	}
	r.h.Sys.Root.Send(r.h.mm, &msg.ResizeAck{JobId: r.job, RequestId: req.RequestId, NewSize: int32(from + accepted), OldSize: int32(from), Ok: true})
}

func TestManagerPRANeverCountsTwice(t *testing.T) {
	h := newManagerHarness(t, "pra", "fpsma", 0, map[string]int{"a": 10}, "a")
	j1 := h.submit("j1", "ft", 2, 2, 8)
	p := j1.placed()
	if len(p.Allocations[0].Nodes) != 2 || p.Allocations[0].Cluster != "a" {
		t.Fatalf("placement %+v", p)
	}
	j1.running(2)
	g := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1")
	// FT at 2 with maximum 8 is offered the 8 free processors and takes 6.
	if g.Processors != 6 || g.Mandatory {
		t.Fatalf("grow %+v", g)
	}
	// The grow is in flight (no reply yet): a rigid job of 2 fits in what
	// is left, a second one does not.
	j2 := h.submit("j2", "nbody", 2, 0, 0)
	p2 := j2.placed()
	j3 := h.submit("j3", "nbody", 2, 0, 0)
	j3.quiet(3)
	j1.growTo(g, 6, 2)
	j3.quiet(2)
	// j2 ends: j1 is at its maximum, so PRA starts j3.
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j2", Nodes: msg.NodeNames(p2.Allocations[0].Nodes)})
	h.Sys.Root.Send(h.mm, &msg.JobFinished{JobId: "j2", Ok: true})
	j3.placed()
	inv := h.Stats.Snapshot()
	if !inv.OK() || inv.Checks[invariant.Capacity] == 0 || inv.Checks[invariant.Bounds] == 0 || inv.Checks[invariant.Pow2] == 0 {
		t.Fatalf("invariants %+v", inv)
	}
	waittest.Until(t, wait, "three placed events", func() bool { return len(h.Events.Of("placed")) == 3 })
	// j1 gives 4 processors back on its own: the manager's books follow, and
	// the next round offers them to j1 again.
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j1", Nodes: []string{"a-n005", "a-n006", "a-n007", "a-n008"}})
	h.Sys.Root.Send(h.mm, &msg.VoluntaryRelease{JobId: "j1", Processors: 4, NewSize: 4})
	if g := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1 after its release"); g.Processors != 4 {
		t.Fatalf("grow %+v", g)
	}
}

func TestManagerPWAShrinksForWaitingJob(t *testing.T) {
	h := newManagerHarness(t, "pwa", "fpsma", 0, map[string]int{"a": 8}, "a")
	j1 := h.submit("j1", "nbody", 2, 2, 46)
	j1.placed()
	j1.running(2)
	g := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1")
	if g.Processors != 6 {
		t.Fatalf("grow %+v", g)
	}
	j1.growTo(g, 6, 2)

	// A new job finds no room: j1 must shrink by 2, mandatorily, and the new
	// job is claimed only once the shrink is acknowledged.
	j2 := h.submit("j2", "ft", 2, 2, 32)
	s := mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1")
	if s.Processors != 2 || !s.Mandatory {
		t.Fatalf("shrink %+v", s)
	}
	j2.quiet(3)
	h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s.RequestId, Accepted: 2})
	j2.quiet(1)
	// The runner frees two processors, then acknowledges.
	var held []string
	for i := 1; i <= 8; i++ {
		held = append(held, "a-n00"+string(rune('0'+i)))
	}
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j1", Nodes: held[6:]})
	h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: "j1", RequestId: s.RequestId, NewSize: 6, OldSize: 8, Ok: true})
	p := j2.placed()
	if len(p.Allocations[0].Nodes) != 2 {
		t.Fatalf("placement %+v", p)
	}
	j2.running(2)
	// Nobody waits and no processor is free: no more requests.
	j1.quiet(3)
	if !h.Stats.Snapshot().OK() {
		t.Fatalf("invariants %+v", h.Stats.Snapshot())
	}
	waittest.Until(t, wait, "two requests recorded", func() bool { return len(h.Events.Of("resize_request")) >= 2 })
	req := h.Events.Of("resize_request")
	if len(req) != 2 || req[1].Fields["op"] != "shrink" || req[1].Fields["mandatory"] != "true" {
		t.Fatalf("requests %v", req)
	}
}

// Under PWA a job that cannot fit even with every running job at its
// minimum does not stop the running jobs from growing.
func TestManagerPWAGrowsWhenShrinkingCannotHelp(t *testing.T) {
	h := newManagerHarness(t, "pwa", "egs", 0, map[string]int{"a": 8}, "a")
	j1 := h.submit("j1", "nbody", 2, 2, 46)
	j1.placed()
	j2 := h.submit("j2", "nbody", 2, 2, 46)
	j2.placed()
	big := h.submit("big", "nbody", 6, 0, 0) // rigid, 6 of the 4 free: never while j1 and j2 run
	j1.running(2)
	j2.running(2)
	g1 := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1")
	g2 := mt.Expect[*msg.GrowRequest](t, j2.p, "grow of j2")
	if g1.Processors != 2 || g2.Processors != 2 {
		t.Fatalf("EGS grows %d and %d, want 2 and 2", g1.Processors, g2.Processors)
	}
	big.quiet(1)
}

func TestManagerRejections(t *testing.T) {
	h := newManagerHarness(t, "pra", "egs", 0.5, map[string]int{"a": 8, "b": 6}, "a", "b")
	// Wait until both clusters have reported.
	j0 := h.submit("j0", "nbody", 2, 0, 0)
	j0.placed()
	h.Sys.Root.Send(h.Clusters["b"], &msg.Claim{JobId: "x", Nodes: 1, ClaimId: 1, ReplyTo: msg.FromPID(j0.p.PID)})
	mt.Expect[*msg.ClaimReply](t, j0.p, "claim")
	h.Sys.Root.Send(h.Clusters["b"], &msg.ReleaseNodes{JobId: "x"})
	// Cap of a is 4, of b 3.
	big := h.submit("big", "nbody", 5, 2, 46)
	if r := mt.Expect[*msg.JobRejected](t, big.p, "rejection"); r.Reason != ReasonNeverFits+" (5 processors)" {
		t.Fatalf("reason %q", r.Reason)
	}
	odd := h.submit("odd", "ft", 3, 2, 32)
	if r := mt.Expect[*msg.JobRejected](t, odd.p, "rejection"); r.Reason == "" {
		t.Fatal("FT of 3 accepted")
	}
	co := &fakeRunner{h: h, p: mt.NewProbe(t, h.Sys), job: "co"}
	h.Sys.Root.Send(h.mm, &msg.SubmitJob{Job: &msg.JobSpec{Id: "co", App: "nbody", Size: 4,
		Components: []*msg.Component{{Cluster: "a", Size: 2}, {Cluster: "b", Size: 2}}}, Runner: msg.FromPID(co.p.PID)})
	if r := mt.Expect[*msg.JobRejected](t, co.p, "rejection"); r.Reason != ReasonCoalloc {
		t.Fatalf("reason %q", r.Reason)
	}
	if _, err := Props(Config{Approach: "pra", Policy: "nope"}); err == nil {
		t.Fatal("unknown policy accepted")
	}
	if _, err := Props(Config{Approach: "later", Policy: "egs"}); err == nil {
		t.Fatal("unknown approach accepted")
	}
}
