package batch_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
	"github.com/koala-emu/koala-emu/actors/virtualtest"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// fakeNodes are the node actors of a batch cluster in a virtual world:
// each answers StartRank and RankTable as actors/node does and reports
// RankDone after its process's runtime times slow (on the virtual clock),
// or stopLag after an AbortRank. It records what it was sent.
type fakeNodes struct {
	w       *virtualtest.World
	slow    float64
	stopLag time.Duration
	// reportLag is how long a process that ended by itself takes to report
	// (a stop arriving meanwhile finds nothing to stop).
	reportLag time.Duration
	// jitter, when set, adds to every stop's lag.
	jitter func() time.Duration
	fail   map[string]string // job -> the error its processes report at their end

	mu      sync.Mutex
	starts  []fakeStart
	aborts  map[string][]time.Duration // job -> the instants its processes were aborted
	overlap []string                   // a StartRank to a node already running a process
}

type fakeStart struct {
	job, node string
	at        time.Duration
	x         *msg.StartRank
}

type fakeNode struct {
	f         *fakeNodes
	name      string
	job       string // the process it runs, "" when free
	rank      *msg.StartRank
	stop      func()
	reporting bool // the process ended by itself; its report is on its way
}

// processEnd is a fake node's own timer: its process ended (aborted: it
// was stopped; report: it ended by itself reportLag ago).
type processEnd struct {
	job             string
	aborted, report bool
}

func newFakeNodes(w *virtualtest.World) *fakeNodes {
	return &fakeNodes{w: w, slow: 1, fail: map[string]string{}, aborts: map[string][]time.Duration{}}
}

// spawn spawns n nodes of cluster c0.
func (f *fakeNodes) spawn(n int) []batch.Node {
	var out []batch.Node
	for i := range n {
		name := fmt.Sprintf("c0-%d", i)
		pid := f.w.Spawn(actor.PropsFromProducer(func() actor.Actor { return &fakeNode{f: f, name: name} }), "node-"+name)
		out = append(out, batch.Node{Name: name, PID: pid})
	}
	return out
}

func (n *fakeNode) Receive(ctx actor.Context) {
	f, now := n.f, n.f.w.Clock.Now()
	switch x := ctx.Message().(type) {
	case *msg.StartRank:
		f.mu.Lock()
		f.starts = append(f.starts, fakeStart{job: x.JobId, node: n.name, at: now, x: x})
		if n.job != "" {
			f.overlap = append(f.overlap, fmt.Sprintf("%s at %v: %s while running %s", n.name, now, x.JobId, n.job))
		}
		f.mu.Unlock()
		n.job, n.rank = x.JobId, x
		ctx.Send(x.Runner.PID(), &msg.RankReady{JobId: x.JobId, Rank: x.Rank, Node: n.name, Addr: "fake:" + n.name})
	case *msg.RankTable:
		if n.job != x.JobId || n.stop != nil {
			return
		}
		ctx.Send(n.rank.Runner.PID(), &msg.RankConnected{JobId: x.JobId, Rank: n.rank.Rank})
		run := time.Duration(n.rank.Args["runtime_s"] * f.slow * float64(time.Second))
		n.stop = f.w.Env.After(run, ctx.Self(), &processEnd{job: x.JobId})
	case *msg.AbortRank:
		if n.job != x.JobId || n.reporting {
			return
		}
		f.mu.Lock()
		f.aborts[x.JobId] = append(f.aborts[x.JobId], now)
		f.mu.Unlock()
		if n.stop != nil {
			n.stop()
		}
		lag := f.stopLag
		if f.jitter != nil {
			lag += f.jitter()
		}
		n.stop = f.w.Env.After(lag, ctx.Self(), &processEnd{job: x.JobId, aborted: true})
	case *processEnd:
		if n.job != x.job {
			return
		}
		if !x.aborted && !x.report && f.reportLag > 0 {
			n.reporting = true
			n.stop = f.w.Env.After(f.reportLag, ctx.Self(), &processEnd{job: x.job, report: true})
			return
		}
		done := &msg.RankDone{JobId: n.job, Rank: n.rank.Rank, Node: n.name, Ok: true}
		if x.aborted {
			done.Ok, done.Error = false, "aborted"
		} else if e := f.fail[n.job]; e != "" {
			done.Ok, done.Error = false, e
		}
		runner := n.rank.Runner.PID()
		n.job, n.rank, n.stop, n.reporting = "", nil, nil, false
		ctx.Send(runner, done)
	}
}

