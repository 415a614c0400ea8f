package kis

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// A partition marks the cluster unreachable in the status the scheduler
// gets (now and in later reports), probe rounds leave its links to other
// clusters alone, and a heal undoes both; each change is an event.
func TestReachability(t *testing.T) {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	probes := make(chan *msg.ProbeRequest, 16)
	statuses := make(chan *msg.ClusterStatus, 16)
	events := make(chan *msg.Event, 16)
	clusterActor := func() *actor.PID {
		return sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if r, ok := ctx.Message().(*msg.ProbeRequest); ok {
				// The result is in the service's mailbox before the test
				// sees the request, so a round the test asks for next is
				// never skipped as one still pending.
				ctx.Send(r.ReplyTo.PID(), &msg.ProbeResult{})
				probes <- r
			}
		}))
	}
	sched := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if g, ok := ctx.Message().(*msg.GridStatus); ok {
			for _, c := range g.Clusters {
				statuses <- c
			}
		}
	}))
	rec := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok {
			events <- ev
		}
	}))
	env := actors.Env{System: sys, Clock: clock.NewScaled(1), Recorder: rec}
	clusters := map[string]*actor.PID{"a": clusterActor(), "b": clusterActor()}
	k := sys.Root.Spawn(Props(Config{Order: []string{"a", "b"}, Clusters: clusters, Scheduler: sched, Env: env}))

	status := func() *msg.ClusterStatus {
		t.Helper()
		return recv(t, statuses, "no status reached the scheduler")
	}
	// targets collects one probe round: every cluster some request names.
	targets := func() map[string]bool {
		t.Helper()
		got := map[string]bool{}
		for range 2 {
			select {
			case r := <-probes:
				for _, tg := range r.Targets {
					got[tg.Cluster] = true
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no probe request")
			}
		}
		return got
	}
	sys.Root.Send(k, &msg.ClusterStatus{Cluster: "a", Idle: 4, Capacity: 4})
	sys.Root.Send(k, &msg.ClusterStatus{Cluster: "b", Idle: 4, Capacity: 4})
	status()
	status()
	targets() // the first round, once both reported

	sys.Root.Send(k, &msg.ClusterReachability{Cluster: "b", Reachable: false, Reason: "partition"})
	if s := status(); s.Cluster != "b" || !s.Unreachable || s.Idle != 4 {
		t.Fatalf("after the partition the scheduler got %v", s)
	}
	sys.Root.Send(k, &msg.ClusterStatus{Cluster: "b", Idle: 3, Capacity: 4})
	if s := status(); !s.Unreachable || s.Idle != 3 {
		t.Fatalf("a later report of b reached the scheduler as %v", s)
	}
	sys.Root.Send(k, &probeRound{})
	// Each cluster probes itself only: a>b crosses the cut.
	for range 2 {
		select {
		case r := <-probes:
			if len(r.Targets) != 1 {
				t.Fatalf("a probe request across the cut: %v", r.Targets)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no probe request")
		}
	}

	sys.Root.Send(k, &msg.ClusterReachability{Cluster: "b", Reachable: true, Reason: "heal"})
	if s := status(); s.Cluster != "b" || s.Unreachable {
		t.Fatalf("after the heal the scheduler got %v", s)
	}
	sys.Root.Send(k, &probeRound{})
	if got := targets(); !got["a"] || !got["b"] {
		t.Fatalf("after the heal the round probes %v", got)
	}
	var kinds []string
	for len(kinds) < 2 {
		select {
		case ev := <-events:
			if ev.Kind == msg.EventUnreachable || ev.Kind == msg.EventReachable {
				kinds = append(kinds, ev.Kind+":"+ev.Fields["cluster"])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("events %v", kinds)
		}
	}
	if kinds[0] != "unreachable:b" || kinds[1] != "reachable:b" {
		t.Fatalf("events %v", kinds)
	}
}

// The rescheduler gets every cluster status the scheduler gets, node load
// included, also the one a partition marks.
func TestReschedulerGetsNodeLoad(t *testing.T) {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	got := make(chan *msg.ClusterStatus, 8)
	res := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if g, ok := ctx.Message().(*msg.GridStatus); ok {
			for _, c := range g.Clusters {
				got <- c
			}
		}
	}))
	env := actors.Env{System: sys, Clock: clock.NewScaled(1)}
	k := sys.Root.Spawn(Props(Config{Order: []string{"a", "b"}, Rescheduler: res, Env: env}))
	status := func() *msg.ClusterStatus {
		t.Helper()
		return recv(t, got, "no status reached the rescheduler")
	}
	sys.Root.Send(k, &msg.ClusterStatus{Cluster: "a", Processors: 2, NodePrograms: map[string]int32{"a-n001": 10}})
	if s := status(); s.NodePrograms["a-n001"] != 10 || s.Processors != 2 {
		t.Fatalf("status %v", s)
	}
	sys.Root.Send(k, &msg.ClusterReachability{Cluster: "a", Reachable: false, Reason: "partition"})
	if s := status(); !s.Unreachable || s.NodePrograms["a-n001"] != 10 {
		t.Fatalf("after the partition the rescheduler got %v", s)
	}
}

// recv is the next value on ch; the test fails with missing after 10 s
// without one.
func recv[T any](t *testing.T, ch chan T, missing string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(missing)
		var zero T
		return zero
	}
}
