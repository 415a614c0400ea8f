package runner

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// fakeGrid is a scheduler that places every submission on node n1 and a
// node n1 that runs a rank until it is aborted; the runner's messages to
// the scheduler and its events are collected.
type fakeGrid struct {
	sys     *actor.ActorSystem
	sched   *actor.PID
	toSched chan interface{}
	events  chan *msg.Event
	env     actors.Env
	started chan struct{}
}

func newFakeGrid(t *testing.T) *fakeGrid {
	t.Helper()
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	g := &fakeGrid{sys: sys, toSched: make(chan interface{}, 16), events: make(chan *msg.Event, 64), started: make(chan struct{}, 4)}
	node := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *msg.StartRank:
			ctx.Send(x.Runner.PID(), &msg.RankReady{JobId: x.JobId, Rank: x.Rank, Node: "n1", Addr: "x"})
		case *msg.RankTable:
			g.started <- struct{}{}
		case *msg.AbortRank:
			// A killed node never answers; n1 stands for one.
		}
	}))
	g.sched = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *msg.SubmitJob:
			g.toSched <- x
			ctx.Send(x.Runner.PID(), &msg.JobPlaced{JobId: x.Job.Id, Allocations: []*msg.Allocation{
				{Cluster: "c", Nodes: []*msg.NodeRef{{Name: "n1", Pid: msg.FromPID(node)}}}}})
		case *msg.JobFinished:
			g.toSched <- x
		}
	}))
	rec := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok {
			g.events <- ev
		}
	}))
	g.env = actors.Env{System: sys, Clock: clock.NewScaled(1), Recorder: rec}
	return g
}

func (g *fakeGrid) next(t *testing.T) interface{} {
	t.Helper()
	select {
	case m := <-g.toSched:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the runner told the scheduler nothing within 10 s")
		return nil
	}
}

// A node lost under a running job fails it with cause node_down; with one
// resubmission the job is submitted again, and a second loss of the node
// (whether the runner hears of it before or after the retry's placement)
// fails it for good. Each attempt's end is an event with its cause.
func TestNodeDownResubmitsThenFails(t *testing.T) {
	g := newFakeGrid(t)
	job := &msg.JobSpec{Id: "j1", App: "prime", Size: 1, Request: "flexible"}
	r := g.sys.Root.Spawn(Props(Config{Job: job, Scheduler: g.sched, Resubmits: 1, TimeScale: 1, Env: g.env}))
	if _, ok := g.next(t).(*msg.SubmitJob); !ok {
		t.Fatal("no submission")
	}
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the rank never got its table")
	}
	down := &msg.NodeDown{Node: "n1", Cluster: "c", Reason: "killed"}
	g.sys.Root.Send(r, down)
	f, ok := g.next(t).(*msg.JobFinished)
	if !ok || f.Ok || f.Cause != msg.FailureCause_FAILURE_NODE_DOWN {
		t.Fatalf("first attempt: want JobFinished failed by node_down, got %v", f)
	}
	g.sys.Root.Send(r, down)
	if _, ok := g.next(t).(*msg.SubmitJob); !ok {
		t.Fatal("no resubmission")
	}
	f, ok = g.next(t).(*msg.JobFinished)
	if !ok || f.Ok || f.Cause != msg.FailureCause_FAILURE_NODE_DOWN {
		t.Fatalf("second attempt: want JobFinished failed by node_down, got %v", f)
	}
	var resubmits, ends int
	deadline := time.After(10 * time.Second)
	for ends == 0 {
		select {
		case ev := <-g.events:
			switch ev.Kind {
			case msg.EventResubmit:
				resubmits++
				if ev.Fields["cause"] != "node_down" || ev.Values["attempt"] != 1 {
					t.Errorf("resubmit event %v %v", ev.Fields, ev.Values)
				}
			case msg.EventEnd:
				ends++
				if ev.Fields["status"] != "failed" || ev.Fields["cause"] != "node_down" {
					t.Errorf("end event %v", ev.Fields)
				}
			}
		case <-deadline:
			t.Fatalf("no end event (%d resubmits)", resubmits)
		}
	}
	if resubmits != 1 {
		t.Errorf("%d resubmit events, want 1", resubmits)
	}
}