// startsOf returns the StartRank instants of a job's processes.
func (f *fakeNodes) startsOf(job string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, s := range f.starts {
		if s.job == job {
			out = append(out, s.at)
		}
	}
	return out
}

func onNodes(t *testing.T, w *virtualtest.World, f *fakeNodes, pol string, capacity int) *actor.PID {
	t.Helper()
	return clusterWith(t, w, pol, capacity, func(c *batch.Config) { c.Execution, c.Nodes = batch.OnNodes, f.spawn(capacity) })
}

// submitted is a job and the instant it is submitted at.
type submitted struct {
	at  time.Duration
	job *msg.BatchSubmit
}

// runOnNodes runs jobs on a cluster c0 of capacity fake nodes, tuned by
// set, planned by pol, and checks that no invariant broke.
func runOnNodes(t *testing.T, pol string, capacity int, set func(*fakeNodes), jobs ...submitted) (*virtualtest.World, *fakeNodes) {
	t.Helper()
	w := virtualtest.New(t)
	f := newFakeNodes(w)
	set(f)
	c := onNodes(t, w, f, pol, capacity)
	for _, j := range jobs {
		w.Send(j.at, c, j.job)
	}
	w.Run(0)
	noViolations(t, w)
	return w, f
}

func endOf(w *virtualtest.World, id string) *msg.Event {
	for _, ev := range w.Events(msg.EventEnd) {
		if ev.JobId == id {
			return ev
		}
	}
	return nil
}

// On nodes, a job runs as one process of apps.Compute per processor, each
// on a node of its own, and ends when its processes report: nodes twice
// as slow as the runtime end it at twice its runtime, not at the runtime
// the manager knows. The plan moves the queue forward at that end.
func TestNodesReportTheEnd(t *testing.T) {
	w, f := runOnNodes(t, "cbf", 4, func(f *fakeNodes) { f.slow = 2 },
		submitted{0, job("a", 4, 100*s, 30*s)}, // ends at 60 on the slow nodes
		submitted{0, job("b", 2, 50*s, 20*s)})  // starts at 60, ends at 100
	if got := at(w, msg.EventBatchEnd, "a"); got != 60*s {
		t.Errorf("a ended at %v, want 60s (its processes' reports)", got)
	}
	if got := at(w, msg.EventBatchStart, "b"); got != 60*s {
		t.Errorf("b started at %v, want 60s", got)
	}
	if got := at(w, msg.EventBatchEnd, "b"); got != 100*s {
		t.Errorf("b ended at %v, want 100s", got)
	}
	nodes := map[string]map[string]bool{}
	for _, st := range f.starts {
		x := st.x
		if x.App != apps.ComputeName || x.Size != 1 || x.Rank != 0 || x.Cluster != "c0" {
			t.Errorf("process of %s on %s: %s rank %d of %d on %s, want %s rank 0 of 1 on c0", st.job, st.node, x.App, x.Rank, x.Size, x.Cluster, apps.ComputeName)
		}
		want := map[string]float64{"a": 30, "b": 20}[st.job]
		if x.Args["runtime_s"] != want {
			t.Errorf("process of %s: runtime_s %v, want %v", st.job, x.Args["runtime_s"], want)
		}
		if nodes[st.job] == nil {
			nodes[st.job] = map[string]bool{}
		}
		nodes[st.job][st.node] = true
	}
	if len(nodes["a"]) != 4 || len(nodes["b"]) != 2 {
		t.Errorf("processes on nodes %v, want a on 4 nodes and b on 2", nodes)
	}
	if ev := endOf(w, "a"); ev == nil || ev.Fields["status"] != "completed" {
		t.Errorf("a's end: %v", ev)
	}
}

