package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// migGrid: a scheduler that places every submission on the first nodes
// of its fixed component's cluster (c at first; two nodes each), nodes
// that forward what they get, a rescheduler that forwards requests; events
// are collected.
type migGrid struct {
	sys    *actor.ActorSystem
	sched  *actor.PID
	resch  *actor.PID
	nodes  map[string]*actor.PID // by node name
	toNode chan interface{}
	toSch  chan interface{}
	toRes  chan *msg.MigrationRequest
	prog   chan *msg.MigrationRequest // JobProgress figures
	ended  chan *msg.JobEnded
	events chan *msg.Event
	env    actors.Env
}

func newMigGrid(t *testing.T) *migGrid {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	g := &migGrid{sys: sys, nodes: map[string]*actor.PID{}, toNode: make(chan interface{}, 64), toSch: make(chan interface{}, 16),
		toRes: make(chan *msg.MigrationRequest, 4), prog: make(chan *msg.MigrationRequest, 16), ended: make(chan *msg.JobEnded, 2), events: make(chan *msg.Event, 256)}
	for _, name := range []string{"c-n001", "c-n002", "d-n001", "d-n002"} {
		g.nodes[name] = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch x := ctx.Message().(type) {
			case *msg.StartRank:
				ctx.Send(x.Runner.PID(), &msg.RankReady{JobId: x.JobId, Rank: x.Rank, Node: name, Addr: "x"})
				g.toNode <- x
			case *msg.RankTable:
				g.toNode <- x
			case *msg.StopRank, *msg.RankRestart:
				g.toNode <- x
			}
		}))
	}
	g.sched = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *msg.SubmitJob:
			g.toSch <- x
			c := "c"
			if len(x.Job.Components) > 0 {
				c = x.Job.Components[0].Cluster
			}
			a := &msg.Allocation{Cluster: c}
			for i := range x.Job.Size {
				name := fmt.Sprintf("%s-n%03d", c, i+1)
				a.Nodes = append(a.Nodes, &msg.NodeRef{Name: name, Pid: msg.FromPID(g.nodes[name])})
			}
			ctx.Send(x.Runner.PID(), &msg.JobPlaced{JobId: x.Job.Id, Allocations: []*msg.Allocation{a}})
		case *msg.JobFinished:
			g.toSch <- x
		}
	}))
	g.resch = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *msg.MigrationRequest:
			g.toRes <- x
		case *msg.JobProgress:
			g.prog <- x.Figures
		case *msg.JobEnded:
			g.ended <- x
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

// startWatched starts a watched qr job "j" of one rank on c (a small
// matrix at 1 Mflop/s) and returns its runner, its rank connected.
func (g *migGrid) startWatched(t *testing.T) (*actor.PID, *msg.JobSpec) {
	t.Helper()
	job := &msg.JobSpec{Id: "j", App: "qr", Size: 1, Request: "fixed", Components: []*msg.Component{{Cluster: "c", Size: 1}},
		Args: map[string]float64{"n": 480, "nb": 60, "mflops": 1}}
	mig := &Migration{Rescheduler: g.resch, Speeds: map[string]float64{"c": 1, "d": 1},
		Links: func(string, string) (time.Duration, float64) { return time.Microsecond, 1e9 }}
	r := g.sys.Root.Spawn(Props(Config{Job: job, Scheduler: g.sched, TimeScale: 1, Migration: mig, Env: g.env}))
	want[*msg.SubmitJob](t, g.toSch, "submission")
	want[*msg.RankTable](t, g.toNode, "the rank table")
	g.sys.Root.Send(r, &msg.RankConnected{JobId: "j", Rank: 0})
	return r, job
}

