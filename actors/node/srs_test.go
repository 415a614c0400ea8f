package node

import (
	"context"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// A qr job on 4 nodes reports its phases, stops at a safe point when told
// and leaves its checkpoint in the nodes' depots; 2 other nodes restart it
// from there, reading and redistributing the checkpoint, and end with the
// checksum of the run that never stopped.
func TestNodeStopsAndRestartsACheckpointableJob(t *testing.T) {
	h := newHarness(t, 6)
	args := map[string]float64{"n": 480, "nb": 60, "mflops": 1, "seed": 5}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, ref, err := apps.RunLocal(ctx, apps.QR{}, []apps.RankSpec{{Cluster: "c"}}, nil, apps.Params{TimeScale: 300, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	runJob := func(nodes []int, restart *msg.RankRestart) {
		var peers []*msg.RankPeer
		for i, nd := range nodes {
			r := h.start(nd, int32(i), int32(len(nodes)), "qr", args)
			peers = append(peers, &msg.RankPeer{Rank: int32(i), Addr: r.Addr, Cluster: "c"})
			if restart != nil {
				h.sys.Root.Send(h.nodes[nd], restart)
			}
		}
		for _, nd := range nodes {
			h.sys.Root.Send(h.nodes[nd], &msg.RankTable{JobId: "j", Peers: peers})
		}
	}
	runJob([]int{0, 1, 2, 3}, nil)
	pd := next[*msg.PhaseDone](h, "PhaseDone")
	if pd.TookS <= 0 {
		t.Errorf("phase report %+v", pd)
	}
	for i := 0; i < 4; i++ {
		h.sys.Root.Send(h.nodes[i], &msg.StopRank{JobId: "j", Reason: "test"})
	}
	restart := &msg.RankRestart{JobId: "j"}
	// A rank reports done once its communicator closed, which may be before
	// another rank reported its stop (connections are lazy: a rank waits
	// only for the goodbyes of the peers it talked to).
	var stops []*msg.RankStopped
	dones := 0
	deadline := time.After(30 * time.Second)
	for len(stops) < 4 || dones < 4 {
		select {
		case m := <-h.ch:
			switch x := m.(type) {
			case *msg.RankStopped:
				stops = append(stops, x)
			case *msg.RankDone:
				if !x.Ok {
					t.Fatalf("stopped rank: %+v", x)
				}
				dones++
			}
		case <-deadline:
			t.Fatalf("timed out: %d RankStopped, %d RankDone of 4", len(stops), dones)
		}
	}
	for _, st := range stops {
		if st.DepotAddr == "" || st.Layout == nil || st.Layout.ProcsRows*st.Layout.ProcsCols != 4 {
			t.Fatalf("stop report %+v", st)
		}
		if restart.Layout != nil && st.Phase != restart.Phase {
			t.Fatalf("ranks stopped after phases %d and %d", st.Phase, restart.Phase)
		}
		restart.Phase, restart.Layout = st.Phase, st.Layout
		restart.Sources = append(restart.Sources, &msg.CheckpointSource{Rank: st.Rank, DepotAddr: st.DepotAddr, Cluster: st.Cluster})
	}
	if restart.Phase < 1 || restart.Phase >= 8 {
		t.Fatalf("stopped after %d phases of 8", restart.Phase)
	}
	runJob([]int{4, 5}, restart)
	for i := 0; i < 2; i++ {
		d := next[*msg.RankDone](h, "RankDone of a restarted rank")
		if !d.Ok || d.Value != ref.Value || int(d.Iterations) != 8-int(restart.Phase) {
			t.Errorf("restarted rank %d: ok %v checksum %v after %d phases; want %v after %d", d.Rank, d.Ok, d.Value, d.Iterations, ref.Value, 8-restart.Phase)
		}
	}
}
