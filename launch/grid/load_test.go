package grid

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
)

// A load is sent to the live hosts of its nodes, each with its own total;
// a node the timeline killed is skipped, one without a host is an error
// that does not keep the others from their load.
func TestLoadTargets(t *testing.T) {
	nodes := []membership.Member{member("a1", "a"), member("a2", "a"), member("a3", "a")}
	loads := []wiring.NodePrograms{{Node: "a1", Cluster: "a", Programs: 2}, {Node: "a2", Cluster: "a", Programs: 2},
		{Node: "a3", Cluster: "a", Programs: 5}, {Node: "a9", Cluster: "a", Programs: 2}}
	hosts, programs, err := loadTargets(nodes, map[string]bool{"a2": true}, loads)
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	if !reflect.DeepEqual(names, []string{"a1", "a3"}) || !reflect.DeepEqual(programs, map[string]int{"a1": 2, "a3": 5}) {
		t.Errorf("hosts %v, programs %v; want a1 (2) and a3 (5)", names, programs)
	}
	if err == nil || !strings.Contains(err.Error(), "node a9: no host") {
		t.Errorf("a node without a host: %v", err)
	}
}

// eventSink collects the events of one kind.
type eventSink struct {
	kind string
	out  chan *msg.Event
}

func (s *eventSink) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*msg.Event); ok && ev.Kind == s.kind {
		s.out <- ev
	}
}

// A node host's control actor hands a GridLoad to its node actor, the
// node actor of the inproc backend: the node's computation stretches by
// (processors + programs) / processors and it emits node_load, with the
// programs, the factor and the reason of every load from the timeline;
// the host acknowledges without error. A cluster manager's host refuses
// the load.
func TestHostLoadsItsNode(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sink := &eventSink{kind: msg.EventNodeLoad, out: make(chan *msg.Event, 4)}
	rec := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return sink }))
	env := actors.Env{System: system, Clock: clock.NewScaled(1), Recorder: rec}
	nodePID, err := system.Root.SpawnNamed(node.Props(node.Config{Name: "a1", Cluster: "a", Speed: 1, Processors: 2, Dilation: 1, Env: env}),
		wiring.NodeActor("a1"))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(h *host, req interface{}) *msg.GridAck {
		t.Helper()
		ctl := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &ctlActor{h: h} }))
		defer system.Root.Stop(ctl)
		res, err := system.Root.RequestFuture(ctl, req, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*msg.GridAck)
	}
	launcher := &Grid{Launcher: system.Address()} // the test asks as the launcher
	nodeHost := &host{cfg: HostConfig{Name: "a1", Role: membership.RoleNode, Cluster: "a"}, grid: launcher, system: system, roleActor: nodePID}
	for _, programs := range []int32{3, 0} {
		if ack := ask(nodeHost, &msg.GridLoad{Programs: programs}); ack.Error != "" || ack.Host != "a1" {
			t.Fatalf("load %d: %+v", programs, ack)
		}
		select {
		case ev := <-sink.out:
			want := (2 + float64(programs)) / 2
			if ev.Fields["node"] != "a1" || ev.Values["programs"] != float64(programs) || ev.Values["factor"] != want ||
				ev.Fields["reason"] != "faults timeline" {
				t.Errorf("load %d: event %+v, want factor %.1f", programs, ev, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("load %d: no node_load event", programs)
		}
	}
	mgr := &host{cfg: HostConfig{Name: "a-cm", Role: membership.RoleCluster, Cluster: "a"}, grid: launcher, system: system}
	if ack := ask(mgr, &msg.GridLoad{Programs: 1}); !strings.Contains(ack.Error, "runs no node") {
		t.Errorf("a cluster manager's host took a load: %+v", ack)
	}
}