func want[T any](t *testing.T, ch chan interface{}, what string) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if x, ok := m.(T); ok {
				return x
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The runner's contract monitor asks for a migration when its phases run
// persistently slower than predicted, widens its limits when refused, and
// on a migration stops the rank, submits the job again fixed on the chosen
// cluster and restarts it there from the checkpoint; the job starts once,
// moves once and completes.
func TestRunnerMigrates(t *testing.T) {
	g := newMigGrid(t)
	r, job := g.startWatched(t)
	phase := func(k int32, slow float64) {
		// Phase k's predicted time is its flops at 1 Mflop/s.
		g.sys.Root.Send(r, &msg.PhaseDone{JobId: "j", Rank: 0, Phase: k, TookS: slow * predicted(t, job, int(k))})
	}
	phase(0, 1)
	phase(1, 5) // a spike: the average (3) is above 2, so it asks
	req := <-g.toRes
	if req.Cluster != "c" || req.Phase != 2 || req.Ratio < 4.9 || req.AverageRatio < 2.9 {
		t.Fatalf("request %+v", req)
	}
	g.sys.Root.Send(r, &msg.MigrationDecision{JobId: "j", Migrate: false, Reason: "no"})
	phase(2, 5) // limits raised to 2 x 3: no new request
	select {
	case x := <-g.toRes:
		t.Fatalf("asked again right after a refusal: %+v", x)
	case <-time.After(200 * time.Millisecond):
	}
	phase(3, 20)
	<-g.toRes
	g.sys.Root.Send(r, &msg.MigrationDecision{JobId: "j", Migrate: true, Cluster: "d", Size: 1, Gain: 0.5, CostS: 42, CostModel: "predicted"})
	want[*msg.StopRank](t, g.toNode, "the stop")
	layout := &msg.Layout{Rows: 480, Cols: 481, ProcsRows: 1, ProcsCols: 1, Nb: 60}
	g.sys.Root.Send(r, &msg.RankStopped{JobId: "j", Rank: 0, Node: "c-n001", Cluster: "c", Phase: 5, DepotAddr: "depot", Layout: layout})
	g.sys.Root.Send(r, &msg.RankDone{JobId: "j", Rank: 0, Node: "c-n001", Ok: true})
	if f := want[*msg.JobFinished](t, g.toSch, "the stopped attempt's end"); !f.Ok {
		t.Fatalf("stopped attempt %+v", f)
	}
	sub := want[*msg.SubmitJob](t, g.toSch, "the submission for d")
	if sub.Job.Request != "fixed" || len(sub.Job.Components) != 1 || sub.Job.Components[0].Cluster != "d" {
		t.Fatalf("resubmission %+v", sub.Job)
	}
	rs := want[*msg.RankRestart](t, g.toNode, "the restart")
	if rs.Phase != 5 || len(rs.Sources) != 1 || rs.Sources[0].DepotAddr != "depot" {
		t.Fatalf("restart %+v", rs)
	}
	want[*msg.RankTable](t, g.toNode, "the new rank table")
	g.sys.Root.Send(r, &msg.RankConnected{JobId: "j", Rank: 0})
	phase(5, 1) // the first phase after the restart: not observed
	phase(6, 1)
	g.sys.Root.Send(r, &msg.RankDone{JobId: "j", Rank: 0, Node: "d-n001", Ok: true, Value: 7})
	kinds := map[string]int{}
	deadline := time.After(10 * time.Second)
	for kinds[msg.EventEnd] == 0 {
		select {
		case ev := <-g.events:
			kinds[ev.Kind]++
			if ev.Kind == msg.EventMigrated && (ev.Fields["from"] != "c" || ev.Fields["to"] != "d" || ev.Values["predicted_cost_s"] != 42 ||
				ev.Fields["trigger"] != TriggerRequest) {
				t.Errorf("migrated event %v %v", ev.Fields, ev.Values)
			}
			if ev.Kind == msg.EventEnd && ev.Fields["status"] != "completed" {
				t.Errorf("end %v", ev.Fields)
			}
		case <-deadline:
			t.Fatalf("no end; events %v", kinds)
		}
	}
	if kinds[msg.EventStart] != 1 || kinds[msg.EventMigrated] != 1 || kinds[msg.EventMigrationStop] != 1 || kinds[msg.EventContractViolation] != 2 {
		t.Errorf("events %v", kinds)
	}
	// The rescheduler heard every phase observed (4 on c, 1 on d after the
	// restart's first, the monitor's figures) and the end, with the node
	// freed.
	var where []string
	for range 5 {
		select {
		case f := <-g.prog:
			where = append(where, fmt.Sprintf("%s:%d", f.Cluster, f.Phase))
		case <-time.After(10 * time.Second):
			t.Fatalf("progress %v", where)
		}
	}
	if fmt.Sprint(where) != "[c:1 c:2 c:3 c:4 d:7]" {
		t.Errorf("progress reports %v", where)
	}
	select {
	case e := <-g.ended:
		if !e.Ok || len(e.Freed) != 1 || e.Freed[0].Cluster != "d" || fmt.Sprint(e.Freed[0].Nodes) != "[d-n001]" {
			t.Errorf("end %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rescheduler did not hear of the end")
	}
}

// An opportunistic decision moves the job like a requested one, and its
// move records the trigger; a decision arriving while a move is under way
// is ignored.
func TestRunnerMovesOpportunistically(t *testing.T) {
	g := newMigGrid(t)
	r, job := g.startWatched(t)
	g.sys.Root.Send(r, &msg.PhaseDone{JobId: "j", Rank: 0, Phase: 0, TookS: predicted(t, job, 0)})
	<-g.prog
	g.sys.Root.Send(r, &msg.MigrationDecision{JobId: "j", Migrate: true, Cluster: "d", Size: 1, Gain: 0.6, CostS: 40,
		CostModel: "predicted", Opportunistic: true, FreedBy: "x"})
	want[*msg.StopRank](t, g.toNode, "the stop")
	g.sys.Root.Send(r, &msg.MigrationDecision{JobId: "j", Migrate: true, Cluster: "c", Size: 1, Opportunistic: true, FreedBy: "y"})
	layout := &msg.Layout{Rows: 480, Cols: 481, ProcsRows: 1, ProcsCols: 1, Nb: 60}
	g.sys.Root.Send(r, &msg.RankStopped{JobId: "j", Rank: 0, Node: "c-n001", Cluster: "c", Phase: 1, DepotAddr: "depot", Layout: layout})
	g.sys.Root.Send(r, &msg.RankDone{JobId: "j", Rank: 0, Node: "c-n001", Ok: true})
	want[*msg.JobFinished](t, g.toSch, "the stopped attempt's end")
	if sub := want[*msg.SubmitJob](t, g.toSch, "the submission for d"); sub.Job.Components[0].Cluster != "d" {
		t.Fatalf("resubmission %+v: the second decision was not ignored", sub.Job)
	}
	want[*msg.RankTable](t, g.toNode, "the new rank table")
	g.sys.Root.Send(r, &msg.RankConnected{JobId: "j", Rank: 0})
	g.sys.Root.Send(r, &msg.PhaseDone{JobId: "j", Rank: 0, Phase: 1, TookS: predicted(t, job, 1)})
	if ev := g.migrated(t); ev.Fields["trigger"] != TriggerOpportunistic || ev.Fields["to"] != "d" || ev.Values["gain"] != 0.6 {
		t.Errorf("migrated event %v %v", ev.Fields, ev.Values)
	}
}

// migrated waits for the migrated event.
func (g *migGrid) migrated(t *testing.T) *msg.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-g.events:
			if ev.Kind == msg.EventMigrated {
				return ev
			}
		case <-deadline:
			t.Fatal("no migrated event")
			return nil
		}
	}
}

