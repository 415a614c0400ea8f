package realloc_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
	"github.com/koala-emu/koala-emu/actors/realloc"
	"github.com/koala-emu/koala-emu/actors/virtualtest"
)

// grid is a platform of batch clusters, their servers and the agent.
type grid struct {
	w        *virtualtest.World
	clusters []*actor.PID
	agent    *actor.PID
}

func newGrid(t *testing.T, mode, heuristic string, cl ...realloc.Cluster) *grid {
	t.Helper()
	w := virtualtest.New(t)
	pol, _ := policy.New("cbf")
	g := &grid{w: w}
	var servers []*actor.PID
	for _, c := range cl {
		g.clusters = append(g.clusters, w.Spawn(batch.Props(batch.Config{Name: c.Name, Capacity: c.Capacity, Policy: pol,
			Env: w.Env}), "batch-"+c.Name))
		servers = append(servers, w.Spawn(realloc.ServerProps(realloc.ServerConfig{Cluster: c, Policy: pol,
			Batch: g.clusters[len(g.clusters)-1], Env: w.Env}), "server-"+c.Name))
	}
	props, err := realloc.AgentProps(realloc.AgentConfig{Clusters: cl, Servers: servers, Policy: pol, Mode: mode,
		Heuristic: heuristic, Env: w.Env})
	if err != nil {
		t.Fatal(err)
	}
	g.agent = w.Spawn(props, "agent")
	return g
}

func (g *grid) local(at time.Duration, c int, id string, procs int, wall, run time.Duration) {
	g.w.Send(at, g.clusters[c], &msg.BatchSubmit{Job: &msg.BatchJob{Id: id, Procs: int32(procs), WalltimeNs: int64(wall),
		RuntimeNs: int64(run), SubmitNs: int64(at), Local: true}})
}

func (g *grid) submit(at time.Duration, id string, procs int, wall, run time.Duration, typ string) {
	g.w.Send(at, g.agent, &msg.AgentSubmit{Job: &msg.GridJob{Id: id, TraceProcs: int32(procs), TraceWalltimeNs: int64(wall),
		TraceRuntimeNs: int64(run), SubmitNs: int64(at), JobType: typ}})
}

func (g *grid) event(kind, id string) *msg.Event {
	for _, ev := range g.w.Events(kind) {
		if ev.JobId == id {
			return ev
		}
	}
	return nil
}

func noViolations(t *testing.T, w *virtualtest.World) {
	t.Helper()
	for _, ev := range w.Events(msg.EventInvariantViolation) {
		t.Errorf("violation at %vs: %v", ev.TS, ev.Fields)
	}
}

var two = []realloc.Cluster{{Name: "a", Capacity: 4, Speed: 1}, {Name: "b", Capacity: 4, Speed: 1}}

func TestAgentMapsByMinimumCompletion(t *testing.T) {
	g := newGrid(t, "none", "", two...)
	g.local(0, 0, "busy", 4, 10*time.Hour, 10*time.Hour)
	g.submit(time.Minute, "g", 1, time.Hour, 30*time.Minute, "t1")
	g.w.Run(0)
	noViolations(t, g.w)
	m := g.event(msg.EventAgentMap, "g")
	if m == nil || m.Fields["cluster"] != "b" {
		t.Fatalf("g mapped %v, want to b (a is busy for 10 h)", m)
	}
	if st := g.event(msg.EventBatchStart, "g"); st == nil || st.TS != 60 || st.Source != "b" {
		t.Fatalf("g started %v, want on b at 60 s", st)
	}
}

// The agent puts g on b (free after 5 h rather than 10 h on a); a's local
// job ends after 30 min, so the reallocation at 1 h moves g to a, where it
// starts at once. Without reallocation g waits on b until 5 h.
func TestReallocationMovesAJob(t *testing.T) {
	for _, c := range []struct {
		mode, heuristic string
		start           time.Duration
		cluster         string
	}{
		{"none", "", 5 * time.Hour, "b"},
		{"regular", "mct", time.Hour, "a"},
		{"regular", "minmin", time.Hour, "a"},
		{"all-cancellation", "mct", time.Hour, "a"},
		{"all-cancellation", "minmin", time.Hour, "a"},
	} {
		t.Run(c.mode+"/"+c.heuristic, func(t *testing.T) {
			g := newGrid(t, c.mode, c.heuristic, two...)
			g.local(0, 0, "la", 4, 10*time.Hour, 30*time.Minute)
			g.local(0, 1, "lb", 4, 5*time.Hour, 5*time.Hour)
			g.submit(time.Minute, "g", 1, time.Hour, 30*time.Minute, "t1")
			g.w.Run(12 * time.Hour)
			noViolations(t, g.w)
			st := g.event(msg.EventBatchStart, "g")
			if st == nil || time.Duration(st.TS)*time.Second != c.start || st.Source != c.cluster {
				t.Fatalf("g started %v, want on %s at %v", st, c.cluster, c.start)
			}
			moves := g.w.Events(msg.EventReallocMove)
			if want := map[bool]int{true: 0, false: 1}[c.mode == "none"]; len(moves) != want {
				t.Fatalf("%d moves, want %d", len(moves), want)
			}
			if len(moves) == 1 && (moves[0].Fields["from"] != "b" || moves[0].Fields["to"] != "a") {
				t.Errorf("move %v, want b -> a", moves[0].Fields)
			}
			if e := g.event(msg.EventBatchEnd, "g"); e == nil {
				t.Error("g never ended")
			}
		})
	}
}

