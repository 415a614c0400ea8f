package rescheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/clock"
)

// oppWorld is a rescheduler actor with a runner that collects its
// decisions and a recorder that collects its events.
type oppWorld struct {
	sys       *actor.ActorSystem
	res       *actor.PID
	runner    *msg.Pid
	decisions chan *msg.MigrationDecision
	events    chan *msg.Event
}

func newOppWorld(t *testing.T) *oppWorld {
	t.Helper()
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	w := &oppWorld{sys: sys, decisions: make(chan *msg.MigrationDecision, 8), events: make(chan *msg.Event, 32)}
	w.runner = msg.FromPID(sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if d, ok := ctx.Message().(*msg.MigrationDecision); ok {
			w.decisions <- d
		}
	})))
	rec := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok && ev.Kind == msg.EventOpportunistic {
			w.events <- ev
		}
	}))
	cfg := testConfig(t, gridCost(), false)
	cfg.Env = actors.Env{System: sys, Clock: clock.NewScaled(1), Recorder: rec}
	w.res = sys.Root.Spawn(Props(cfg))
	return w
}

// progress reports job id's figures: on slow's 8 nodes, phase 2 done,
// running ratio times slower than predicted.
func (w *oppWorld) progress(id string, ratio float64) {
	w.sys.Root.Send(w.res, &msg.JobProgress{Figures: &msg.MigrationRequest{JobId: id, App: "qr",
		Args: map[string]float64{"n": 8000, "mflops": 600}, Cluster: "slow", Size: 8, Phase: 2, AverageRatio: ratio,
		Ratio: ratio, Runner: w.runner}})
}

// end ends job id, which frees the 4 nodes of fast.
func (w *oppWorld) end(id string, ok bool) {
	var nodes []string
	for i := range 4 {
		nodes = append(nodes, fmt.Sprintf("fast-n%03d", i))
	}
	w.sys.Root.Send(w.res, &msg.JobEnded{JobId: id, Ok: ok, Freed: []*msg.FreedNodes{{Cluster: "fast", Nodes: nodes}}})
}

func (w *oppWorld) event(t *testing.T) *msg.Event {
	t.Helper()
	select {
	case ev := <-w.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no opportunistic decision")
		return nil
	}
}

// A job ends and frees fast nodes: of two running jobs on the slow
// cluster, the one slowed most moves (largest gain), with the decision's
// figures in its event; nothing moves when the freed nodes are loaded, when
// the only candidate is moving already, or when no job runs; a failed job
// decides nothing.
func TestOpportunistic(t *testing.T) {
	w := newOppWorld(t)
	w.progress("a", 1) // at the model's pace: the freed nodes are no faster
	w.progress("b", 6) // six times slower than predicted
	w.end("x", true)
	ev := w.event(t)
	if ev.Fields["chosen"] != "b" || ev.Fields["migrate"] != "true" || ev.Fields["freed_by"] != "x" || ev.Fields["to"] != "fast" ||
		ev.Values["candidates"] != 2 || ev.Values["gain"] <= migrate.DefaultThreshold || ev.Fields["reason"] != migrate.ReasonBestGain {
		t.Fatalf("event %v %v", ev.Fields, ev.Values)
	}
	v := ev.Values
	if want := (v["here_s"] - v["there_s"] - v["cost_s"]) / v["here_s"]; v["gain"] < want-1e-9 || v["gain"] > want+1e-9 {
		t.Errorf("gain %v, figures give %v", v["gain"], want)
	}
	d := <-w.decisions
	if d.JobId != "b" || !d.Migrate || !d.Opportunistic || d.Cluster != "fast" || d.Size != 4 || d.FreedBy != "x" || d.Gain != v["gain"] {
		t.Fatalf("decision %+v", d)
	}
	// b is moving: a would not gain, so nothing moves.
	w.end("y", true)
	if ev := w.event(t); ev.Fields["migrate"] != "false" || ev.Fields["chosen"] != "" || ev.Fields["best"] != "a" ||
		ev.Values["candidates"] != 1 || ev.Fields["reason"] != migrate.ReasonNoJobGains {
		t.Fatalf("with b moving: %v %v", ev.Fields, ev.Values)
	}
	// The freed nodes loaded six times (information service): a job
	// slowed as b was stays.
	programs := map[string]int32{}
	for i := range 4 {
		programs[fmt.Sprintf("fast-n%03d", i)] = 10
	}
	w.sys.Root.Send(w.res, &msg.GridStatus{Clusters: []*msg.ClusterStatus{{Cluster: "fast", Processors: 2, NodePrograms: programs}}})
	w.progress("c", 6) // slowed as b was
	w.end("z", true)
	if ev := w.event(t); ev.Fields["migrate"] != "false" || ev.Fields["best"] != "c" || ev.Values["candidates"] != 2 {
		t.Fatalf("loaded freed nodes: %v %v", ev.Fields, ev.Values)
	}
	for _, id := range []string{"a", "b", "c"} {
		w.end(id, true)
	}
	w.end("f", false)
	w.end("none", true)
	for range 4 {
		ev := w.event(t)
		if ev.Fields["freed_by"] == "f" {
			t.Fatalf("a failed job's end decided: %v", ev.Fields)
		}
		if ev.Fields["freed_by"] == "none" && (ev.Values["candidates"] != 0 || ev.Fields["reason"] != migrate.ReasonNoCandidates) {
			t.Fatalf("no running job: %v %v", ev.Fields, ev.Values)
		}
	}
	select {
	case d := <-w.decisions:
		t.Fatalf("a second decision %+v", d)
	case ev := <-w.events:
		t.Fatalf("a decision too many: %v", ev.Fields)
	case <-time.After(100 * time.Millisecond):
	}
}
