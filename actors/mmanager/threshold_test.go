package mmanager

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/invariant"
	mt "github.com/koala-emu/koala-emu/actors/malleabletest"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

// The tests below play the runners through probes and choose the order in
// which the manager hears of each operation's outcome: the interleavings
// under which a compressed time scale on a busy host once let KOALA hold
// more processors than its threshold allows ("threshold: cluster multimedian:
// KOALA may hold 84 processors, cap 82"). No test depends on how fast the
// host is: each waits for messages and events, never for a time.

// newCapHarness is a manager harness with an operation timeout of opTimeout
// scenario time, on one cluster "a" of 10 processors of which KOALA may hold
// 8 (threshold 0.8).
func newCapHarness(t *testing.T, approach string, opTimeout time.Duration) *managerHarness {
	w := mt.NewWorld(t, 1000, map[string]int{"a": 10}, "a")
	h := &managerHarness{World: w}
	props, err := Props(Config{Approach: approach, Policy: "fpsma", Threshold: 0.8,
		PollPeriod: 30 * time.Second, OpTimeout: opTimeout, Clusters: w.Clusters, Order: w.Order, Stats: w.Stats, Env: w.Env})
	if err != nil {
		t.Fatal(err)
	}
	if h.mm, err = w.Sys.Root.SpawnNamed(props, "mm"); err != nil {
		t.Fatal(err)
	}
	w.Start(h.mm)
	return h
}

// fillToCap starts a malleable n-body job j1 of 2 and grows it to the cap
// (8): the cluster is then full as far as KOALA may hold.
func fillToCap(t *testing.T, h *managerHarness) *fakeRunner {
	t.Helper()
	j1 := h.submit("j1", "nbody", 2, 2, 46)
	j1.placed()
	j1.running(2)
	g := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1")
	if g.Processors != 6 {
		t.Fatalf("grow of %d, want 6 (to the cap of 8)", g.Processors)
	}
	j1.growTo(g, 6, 2)
	return j1
}

// endJob plays a runner's end: it frees the job's processors, then says so.
func endJob(h *managerHarness, job string) {
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: job})
	h.Sys.Root.Send(h.mm, &msg.JobFinished{JobId: job, Ok: true})
}

func checkInvariants(t *testing.T, h *managerHarness) {
	t.Helper()
	inv := h.Stats.Snapshot()
	if !inv.OK() {
		t.Fatalf("invariants violated: %+v", inv)
	}
	if inv.Checks[invariant.Threshold] == 0 {
		t.Fatalf("the threshold was never checked: %+v", inv)
	}
}

// A mandatory shrink that frees nothing (the job is ending and declines it)
// must not let the start that waited for it go ahead: the start waits for
// processors that are really free.
func TestPWAStartWaitsWhenShrinkIsDeclined(t *testing.T) {
	h := newCapHarness(t, "pwa", 0)
	j1 := fillToCap(t, h)
	j2 := h.submit("j2", "nbody", 2, 0, 0)
	s := mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1")
	if s.Processors != 2 || !s.Mandatory {
		t.Fatalf("shrink %+v", s)
	}
	h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s.RequestId, Accepted: 0, Reason: "the application is ending"})
	// Two idle processors remain in the cluster (outside KOALA's share):
	// claiming them now would hold 10 of a cap of 8.
	j2.quiet(2)
	waittest.Until(t, wait, "the deferred start", func() bool { return len(h.Events.JobOf("start_deferred", "j2")) > 0 })
	endJob(h, "j1")
	if p := j2.placed(); len(p.Allocations[0].Nodes) != 2 {
		t.Fatalf("placement %+v", p)
	}
	checkInvariants(t, h)
}