// At its walltime the manager stops the job's processes; the job ends,
// killed, when they have reported. The plan counts the processors free at
// the walltime, so the next job starts in the plan then, and its processes
// wait for the nodes the stopped ones still hold: it starts when they run,
// and ends when its run, anchored in the plan, ends.
func TestNodesKillAtWalltime(t *testing.T) {
	w, f := runOnNodes(t, "cbf", 2, func(f *fakeNodes) { f.stopLag = 5 * s },
		submitted{0, job("long", 2, 100*s, 500*s)}, submitted{5 * s, job("next", 2, 30*s, 10*s)})
	if got := f.aborts["long"]; len(got) != 2 || got[0] != 100*s || got[1] != 100*s {
		t.Errorf("long's processes aborted at %v, want both at 100s", got)
	}
	if got := at(w, msg.EventBatchKill, "long"); got != 105*s {
		t.Errorf("long killed at %v, want 105s (its stopped processes' reports)", got)
	}
	if ev := endOf(w, "long"); ev == nil || ev.Fields["cause"] != msg.CauseWalltime {
		t.Errorf("long's end: %v", ev)
	}
	if got := at(w, msg.EventBatchStart, "next"); got != 100*s {
		t.Errorf("next started at %v, want 100s (the plan's)", got)
	}
	if got := f.startsOf("next"); len(got) != 2 || got[0] != 105*s || got[1] != 105*s {
		t.Errorf("next's processes started at %v, want both at 105s (the nodes free)", got)
	}
	if got := at(w, msg.EventStart, "next"); got != 105*s {
		t.Errorf("next's start at %v, want 105s (its processes run)", got)
	}
	if got := at(w, msg.EventBatchEnd, "next"); got != 110*s {
		t.Errorf("next ended at %v, want 110s (its run from 100s; the wait came off it)", got)
	}
	if len(f.overlap) > 0 {
		t.Errorf("nodes given two processes: %v", f.overlap)
	}
}

// A stop at the walltime that finds every process ended by itself (their
// reports on their way) kills nothing: the job completed, when its reports
// arrive. One that finds a process still computing kills the job.
func TestNodesStopAfterTheProcessesEnded(t *testing.T) {
	w, f := runOnNodes(t, "cbf", 4, func(f *fakeNodes) { f.reportLag, f.stopLag = 8*s, 1*s },
		submitted{0, job("done", 2, 100*s, 95*s)}, // ended at 95, reports at 103
		submitted{0, job("cut", 2, 100*s, 120*s)}) // still computing at 100
	if got := f.aborts["done"]; len(got) != 0 {
		t.Errorf("done's processes were stopped computing at %v: they had ended", got)
	}
	if ev := endOf(w, "done"); ev == nil || ev.Fields["status"] != "completed" || ev.TS != 103 {
		t.Errorf("done's end: %v, want completed at 103s", ev)
	}
	if ev := endOf(w, "cut"); ev == nil || ev.Fields["cause"] != msg.CauseWalltime || ev.TS != 101 {
		t.Errorf("cut's end: %v, want killed at its walltime, ended at 101s", ev)
	}
}