// A job moved onto two nodes resumes when its last rank has read its part
// of the checkpoint and begun its first phase: the measured cost runs to
// the latest of the ranks' starts (rank 0's phase began long before the
// stop by its report; rank 1's as it reports), and the move is recorded
// once both have reported.
func TestRunnerMeasuresMoveToLastRank(t *testing.T) {
	g := newMigGrid(t)
	r, _ := g.startWatched(t)
	g.sys.Root.Send(r, &msg.MigrationDecision{JobId: "j", Migrate: true, Cluster: "d", Size: 2, Gain: 0.5, CostS: 30, CostModel: "predicted"})
	want[*msg.StopRank](t, g.toNode, "the stop")
	layout := &msg.Layout{Rows: 480, Cols: 481, ProcsRows: 1, ProcsCols: 1, Nb: 60}
	g.sys.Root.Send(r, &msg.RankStopped{JobId: "j", Rank: 0, Node: "c-n001", Cluster: "c", Phase: 1, DepotAddr: "depot", Layout: layout})
	g.sys.Root.Send(r, &msg.RankDone{JobId: "j", Rank: 0, Node: "c-n001", Ok: true})
	want[*msg.JobFinished](t, g.toSch, "the stopped attempt's end")
	want[*msg.SubmitJob](t, g.toSch, "the submission for d")
	want[*msg.RankTable](t, g.toNode, "the new rank table")
	for rank := range int32(2) {
		g.sys.Root.Send(r, &msg.RankConnected{JobId: "j", Rank: rank})
	}
	g.sys.Root.Send(r, &msg.PhaseDone{JobId: "j", Rank: 0, Phase: 1, TookS: 1e6})
	g.sys.Root.Send(r, &msg.PhaseDone{JobId: "j", Rank: 1, Phase: 1, TookS: 0})
	if c := g.migrated(t).Values["measured_cost_s"]; c < 0 || c > 1e5 {
		t.Errorf("measured cost %v s: not to the last rank's start", c)
	}
}

// predicted is phase k's model time for job on one node of speed 1 (s).
func predicted(t *testing.T, job *msg.JobSpec, k int) float64 {
	t.Helper()
	r := &runner{cfg: Config{Job: job, Migration: &Migration{Speeds: map[string]float64{"c": 1},
		Links: func(string, string) (time.Duration, float64) { return time.Microsecond, 1e9 }}},
		members: []*member{{cluster: "c"}}}
	m, _, err := apps.QRModel(job.Args, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.mig = &migration{model: m}
	d, err := r.predict(k)
	if err != nil {
		t.Fatal(err)
	}
	return d.Seconds()
}
