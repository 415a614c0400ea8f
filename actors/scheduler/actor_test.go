package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
	"github.com/koala-emu/koala-emu/clock"
)

// harness: a scheduler with real cluster managers, a collector standing in
// for the runner and for the information service's status sink.
type harness struct {
	t        *testing.T
	sys      *actor.ActorSystem
	sched    *actor.PID
	runner   *actor.PID
	runnerCh chan interface{}
	statusCh chan *msg.ClusterStatus
	clusters map[string]*actor.PID
}

func collector(sys *actor.ActorSystem, ch chan interface{}) *actor.PID {
	return sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *msg.JobPlaced, *msg.JobRejected:
			ch <- m
		}
	}))
}

// newHarness builds clusters with the given real sizes; the scheduler's view
// (what the information service would report) is given separately.
func newHarness(t *testing.T, policy string, real map[string]int, maxTries int, scanPeriod time.Duration) *harness {
	t.Helper()
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	h := &harness{t: t, sys: sys, runnerCh: make(chan interface{}, 16), statusCh: make(chan *msg.ClusterStatus, 256), clusters: map[string]*actor.PID{}}
	env := actors.Env{System: sys, Clock: clock.NewScaled(1)}
	status := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if s, ok := ctx.Message().(*msg.ClusterStatus); ok {
			h.statusCh <- s
		}
	}))
	var order []string
	for name, n := range real {
		var infos []cluster.NodeInfo
		for i := 0; i < n; i++ {
			infos = append(infos, cluster.NodeInfo{Name: fmt.Sprintf("%s-%d", name, i)})
		}
		h.clusters[name] = sys.Root.Spawn(cluster.Props(cluster.Config{Name: name, Nodes: infos, KIS: status, Env: env}))
		order = append(order, name)
	}
	pol, err := placement.New(policy)
	if err != nil {
		t.Fatal(err)
	}
	h.sched = sys.Root.Spawn(Props(Config{Policy: pol, MaxTries: maxTries, ScanPeriod: scanPeriod, Clusters: h.clusters, Order: sortStrings(order), Env: env}))
	h.runner = collector(sys, h.runnerCh)
	return h
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// view tells the scheduler what the information service sees, with every
// pair measured.
func (h *harness) view(idle map[string]int) { h.viewCap(idle, idle) }

func (h *harness) viewCap(idle, capacity map[string]int) {
	gs := &msg.GridStatus{}
	for name, n := range idle {
		gs.Clusters = append(gs.Clusters, &msg.ClusterStatus{Cluster: name, Idle: int32(n), Capacity: int32(capacity[name])})
		for other := range idle {
			gs.Links = append(gs.Links, &msg.LinkEstimate{Src: name, Dst: other, LatencyMs: 0.1, BandwidthMbps: 100, Measured: true})
		}
	}
	h.sys.Root.Send(h.sched, gs)
}

func (h *harness) submit(id, request string, size int) {
	h.sys.Root.Send(h.sched, &msg.SubmitJob{Job: &msg.JobSpec{Id: id, App: "wave", Size: int32(size), Request: request}, Runner: msg.FromPID(h.runner)})
}

func (h *harness) next() interface{} {
	h.t.Helper()
	select {
	case m := <-h.runnerCh:
		return m
	case <-time.After(10 * time.Second):
		h.t.Fatal("no reply from the scheduler within 10 s")
		return nil
	}
}

func TestFCMPlacesTheSpecExample(t *testing.T) {
	h := newHarness(t, "fcm", map[string]int{"a": 16, "b": 16, "c": 16}, 3, 0)
	h.view(map[string]int{"a": 16, "b": 16, "c": 16})
	h.submit("j1", "flexible", 24)
	p, ok := h.next().(*msg.JobPlaced)
	if !ok {
		t.Fatalf("want JobPlaced, got %T", p)
	}
	var sizes []int
	for _, a := range p.Allocations {
		sizes = append(sizes, len(a.Nodes))
	}
	if fmt.Sprint(sizes) != "[16 8]" {
		t.Fatalf("FCM components %v, want [16 8]", sizes)
	}
}

// Co-allocation is atomic: when one component's claim fails, the other
// components' nodes go back and the job is requeued; past the try threshold
// the submission fails with the fixed reason.
func TestClaimFailureReleasesAndRequeues(t *testing.T) {
	h := newHarness(t, "fcm", map[string]int{"a": 16, "b": 4}, 2, 0)
	h.view(map[string]int{"a": 16, "b": 16}) // the view is stale: b really has 4
	h.submit("j1", "flexible", 24)
	// a's claim succeeds then is released: a reports 0 idle then 16 idle.
	sawClaim, sawRelease := false, false
	deadline := time.After(10 * time.Second)
	for !sawRelease {
		select {
		case s := <-h.statusCh:
			if s.Cluster == "a" && s.Idle < 16 {
				sawClaim = true
			}
			if s.Cluster == "a" && sawClaim && s.Idle == 16 {
				sawRelease = true
			}
		case <-deadline:
			t.Fatalf("cluster a never got its nodes back (claimed: %v)", sawClaim)
		}
	}
	// Later scans fail the same way; the third failure passes the threshold.
	stop := h.sched
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	var r *msg.JobRejected
	var ok bool
	for r == nil {
		select {
		case <-ticker.C:
			h.sys.Root.Send(stop, &scan{})
		case m := <-h.runnerCh:
			if r, ok = m.(*msg.JobRejected); !ok {
				t.Fatalf("want JobRejected, got %T", m)
			}
		case <-deadline:
			t.Fatal("job never rejected")
		}
	}
	if !strings.Contains(r.Reason, ReasonTooManyTries) || r.Tries != 3 {
		t.Fatalf("rejected with %q after %d tries", r.Reason, r.Tries)
	}
}