// A job the plan starts while the nodes it needs still run a stopped job's
// processes waits for them, and the wait comes off its computation and its
// walltime: it ends when its run, anchored at its start in the plan, ends.
// One whose walltime passes while it waits is killed without a process.
func TestNodesJobWaitsForNodes(t *testing.T) {
	w, f := runOnNodes(t, "fcfs", 2, func(f *fakeNodes) { f.stopLag = 20 * s },
		submitted{0, job("long", 2, 100*s, 500*s)},
		submitted{0, job("short", 2, 50*s, 40*s)}) // the plan starts it at 100; the nodes are free at 120
	if got := at(w, msg.EventBatchStart, "short"); got != 100*s {
		t.Errorf("short started in the plan at %v, want 100s", got)
	}
	for _, st := range f.starts {
		if st.job == "short" && (st.at != 120*s || st.x.Args["runtime_s"] != 20) {
			t.Errorf("short's process started at %v for %vs, want at 120s for 20s", st.at, st.x.Args["runtime_s"])
		}
	}
	if got := at(w, msg.EventStart, "short"); got != 120*s {
		t.Errorf("short's start at %v, want 120s (its processes run)", got)
	}
	if ev := endOf(w, "short"); ev == nil || ev.Fields["status"] != "completed" || ev.TS != 140 {
		t.Errorf("short's end: %v, want completed at 140s", ev)
	}
	if got := at(w, msg.EventBatchKill, "long"); got != 120*s {
		t.Errorf("long killed at %v, want 120s", got)
	}

	w, f = runOnNodes(t, "fcfs", 2, func(f *fakeNodes) { f.stopLag = 50 * s },
		submitted{0, job("long", 2, 100*s, 500*s)},
		submitted{0, job("tiny", 2, 10*s, 20*s)},  // the plan starts it at 100; the nodes are free at 150
		submitted{0, job("fits", 2, 60*s, 30*s)},  // the plan starts it at 110; its run is over when the nodes are free
		submitted{0, job("after", 2, 30*s, 10*s)}) // the plan starts it when fits ends
	if ev := endOf(w, "tiny"); ev == nil || ev.Fields["cause"] != msg.CauseWalltime || ev.TS != 150 || !strings.Contains(ev.Fields["reason"], "waited for nodes") {
		t.Errorf("tiny's end: %v, want killed at 150s, having waited for nodes", ev)
	}
	if got := f.startsOf("tiny"); len(got) != 0 {
		t.Errorf("tiny's processes started at %v, want none", got)
	}
	// fits computes nothing and is not stopped, and after runs from its end.
	if ev := endOf(w, "fits"); ev == nil || ev.Fields["status"] != "completed" || ev.TS != 150 {
		t.Errorf("fits's end: %v, want completed at 150s", ev)
	}
	if ev := endOf(w, "after"); ev == nil || ev.Fields["status"] != "completed" || ev.TS != 160 {
		t.Errorf("after's end: %v, want completed at 160s", ev)
	}
}

// A job that fits in the free nodes goes ahead of a wider one the plan
// started before it, which waits for nodes a stopped job still holds.
func TestNodesSmallJobGoesAhead(t *testing.T) {
	w, f := runOnNodes(t, "fcfs", 6, func(f *fakeNodes) { f.stopLag = 20 * s },
		submitted{0, job("other", 2, 300*s, 200*s)},
		submitted{0, job("long", 2, 100*s, 500*s)}, // stopped at 100, its nodes held until 120
		submitted{0, job("wide", 3, 100*s, 50*s)},  // the plan starts it at 100
		submitted{0, job("small", 1, 100*s, 30*s)}) // and this one
	if got := f.startsOf("small"); len(got) != 1 || got[0] != 100*s {
		t.Errorf("small's process started at %v, want at 100s", got)
	}
	if got := f.startsOf("wide"); len(got) != 3 || got[0] != 120*s {
		t.Errorf("wide's processes started at %v, want at 120s", got)
	}
	if ev := endOf(w, "wide"); ev == nil || ev.Fields["status"] != "completed" || ev.TS != 150 {
		t.Errorf("wide's end: %v, want completed at 150s", ev)
	}
}

