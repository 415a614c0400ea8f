package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/results"
)

// A node reported down as a request is answered with the report once the
// manager has marked the node down and sent its node_down event; a report
// sent without a reply address is handled alike, and a report of a node
// the cluster does not have is answered without an event.
func TestNodeDownRequestAnsweredOnceMarked(t *testing.T) {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	rec := results.NewRecorder(nil, 1, nil)
	recPID := sys.Root.Spawn(rec.Props())
	env := actors.Env{System: sys, Clock: clock.NewScaled(1), Recorder: recPID}
	m := sys.Root.Spawn(Props(Config{Name: "c", Nodes: []NodeInfo{{Name: "c-n000"}, {Name: "c-n001"}}, Env: env}))
	ask := func(nd *msg.NodeDown) {
		t.Helper()
		got, err := sys.Root.RequestFuture(m, nd, 10*time.Second).Result()
		if err != nil || got != nd {
			t.Fatalf("report of %s answered %v, %v; want the report", nd.Node, got, err)
		}
		// The manager sent its event before it answered: once the
		// recorder has handled what it was sent, the event is there.
		if err := rec.Sync(sys.Root, recPID, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ask(&msg.NodeDown{Node: "c-n000", Cluster: "c", Reason: "killed"})
	if n := rec.Count(msg.EventNodeDown); n != 1 {
		t.Fatalf("%d node_down events after the first report, want 1", n)
	}
	sys.Root.Send(m, &msg.NodeDown{Node: "c-n001", Cluster: "c", Reason: "killed"})
	ask(&msg.NodeDown{Node: "elsewhere", Cluster: "c", Reason: "killed"})
	if n := rec.Count(msg.EventNodeDown); n != 2 {
		t.Fatalf("%d node_down events after the three reports, want 2 (none for a node of another cluster)", n)
	}
}