func TestNeverFitsFailsAtOnce(t *testing.T) {
	h := newHarness(t, "fcm", map[string]int{"a": 8, "b": 8}, 30, 0)
	h.view(map[string]int{"a": 8, "b": 8})
	h.submit("j1", "flexible", 17)
	r, ok := h.next().(*msg.JobRejected)
	if !ok {
		t.Fatalf("want JobRejected, got %T", r)
	}
	if r.Tries != 0 || r.Reason == "" {
		t.Fatalf("rejected after %d tries with %q; want at once with a reason", r.Tries, r.Reason)
	}
}

func TestBadRequestTypeFails(t *testing.T) {
	h := newHarness(t, "wf", map[string]int{"a": 8}, 30, 0)
	h.view(map[string]int{"a": 8})
	h.submit("j1", "sideways", 4)
	r, ok := h.next().(*msg.JobRejected)
	if !ok || !strings.Contains(r.Reason, ReasonBadRequest) {
		t.Fatalf("want rejection for a malformed request, got %v", r)
	}
}

// A job that does not fit now waits in the queue and is placed by a later
// scan once the view shows room.
func TestWaitingJobPlacedOnLaterScan(t *testing.T) {
	h := newHarness(t, "wf", map[string]int{"a": 8}, 30, 0)
	h.viewCap(map[string]int{"a": 2}, map[string]int{"a": 8})
	h.submit("j1", "flexible", 6)
	h.sys.Root.Send(h.sched, &scan{})
	select {
	case m := <-h.runnerCh:
		t.Fatalf("placed on a view without room: %v", m)
	case <-time.After(200 * time.Millisecond):
	}
	h.view(map[string]int{"a": 8})
	h.sys.Root.Send(h.sched, &scan{})
	p, ok := h.next().(*msg.JobPlaced)
	if !ok || p.Tries != 3 {
		t.Fatalf("want JobPlaced on the third try, got %v", p)
	}
}

// shapeKey is everything a placement policy reads of a request but its job
// ID, so that a scan may reuse a no-fit answer for a request of the same
// shape; requests with files (CF reads them) are never keyed.
func TestShapeKey(t *testing.T) {
	a := placement.Request{JobID: "j1", Type: placement.NonFixed, Total: 16,
		Components: []placement.Component{{Size: 8}, {Size: 8}}}
	b := a
	b.JobID = "j2"
	ka, oka := shapeKey(a)
	kb, okb := shapeKey(b)
	if !oka || !okb || ka != kb {
		t.Fatalf("same shape, other job: %q %v, %q %v", ka, oka, kb, okb)
	}
	for name, r := range map[string]placement.Request{
		"type":       {Type: placement.Flexible, Total: 16},
		"total":      {Type: placement.NonFixed, Total: 24, Components: a.Components},
		"components": {Type: placement.NonFixed, Total: 16, Components: []placement.Component{{Size: 10}, {Size: 6}}},
		"cluster":    {Type: placement.Fixed, Total: 16, Components: []placement.Component{{Cluster: "vrije", Size: 8}, {Cluster: "leiden", Size: 8}}},
	} {
		if k, _ := shapeKey(r); k == ka {
			t.Errorf("%s differs but keys alike: %q", name, k)
		}
	}
	fixed := placement.Request{Type: placement.Fixed, Total: 16, Components: []placement.Component{{Cluster: "vrije", Size: 8}, {Cluster: "leiden", Size: 8}}}
	if k, _ := shapeKey(fixed); k != "1/16/vrije:8/leiden:8" {
		t.Errorf("key %q, want type/total/cluster:size/...", k)
	}
	if _, ok := shapeKey(placement.Request{Type: placement.Flexible, Total: 8, Files: []placement.File{{Name: "f"}}}); ok {
		t.Error("a request with files was keyed")
	}
}

// An unreachable cluster (partitioned, as the information service marks
// it) takes no job, whatever its idle nodes; once reachable again a later
// scan places there.
func TestUnreachableClusterTakesNoJob(t *testing.T) {
	h := newHarness(t, "wf", map[string]int{"a": 8}, 30, 0)
	h.sys.Root.Send(h.sched, &msg.GridStatus{Clusters: []*msg.ClusterStatus{{Cluster: "a", Idle: 8, Capacity: 8, Unreachable: true}}})
	h.submit("j1", "flexible", 4)
	h.sys.Root.Send(h.sched, &scan{})
	select {
	case m := <-h.runnerCh:
		t.Fatalf("placed on an unreachable cluster: %v", m)
	case <-time.After(200 * time.Millisecond):
	}
	h.view(map[string]int{"a": 8})
	h.sys.Root.Send(h.sched, &scan{})
	if p, ok := h.next().(*msg.JobPlaced); !ok || p.Allocations[0].Cluster != "a" {
		t.Fatalf("want JobPlaced on a after the heal, got %v", p)
	}
}