// A process that fails stops the job's others; the job fails with the
// cause rank once they have reported, and the queue moves on.
func TestNodesProcessFailure(t *testing.T) {
	w, f := runOnNodes(t, "cbf", 3, func(f *fakeNodes) { f.stopLag, f.fail["bad"] = 2*s, "compute: boom" },
		submitted{0, job("bad", 3, 100*s, 40*s)}, submitted{0, job("after", 3, 100*s, 10*s)})
	ev := endOf(w, "bad")
	if ev == nil || ev.Fields["status"] != "failed" || ev.Fields["cause"] != msg.FailureCause_FAILURE_RANK.Name() {
		t.Fatalf("bad's end: %v", ev)
	}
	// The first process to end fails at 40 s; the manager stops the two
	// others, which report 2 s later.
	if got := f.aborts["bad"]; len(got) != 2 || got[0] != 40*s {
		t.Errorf("bad's processes aborted at %v, want two at 40s", got)
	}
	if got := at(w, msg.EventBatchEnd, "bad"); got != 42*s {
		t.Errorf("bad ended at %v, want 42s (its stopped processes reported then)", got)
	}
	if got := at(w, msg.EventBatchStart, "after"); got != 42*s {
		t.Errorf("after started at %v, want 42s", got)
	}
	if ev := endOf(w, "after"); ev == nil || ev.Fields["status"] != "completed" {
		t.Errorf("after's end: %v", ev)
	}
}

func TestNodesConfigCheck(t *testing.T) {
	w := virtualtest.New(t)
	p, _ := policy.New("cbf")
	nodes := newFakeNodes(w).spawn(3)
	for name, c := range map[string]batch.Config{
		"count":     {Name: "c0", Capacity: 4, Policy: p, Execution: batch.OnNodes, Nodes: nodes},
		"duplicate": {Name: "c0", Capacity: 2, Policy: p, Execution: batch.OnNodes, Nodes: []batch.Node{nodes[0], nodes[0]}},
		"unnamed":   {Name: "c0", Capacity: 1, Policy: p, Execution: batch.OnNodes, Nodes: []batch.Node{{PID: nodes[0].PID}}},
		"execution": {Name: "c0", Capacity: 1, Policy: p, Execution: 7},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Random workloads on nodes that are slow or fast and stop late: every job
// ends once, no node is ever given a second process, and the jobs' records
// never hold more processors than the cluster has.
func TestNodesRandomWorkloads(t *testing.T) {
	for seed := range uint64(12) {
		for _, pol := range []string{"fcfs", "cbf"} {
			t.Run(fmt.Sprintf("%s/%d", pol, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 2))
				w := virtualtest.New(t)
				f := newFakeNodes(w)
				f.slow, f.stopLag = 0.5+r.Float64(), time.Duration(r.IntN(20))*s
				var mu sync.Mutex
				lags := rand.New(rand.NewPCG(seed, 3))
				f.jitter = func() time.Duration {
					mu.Lock()
					defer mu.Unlock()
					return time.Duration(lags.IntN(30)) * s
				}
				const capacity = 12
				c := onNodes(t, w, f, pol, capacity)
				n := 80
				for i := range n {
					at := time.Duration(r.IntN(1500)) * s
					wall := time.Duration(1+r.IntN(300)) * s
					if r.IntN(3) == 0 {
						wall = time.Duration(1+r.IntN(20)) * s // shorter than many stops take
					}
					w.Send(at, c, job(fmt.Sprintf("j%d", i), 1+r.IntN(capacity), wall, time.Duration(1+r.IntN(400))*s))
				}
				w.Run(0)
				noViolations(t, w)
				endedOnce(t, w, n, msg.EventEnd)
				if len(f.overlap) > 0 {
					t.Errorf("nodes given two processes: %v", f.overlap)
				}
				// The jobs' records (start to end) never hold more
				// processors than the cluster has.
				neverOver(t, w, capacity, msg.EventStart, msg.EventEnd)
			})
		}
	}
}
