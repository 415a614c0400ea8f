package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// harness: node actors with real ranks over loopback, and a probe playing
// the runner.
type harness struct {
	t     *testing.T
	sys   *actor.ActorSystem
	env   actors.Env
	nodes []*actor.PID
	probe *actor.PID
	ch    chan interface{}
}

func newHarness(t *testing.T, nodes int) *harness {
	h := &harness{t: t, sys: actor.NewActorSystem(actors.QuietLogging()), ch: make(chan interface{}, 1024)}
	t.Cleanup(h.sys.Shutdown)
	h.env = actors.Env{System: h.sys, Clock: clock.NewScaled(10)}
	for i := 0; i < nodes; i++ {
		pid, err := h.sys.Root.SpawnNamed(Props(Config{Name: fmt.Sprintf("n%d", i), Cluster: "c", Speed: 1, Processors: 1, Env: h.env}), fmt.Sprintf("node-n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		h.nodes = append(h.nodes, pid)
		t.Cleanup(func() { _ = h.sys.Root.StopFuture(pid).Wait() })
	}
	h.probe = h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case actor.SystemMessage, actor.AutoReceiveMessage:
			return
		}
		h.ch <- ctx.Message()
	}))
	return h
}

// next waits for the next message of type T.
func next[T any](h *harness, what string) T {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-h.ch:
			if x, ok := m.(T); ok {
				return x
			}
			if d, ok := m.(*msg.RankDone); ok && !d.Ok {
				h.t.Fatalf("waiting for %s: rank %d failed: %s", what, d.Rank, d.Error)
			}
		case <-deadline:
			var zero T
			h.t.Fatalf("timed out waiting for %s (%T)", what, zero)
			return zero
		}
	}
}

func (h *harness) start(node int, rank, size int32, app string, args map[string]float64) *msg.RankReady {
	h.t.Helper()
	h.sys.Root.Send(h.nodes[node], &msg.StartRank{JobId: "j", Rank: rank, Size: size, App: app, Args: args, TimeScale: 300,
		Cluster: "c", Runner: msg.FromPID(h.probe)})
	r := next[*msg.RankReady](h, "RankReady")
	if r.Error != "" {
		h.t.Fatalf("StartRank on n%d: %s", node, r.Error)
	}
	return r
}

// TestNodeGrowsAndShrinksARunningJob drives the node actors the way the
// MRunner does: a 2-rank n-body job, a grow to 4 (two ranks started for it
// join), a shrink to 3 (the last rank hands its data over and leaves).
func TestNodeGrowsAndShrinksARunningJob(t *testing.T) {
	h := newHarness(t, 4)
	args := map[string]float64{"iterations": 30000, "data_mb": 1}
	var peers []*msg.RankPeer
	for i := 0; i < 2; i++ {
		r := h.start(i, int32(i), 2, "nbody", args)
		peers = append(peers, &msg.RankPeer{Rank: int32(i), Addr: r.Addr, Cluster: "c"})
	}
	for i := 0; i < 2; i++ {
		h.sys.Root.Send(h.nodes[i], &msg.RankTable{JobId: "j", Peers: peers})
	}
	for i := 0; i < 2; i++ {
		next[*msg.RankConnected](h, "RankConnected")
	}
	// Grow 2 -> 4.
	for i := 2; i < 4; i++ {
		r := h.start(i, int32(i), 4, "nbody", args)
		peers = append(peers, &msg.RankPeer{Rank: int32(i), Addr: r.Addr, Cluster: "c"})
	}
	for i := 0; i < 4; i++ {
		h.sys.Root.Send(h.nodes[i], &msg.ResizeRanks{JobId: "j", ResizeId: 1, Peers: peers, OldSize: 2, Self: int32(i)})
	}
	for i := 0; i < 4; i++ {
		x := next[*msg.RankResized](h, "RankResized of the grow")
		if x.Error != "" || x.ResizeId != 1 || x.NewRank != x.Rank || x.Released || x.ResizeS <= 0 {
			t.Errorf("grow report %+v", x)
		}
		if x.Rank < 2 && x.SafePoints < 1 {
			t.Errorf("old rank %d reports %d safe points", x.Rank, x.SafePoints)
		}
	}
	// Shrink 4 -> 3.
	for i := 0; i < 4; i++ {
		self := int32(i)
		if i == 3 {
			self = -1
		}
		h.sys.Root.Send(h.nodes[i], &msg.ResizeRanks{JobId: "j", ResizeId: 2, Peers: peers[:3], OldSize: 4, Self: self, Mandatory: true})
	}
	released := false
	for got := 0; got < 4; {
		switch x := (<-h.ch).(type) {
		case *msg.RankResized:
			got++
			if x.Error != "" || x.ResizeId != 2 {
				t.Fatalf("shrink report %+v", x)
			}
			if x.Node == "n3" {
				released = x.Released && x.NewRank == -1
			}
		case *msg.RankDone:
			if x.Node != "n3" || !released || !x.Ok {
				t.Fatalf("RankDone before its RankResized released: %+v", x)
			}
		}
	}
	if !released {
		t.Error("rank 3 did not report its release")
	}
	var value float64
	for done := 0; done < 3; {
		x := next[*msg.RankDone](h, "RankDone")
		if x.Node == "n3" {
			continue
		}
		done++
		if !x.Ok || x.Iterations != 100 || x.BytesSent == 0 {
			t.Errorf("rank %d done %+v", x.Rank, x)
		}
		if value != 0 && x.Value != value {
			t.Errorf("ranks disagree on the checksum: %v and %v", value, x.Value)
		}
		value = x.Value
	}
}

// An FT job on three ranks keeps two and asks to release the third.
func TestNodeForwardsTheApplicationsRelease(t *testing.T) {
	h := newHarness(t, 3)
	var peers []*msg.RankPeer
	for i := 0; i < 3; i++ {
		r := h.start(i, int32(i), 3, "ft", map[string]float64{"iterations": 6000, "data_mb": 0.25})
		peers = append(peers, &msg.RankPeer{Rank: int32(i), Addr: r.Addr, Cluster: "c"})
	}
	for i := 0; i < 3; i++ {
		h.sys.Root.Send(h.nodes[i], &msg.RankTable{JobId: "j", Peers: peers})
	}
	x := next[*msg.AppRelease](h, "AppRelease")
	if x.Rank != 0 || x.Processors != 1 || x.JobId != "j" {
		t.Errorf("release %+v", x)
	}
	for done := 0; done < 3; done++ {
		if d := next[*msg.RankDone](h, "RankDone"); !d.Ok {
			t.Errorf("rank %d: %s", d.Rank, d.Error)
		}
	}
}

// A rigid application refuses to resize with a reason.
func TestNodeRefusesToResizeARigidApplication(t *testing.T) {
	h := newHarness(t, 1)
	r := h.start(0, 0, 1, "prime", nil)
	h.sys.Root.Send(h.nodes[0], &msg.ResizeRanks{JobId: "j", ResizeId: 7, Peers: []*msg.RankPeer{{Rank: 0, Addr: r.Addr}}, OldSize: 1, Self: 0})
	x := next[*msg.RankResized](h, "RankResized")
	if x.Error == "" || x.ResizeId != 7 {
		t.Errorf("rigid resize report %+v", x)
	}
	h.sys.Root.Send(h.nodes[0], &msg.AbortRank{JobId: "j", Reason: "test over"})
	next[*msg.RankDone](h, "RankDone")
}