// A shrink that releases less than the start needs (here 1 of 2: partial
// acceptance) leaves the start waiting; the manager fights again.
func TestPWAStartWaitsForWhatTheShrinkReleased(t *testing.T) {
	h := newCapHarness(t, "pwa", 0)
	j1 := fillToCap(t, h)
	j2 := h.submit("j2", "nbody", 2, 0, 0)
	s := mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1")
	h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s.RequestId, Accepted: 1})
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j1", Nodes: []string{"a-n008"}})
	h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: "j1", RequestId: s.RequestId, NewSize: 7, OldSize: 8, Ok: true})
	// 7 + 2 > 8: not yet. The next round asks j1 for the missing processor.
	s2 := mt.Expect[*msg.ShrinkRequest](t, j1.p, "second shrink of j1")
	if s2.Processors != 1 {
		t.Fatalf("second shrink %+v, want 1", s2)
	}
	select {
	case m := <-j2.p.Ch:
		t.Fatalf("j2 got %T before the second shrink was done", m)
	default:
	}
	h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s2.RequestId, Accepted: 1})
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j1", Nodes: []string{"a-n007"}})
	h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: "j1", RequestId: s2.RequestId, NewSize: 6, OldSize: 7, Ok: true})
	j2.placed()
	checkInvariants(t, h)
}

// A shrink the runner never acknowledges in time is not taken as done: the
// start that waited for it stays queued, and a late acknowledgement with
// the released processors lets it start.
func TestPWAStartWaitsWhenShrinkTimesOut(t *testing.T) {
	h := newCapHarness(t, "pwa", 45*time.Second)
	j1 := fillToCap(t, h)
	j2 := h.submit("j2", "nbody", 2, 0, 0)
	s := mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1")
	waittest.Until(t, wait, "the shrink to time out", func() bool { return len(h.Events.JobOf("resize_timeout", "j1")) > 0 })
	// The manager fights again with a new request; j2 is not placed.
	s2 := mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1 after the timeout")
	select {
	case m := <-j2.p.Ch:
		t.Fatalf("j2 got %T while j1 still held the cap", m)
	default:
	}
	// The runner carries out the first shrink late, then declines the second
	// (already done).
	h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: "j1", Nodes: []string{"a-n007", "a-n008"}})
	h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: "j1", RequestId: s.RequestId, NewSize: 6, OldSize: 8, Ok: true})
	h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s2.RequestId, Accepted: 0})
	j2.placed()
	checkInvariants(t, h)
}

// A grow the runner does not acknowledge in time may still happen: the
// manager books it as done, grants its processors to nobody else, and takes
// the runner's late acknowledgement.
func TestGrowTimeoutBooksTheWorstCase(t *testing.T) {
	for _, approach := range []string{"pra", "pwa"} {
		t.Run(approach, func(t *testing.T) {
			h := newCapHarness(t, approach, 45*time.Second)
			j1 := h.submit("j1", "nbody", 2, 2, 46)
			j1.placed()
			j1.running(2)
			g := mt.Expect[*msg.GrowRequest](t, j1.p, "grow of j1")
			if g.Processors != 6 {
				t.Fatalf("grow %+v", g)
			}
			waittest.Until(t, wait, "the grow to time out", func() bool { return len(h.Events.JobOf("resize_timeout", "j1")) > 0 })
			// No second grow of the same processors, and no start in them:
			// PRA waits, PWA fights for j2 with a shrink of what it books.
			j2 := h.submit("j2", "nbody", 2, 0, 0)
			var s *msg.ShrinkRequest
			if approach == "pra" {
				j1.quiet(3)
			} else {
				s = mt.Expect[*msg.ShrinkRequest](t, j1.p, "shrink of j1 booked at 8")
				if s.Processors != 2 {
					t.Fatalf("shrink %+v", s)
				}
			}
			select {
			case m := <-j2.p.Ch:
				if _, ok := m.(*msg.JobPlaced); ok {
					t.Fatal("j2 placed in processors j1's grow may still take")
				}
			default:
			}
			// The grow happens late.
			h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: g.RequestId, Accepted: 6})
			h.Sys.Root.Send(h.Clusters["a"], &msg.Claim{JobId: "j1", Nodes: 6, ClaimId: 1, ReplyTo: msg.FromPID(j1.p.PID)})
			if c := mt.Expect[*msg.ClaimReply](t, j1.p, "late grow claim"); !c.Ok {
				t.Fatalf("late grow claim failed: %s", c.Reason)
			}
			h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: "j1", RequestId: g.RequestId, NewSize: 8, OldSize: 2, Ok: true})
			if s != nil { // the application is ending: it declines the shrink
				h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: "j1", RequestId: s.RequestId, Accepted: 0})
			}
			endJob(h, "j1")
			j2.placed()
			checkInvariants(t, h)
		})
	}
}