// The regular algorithm moves a job for an improvement of 60 s or more
// only: g waits on a until 3 h; b's queue leaves it a start 30 s (no move)
// or 90 s (move) earlier.
func TestRegularThreshold(t *testing.T) {
	for _, c := range []struct {
		gain  time.Duration
		moves int
	}{{30 * time.Second, 0}, {59 * time.Second, 0}, {60 * time.Second, 1}, {90 * time.Second, 1}} {
		t.Run(c.gain.String(), func(t *testing.T) {
			g := newGrid(t, "regular", "mct", two...)
			g.local(0, 0, "la", 4, 3*time.Hour, 3*time.Hour) // a frees at 3 h
			g.local(0, 1, "lb", 4, 4*time.Hour, time.Minute) // b would free at 4 h; ends at 1 min
			g.submit(0, "g", 1, time.Hour, time.Hour, "t1")  // mapped to a: 4 h against 5 h
			free := 3*time.Hour - c.gain                     // b frees then once lb2 runs
			g.local(2*time.Minute, 1, "lb2", 4, free-2*time.Minute, free-2*time.Minute)
			g.w.Run(6 * time.Hour)
			noViolations(t, g.w)
			if m := g.event(msg.EventAgentMap, "g"); m == nil || m.Fields["cluster"] != "a" {
				t.Fatalf("g mapped %v, want to a", m)
			}
			if n := len(g.w.Events(msg.EventReallocMove)); n != c.moves {
				t.Fatalf("%d moves, want %d", n, c.moves)
			}
			if r := g.w.Events(msg.EventReallocRound); len(r) < 3 {
				t.Fatalf("%d rounds in 6 h, want one every hour", len(r))
			}
		})
	}
}

// Books on a busier workload: every job submitted to the agent is mapped
// once and ends once, whatever the reallocations, and no cluster is ever
// over capacity.
func TestEveryJobEndsOnce(t *testing.T) {
	for _, mode := range []string{"none", "regular", "all-cancellation"} {
		for _, h := range []string{"mct", "minmin"} {
			t.Run(mode+"/"+h, func(t *testing.T) {
				g := newGrid(t, mode, h, realloc.Cluster{Name: "a", Capacity: 16, Speed: 1},
					realloc.Cluster{Name: "b", Capacity: 8, Speed: 1.2}, realloc.Cluster{Name: "c", Capacity: 4, Speed: 1.4})
				n := 80
				for i := range n {
					at := time.Duration(i*97%7200) * time.Second
					procs := 1 + i*7%12
					wall := time.Duration(600+i*331%7200) * time.Second
					run := time.Duration(60+i*173%9000) * time.Second
					g.submit(at, fmt.Sprintf("g%d", i), procs, wall, run, []string{"t1", "t2", "t3", "t4"}[i%4])
					if i%3 == 0 {
						g.local(at, i%3, fmt.Sprintf("l%d", i), 1+i%4, wall, run)
					}
				}
				g.w.Run(100 * time.Hour)
				noViolations(t, g.w)
				ended := map[string]int{}
				for _, ev := range g.w.Events(msg.EventBatchEnd, msg.EventBatchKill) {
					ended[ev.JobId]++
				}
				if got := len(g.w.Events(msg.EventAgentMap)); got != n {
					t.Errorf("%d jobs mapped, want %d", got, n)
				}
				for i := range n {
					if id := fmt.Sprintf("g%d", i); ended[id] != 1 {
						t.Errorf("job %s ended %d times", id, ended[id])
					}
				}
				capacity := map[string]int{"a": 16, "b": 8, "c": 4}
				busy := map[string]int{}
				for _, ev := range g.w.Events(msg.EventBatchStart, msg.EventBatchEnd, msg.EventBatchKill) {
					if ev.Kind == msg.EventBatchStart {
						busy[ev.Source] += int(ev.Values["procs"])
					} else {
						busy[ev.Source] -= int(ev.Values["procs"])
					}
					if busy[ev.Source] > capacity[ev.Source] {
						t.Fatalf("at %vs: %d processors busy on %s of %d", ev.TS, busy[ev.Source], ev.Source, capacity[ev.Source])
					}
				}
				if mode != "none" && len(g.w.Events(msg.EventReallocRound)) == 0 {
					t.Error("no reallocation round")
				}
				t.Logf("%d moves", len(g.w.Events(msg.EventReallocMove)))
			})
		}
	}
}
