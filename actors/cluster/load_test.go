package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// A node's load goes to its node actor and into the cluster's status (the
// information service's node load) until it is lifted; a load on a node
// the cluster does not have is ignored.
func TestNodeLoadReported(t *testing.T) {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	toNode := make(chan *msg.NodeLoad, 4)
	statuses := make(chan *msg.ClusterStatus, 8)
	node := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if x, ok := ctx.Message().(*msg.NodeLoad); ok {
			toNode <- x
		}
	}))
	kis := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if x, ok := ctx.Message().(*msg.ClusterStatus); ok {
			statuses <- x
		}
	}))
	env := actors.Env{System: sys, Clock: clock.NewScaled(1)}
	m := sys.Root.Spawn(Props(Config{Name: "c", Nodes: []NodeInfo{{Name: "c-n000", PID: node}, {Name: "c-n001"}}, KIS: kis,
		Processors: 2, Env: env}))
	status := func() *msg.ClusterStatus {
		t.Helper()
		select {
		case s := <-statuses:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no status")
			return nil
		}
	}
	if s := status(); len(s.NodePrograms) != 0 || s.Processors != 2 {
		t.Fatalf("first status %v", s)
	}
	sys.Root.Send(m, &msg.NodeLoad{Node: "elsewhere", Programs: 3})
	sys.Root.Send(m, &msg.NodeLoad{Node: "c-n000", Programs: 10})
	if s := status(); s.NodePrograms["c-n000"] != 10 || len(s.NodePrograms) != 1 {
		t.Fatalf("loaded status %v", s)
	}
	if x := <-toNode; x.Programs != 10 {
		t.Fatalf("the node got %v", x)
	}
	sys.Root.Send(m, &msg.NodeLoad{Node: "c-n000", Programs: 0})
	if s := status(); len(s.NodePrograms) != 0 {
		t.Fatalf("unloaded status %v", s)
	}
	if x := <-toNode; x.Programs != 0 {
		t.Fatalf("the node got %v", x)
	}
}