// TestThresholdUnderRandomOutcomes plays many seeded runs of one cluster
// where every operation's outcome (accepted in full, in part, declined,
// acknowledged late after a timeout, or never) and the order of the runners'
// messages are drawn from the seed. KOALA's holding must never exceed the
// cap in any of them.
func TestThresholdUnderRandomOutcomes(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			playRandomOutcomes(t, seed)
		})
	}
}

// randomJob is one job as the random runners play it.
type randomJob struct {
	id        string
	malleable bool
	nodes     []string // processors held, as the cluster granted them
	placed    bool
	ended     bool
	life      int   // steps left before it ends
	queue     []any // requests waiting to be carried out, in order
}

// growClaim is a grow's claim at the cluster.
type growClaim struct {
	job string
	req int64
	old int
}

// playRandomOutcomes runs one seeded game; see
// TestThresholdUnderRandomOutcomes. The runners behave as MRunners do in
// one respect that matters: they carry out requests one at a time, in
// order, so an acknowledgement always gives the size after every earlier
// request.
func playRandomOutcomes(t *testing.T, seed int64) {
	const (
		jobs    = 14
		capA    = 8
		horizon = 40 * time.Second // wall time for the whole game
	)
	h := newCapHarness(t, "pwa", 45*time.Second)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	p := mt.NewProbe(t, h.Sys)
	all := map[string]*randomJob{}
	var order []string
	submitted := 0
	submit := func() {
		submitted++
		id := fmt.Sprintf("r%02d", submitted)
		j := &randomJob{id: id, malleable: rng.IntN(4) != 0, life: 3 + rng.IntN(8)}
		all[id], order = j, append(order, id)
		spec := &msg.JobSpec{Id: id, App: "nbody", Size: 2, Request: "non-fixed"}
		if j.malleable {
			h.Sys.Root.Send(h.mm, &msg.SubmitMalleable{Job: spec, Runner: msg.FromPID(p.PID), Min: 2, Max: 46, Profile: "nbody", PowerOfTwo: mt.Profile("nbody").PowerOfTwo})
		} else {
			h.Sys.Root.Send(h.mm, &msg.SubmitJob{Job: spec, Runner: msg.FromPID(p.PID)})
		}
	}
	held := func() int {
		n := 0
		for _, j := range all {
			n += len(j.nodes)
		}
		return n
	}
	claims := map[int64]growClaim{}
	nextClaim := int64(1000)
	busy := map[string]bool{} // a grow's claim is out: the job does nothing else
	// carry out a request: accepted k (0: declined).
	carry := func(j *randomJob, m any, k int) {
		switch x := m.(type) {
		case *msg.GrowRequest:
			h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: j.id, RequestId: x.RequestId, Accepted: int32(k)})
			if k == 0 {
				return
			}
			nextClaim++
			claims[nextClaim] = growClaim{job: j.id, req: x.RequestId, old: len(j.nodes)}
			busy[j.id] = true
			h.Sys.Root.Send(h.Clusters["a"], &msg.Claim{JobId: j.id, Nodes: int32(k), ClaimId: nextClaim, ReplyTo: msg.FromPID(p.PID)})
		case *msg.ShrinkRequest:
			k = min(k, len(j.nodes)-2)
			h.Sys.Root.Send(h.mm, &msg.ResizeReply{JobId: j.id, RequestId: x.RequestId, Accepted: int32(max(k, 0))})
			if k <= 0 {
				return
			}
			old := len(j.nodes)
			gone := j.nodes[old-k:]
			j.nodes = j.nodes[:old-k]
			h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: j.id, Nodes: gone})
			h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: j.id, RequestId: x.RequestId, NewSize: int32(len(j.nodes)), OldSize: int32(old), Ok: true})
		}
	}
	asked := func(m any) int {
		switch x := m.(type) {
		case *msg.GrowRequest:
			return int(x.Processors)
		case *msg.ShrinkRequest:
			return int(x.Processors)
		}
		return 0
	}
	// outcome answers a request now (in full, in part or declined), later
	// (after some steps, maybe past the manager's timeout), or never.
	outcome := func(j *randomJob, m any) {
		if len(j.queue) > 0 || busy[j.id] {
			j.queue = append(j.queue, m)
			return
		}
		switch rng.IntN(5) {
		case 0:
			carry(j, m, max(1, asked(m)/2))
		case 1:
			carry(j, m, 0)
		case 2:
			j.queue = append(j.queue, m)
		case 3: // lost
		default:
			carry(j, m, asked(m))
		}
	}
	end := func(j *randomJob) {
		j.ended = true
		j.queue = nil
		h.Sys.Root.Send(h.Clusters["a"], &msg.ReleaseNodes{JobId: j.id})
		j.nodes = nil
		h.Sys.Root.Send(h.mm, &msg.JobFinished{JobId: j.id, Ok: true})
	}
	step := func() {
		if submitted < jobs && rng.IntN(3) == 0 {
			submit()
		}
		for _, id := range order {
			j := all[id]
			if !j.placed || j.ended {
				continue
			}
			if len(j.queue) > 0 && !busy[j.id] && rng.IntN(3) == 0 {
				m := j.queue[0]
				j.queue = j.queue[1:]
				carry(j, m, asked(m))
			}
			if j.life--; j.life <= 0 && !busy[j.id] {
				end(j)
			}
		}
	}
	deadline := time.Now().Add(horizon)
	for {
		done := submitted == jobs
		for _, j := range all {
			done = done && j.ended
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: the game did not end within %s (%d submitted)", seed, horizon, submitted)
		}
		select {
		case m := <-p.Ch:
			switch x := m.(type) {
			case *msg.JobPlaced:
				j := all[x.JobId]
				j.placed = true
				for _, n := range x.Allocations[0].Nodes {
					j.nodes = append(j.nodes, n.Name)
				}
				if j.malleable {
					h.Sys.Root.Send(h.mm, &msg.MalleableStatus{JobId: j.id, Cluster: "a", Size: int32(len(j.nodes)), Running: true, StartS: h.Env.Now()})
				}
			case *msg.JobRejected:
				all[x.JobId].ended = true
			case *msg.GrowRequest:
				if j := all[x.JobId]; !j.ended {
					outcome(j, x)
				}
			case *msg.ShrinkRequest:
				if j := all[x.JobId]; !j.ended {
					outcome(j, x)
				}
			case *msg.ClaimReply:
				c := claims[x.ClaimId]
				delete(claims, x.ClaimId)
				delete(busy, c.job)
				j := all[c.job]
				if x.Ok {
					j.nodes = append(j.nodes, msg.NodeNames(x.Nodes)...)
				}
				h.Sys.Root.Send(h.mm, &msg.ResizeAck{JobId: j.id, RequestId: c.req, NewSize: int32(len(j.nodes)), OldSize: int32(c.old), Ok: x.Ok})
			}
		case <-time.After(20 * time.Millisecond):
			step()
		}
		if n := held(); n > capA {
			t.Fatalf("seed %d: KOALA's jobs hold %d processors, cap %d", seed, n, capA)
		}
	}
	inv := h.Stats.Snapshot()
	if !inv.OK() {
		t.Fatalf("seed %d: invariants violated: %+v", seed, inv)
	}
	if inv.Checks[invariant.Threshold] == 0 {
		t.Fatalf("seed %d: the threshold was never checked", seed)
	}
}
