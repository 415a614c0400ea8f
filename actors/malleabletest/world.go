package malleabletest

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// Profile is the built-in profile of app, as the wiring hands it to a
// runner (the zero Profile for an application without one).
func Profile(app string) apps.Profile {
	p, _ := apps.LookupProfile(app)
	return p
}

// events collects every event of a run.
type Events struct {
	mu  sync.Mutex
	all []*msg.Event
}

func (e *Events) props() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok {
			e.mu.Lock()
			e.all = append(e.all, ev)
			e.mu.Unlock()
		}
	})
}

func (e *Events) Of(kind string) []*msg.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*msg.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (e *Events) JobOf(kind, job string) []*msg.Event {
	var out []*msg.Event
	for _, ev := range e.Of(kind) {
		if ev.JobId == job {
			out = append(out, ev)
		}
	}
	return out
}

// probe is an actor that forwards every protocol message to a channel, so a
// test can play one side of an exchange.
type Probe struct {
	PID *actor.PID
	Ch  chan interface{}
}

func NewProbe(t *testing.T, sys *actor.ActorSystem) *Probe {
	p := &Probe{Ch: make(chan interface{}, 1024)}
	p.PID = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case actor.SystemMessage, actor.AutoReceiveMessage:
			return
		}
		p.Ch <- ctx.Message()
	}))
	t.Cleanup(func() { sys.Root.Stop(p.PID) })
	return p
}

// expect waits for the next message of type T, skipping others.
func Expect[T any](t *testing.T, p *Probe, what string) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-p.Ch:
			if x, ok := m.(T); ok {
				return x
			}
		case <-deadline:
			var zero T
			t.Fatalf("timed out waiting for %s (%T)", what, zero)
			return zero
		}
	}
}

// --- fake application -----------------------------------------------------

type fakeMember struct {
	node     string
	nodePID  *actor.PID
	rank     int32
	pending  *msg.ResizeRanks
	waited   int32 // safe points reached while pending
	joiner   bool
	departed bool
}

type fakeApp struct {
	mu       sync.Mutex
	job      string
	runner   *actor.PID
	work     int
	size     int // ranks expected at the start
	members  map[string]*fakeMember
	started  bool
	done     bool
	iters    int
	lag      int // extra safe points to wait before applying a resize (for violation tests)
	lagged   int
	resizeS  float64
	rejoined int
}

// step is one safe point of the whole job: a resize every rank has its
// request for is applied (after the lag, if any), then every running rank
// computes one iteration.
func (a *fakeApp) step(root *actor.RootContext) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started || a.done {
		return
	}
	a.iters++
	running, joiners := a.split()
	for _, m := range running {
		if m.pending != nil {
			m.waited++
		}
	}
	if a.resizeReady(running, joiners) {
		if a.lagged < a.lag {
			a.lagged++
		} else {
			a.lagged = 0
			a.applyResize(root, running, joiners)
		}
	}
	a.compute(root)
}

// split returns the running ranks, sorted by rank, and the joining ones.
func (a *fakeApp) split() (running, joiners []*fakeMember) {
	for _, m := range a.members {
		if m.joiner {
			joiners = append(joiners, m)
		} else {
			running = append(running, m)
		}
	}
	sort.Slice(running, func(i, j int) bool { return running[i].rank < running[j].rank })
	return running, joiners
}

// resizeReady says whether every running rank has the same resize request
// and every joiner of its new table has it too.
func (a *fakeApp) resizeReady(running, joiners []*fakeMember) bool {
	if len(running) == 0 || running[0].pending == nil {
		return false
	}
	req := running[0].pending
	for _, m := range running {
		if m.pending == nil || m.pending.ResizeId != req.ResizeId {
			return false
		}
	}
	joined := 0
	for _, m := range joiners {
		if m.pending != nil && m.pending.ResizeId == req.ResizeId {
			joined++
		}
	}
	return joined == len(req.Peers)-(len(running)-countDeparting(running))
}

// applyResize applies the pending request of every rank: a departing rank
// is released and frees its node, a staying one takes its new rank, a
// joiner becomes a running rank.
func (a *fakeApp) applyResize(root *actor.RootContext, running, joiners []*fakeMember) {
	for _, m := range running {
		p := m.pending
		m.pending = nil
		if p.Self < 0 {
			a.depart(root, m, p)
		} else {
			root.Send(a.runner, &msg.RankResized{JobId: a.job, ResizeId: p.ResizeId, Rank: m.rank, NewRank: p.Self, Node: m.node,
				ResizeS: a.resizeS, SafePoints: m.waited})
			m.rank = p.Self
		}
		m.waited = 0
	}
	for _, m := range joiners {
		p := m.pending
		m.pending, m.joiner = nil, false
		a.rejoined++
		root.Send(a.runner, &msg.RankResized{JobId: a.job, ResizeId: p.ResizeId, Rank: m.rank, NewRank: p.Self, Node: m.node,
			ResizeS: a.resizeS})
		m.rank = p.Self
	}
}

// depart releases a rank the resize leaves out: it reports the resize and
// its end, and frees its node.
func (a *fakeApp) depart(root *actor.RootContext, m *fakeMember, p *msg.ResizeRanks) {
	root.Send(a.runner, &msg.RankResized{JobId: a.job, ResizeId: p.ResizeId, Rank: m.rank, NewRank: -1, Node: m.node,
		ResizeS: a.resizeS, Released: true, SafePoints: m.waited})
	delete(a.members, m.node)
	root.Send(m.nodePID, &fakeFree{})
	root.Send(a.runner, &msg.RankDone{JobId: a.job, Rank: m.rank, Node: m.node, Ok: true, Iterations: int32(a.iters)})
}

// compute takes one unit of work per running rank; when none is left the
// job is done and every running rank frees its node and reports its end.
func (a *fakeApp) compute(root *actor.RootContext) {
	n := 0
	for _, m := range a.members {
		if !m.joiner {
			n++
		}
	}
	a.work -= n
	if a.work > 0 {
		return
	}
	a.done = true
	for _, m := range a.members {
		if m.joiner {
			// A rank that was joining holds its node until the runner
			// aborts it, and then reports RankDone (as a real node does).
			continue
		}
		root.Send(m.nodePID, &fakeFree{})
		root.Send(a.runner, &msg.RankDone{JobId: a.job, Rank: m.rank, Node: m.node, Ok: true, Iterations: int32(a.iters),
			Value: float64(a.iters), BytesSent: 1000})
	}
}

func countDeparting(ms []*fakeMember) int {
	n := 0
	for _, m := range ms {
		if m.pending != nil && m.pending.Self < 0 {
			n++
		}
	}
	return n
}

// World is a test harness: an actor system, a scaled clock, cluster managers
// with fake nodes, and the fake applications ticking.
type World struct {
	T        *testing.T // the test the world belongs to
	Sys      *actor.ActorSystem
	Env      actors.Env
	Events   *Events
	Stats    *invariant.Stats
	Clusters map[string]*actor.PID // cluster managers by name
	Order    []string
	Sizes    map[string]int // nodes per cluster
	Lag      int            // extra safe points new applications wait before applying a resize
	ResizeS  float64        // resize time the fake ranks report
	// HoldAborts makes a node whose rank is running (or joining) keep it
	// after AbortRank until LetGo: a real node's rank ends on its own
	// goroutine, some time after the abort.
	HoldAborts bool

	mu   sync.Mutex
	apps map[string]*fakeApp
	stop chan struct{}
	held []*actor.PID
}

// SetLag sets Lag for the applications to come and those running: a
// large lag keeps their ranks from ever reaching a resize's switch.
func (w *World) SetLag(lag int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Lag = lag
	for _, a := range w.apps {
		a.mu.Lock()
		a.lag = lag
		a.mu.Unlock()
	}
}

// LetGo ends the ranks held after their abort: each node reports RankDone
// and is free again. It returns how many there were.
func (w *World) LetGo() int {
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	for _, pid := range held {
		w.Sys.Root.Send(pid, &fakeLetGo{})
	}
	return len(held)
}

// HeldCount is the number of nodes holding an aborted rank.
func (w *World) HeldCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// NewWorld builds the harness for clusters named in order with the given
// node counts. The cluster managers' PIDs are known at once (fixed names);
// start spawns them, reporting to kis.
func NewWorld(t *testing.T, factor float64, sizes map[string]int, order ...string) *World {
	w := &World{T: t, Sys: actor.NewActorSystem(actor.WithLoggerFactory(quiet)), Events: &Events{}, Stats: invariant.NewStats(),
		Clusters: map[string]*actor.PID{}, Sizes: sizes, Order: order, apps: map[string]*fakeApp{},
		stop: make(chan struct{}), ResizeS: 0.5}
	rec := w.Sys.Root.Spawn(w.Events.props())
	w.Env = actors.Env{System: w.Sys, Clock: clock.NewScaled(factor), Recorder: rec}
	for _, c := range order {
		w.Clusters[c] = w.Sys.NewLocalPID("cluster-" + c)
	}
	t.Cleanup(func() {
		close(w.stop)
		w.Sys.Shutdown()
	})
	return w
}

func quiet(*actor.ActorSystem) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start spawns the fake nodes and the cluster managers and starts the
// applications' ticker.
func (w *World) Start(kis *actor.PID) {
	for _, c := range w.Order {
		var infos []cluster.NodeInfo
		for i := 0; i < w.Sizes[c]; i++ {
			name := fmt.Sprintf("%s-n%03d", c, i+1)
			pid := w.Sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &fakeNode{w: w, name: name} }))
			infos = append(infos, cluster.NodeInfo{Name: name, PID: pid})
		}
		if _, err := w.Sys.Root.SpawnNamed(cluster.Props(cluster.Config{Name: c, Nodes: infos, KIS: kis, Env: w.Env}), "cluster-"+c); err != nil {
			w.T.Fatal(err)
		}
	}
	go w.tick()
}

// Finish makes a job's application end at its next safe point.
func (w *World) Finish(job string) {
	w.mu.Lock()
	a := w.apps[job]
	w.mu.Unlock()
	if a == nil {
		w.T.Fatalf("no application for job %s", job)
	}
	a.mu.Lock()
	a.work = 0
	a.mu.Unlock()
}

// Members is the number of ranks of job's application (joining ones
// included), 0 before its ranks connect.
func (w *World) Members(job string) int {
	a := w.lookup(job)
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.members)
}

// Joiners is the number of job's new ranks that hold their ResizeRanks and
// wait for the next safe point to join.
func (w *World) Joiners(job string) int {
	a := w.lookup(job)
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.members {
		if m.joiner && m.pending != nil {
			n++
		}
	}
	return n
}

// JoinerNode returns the node of one of job's new ranks holding its
// ResizeRanks, and that rank ("" if none).
func (w *World) JoinerNode(job string) (string, int32) {
	a := w.lookup(job)
	if a == nil {
		return "", 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.members {
		if m.joiner && m.pending != nil {
			return m.node, m.rank
		}
	}
	return "", 0
}

// NodeOf returns the node running rank of job's application ("" if none).
func (w *World) NodeOf(job string, rank int32) string {
	a := w.lookup(job)
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.members {
		if m.rank == rank && !m.joiner {
			return m.node
		}
	}
	return ""
}

func (w *World) lookup(job string) *fakeApp {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.apps[job]
}

func (w *World) tick() {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			apps := make([]*fakeApp, 0, len(w.apps))
			for _, a := range w.apps {
				apps = append(apps, a)
			}
			w.mu.Unlock()
			for _, a := range apps {
				a.step(w.Sys.Root)
			}
		}
	}
}

func (w *World) app(job string, runner *actor.PID, size int, args map[string]float64) *fakeApp {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.apps[job]
	if a == nil {
		work := 40
		if v, ok := args["work"]; ok {
			work = int(v)
		}
		a = &fakeApp{job: job, runner: runner, work: work, size: size, members: map[string]*fakeMember{}, lag: w.Lag, resizeS: w.ResizeS}
		w.apps[job] = a
	}
	return a
}

// --- fake node ---------------------------------------------------------------

type fakeFree struct{}

type fakeLetGo struct{}

type fakeNode struct {
	w      *World
	name   string
	job    string
	rank   int32
	size   int
	runner *actor.PID
	args   map[string]float64
	state  int // 0 idle, 1 listening, 2 in the application
	// aborting: an abort is held (see World.holdAborts); the node stays busy
	aborting bool
}

func (n *fakeNode) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.StartRank:
		reply := &msg.RankReady{JobId: x.JobId, Rank: x.Rank, Node: n.name}
		if n.state != 0 {
			reply.Error = fmt.Sprintf("node %s is busy with job %s", n.name, n.job)
		} else {
			n.job, n.rank, n.size, n.runner, n.args, n.state = x.JobId, x.Rank, int(x.Size), x.Runner.PID(), x.Args, 1
			reply.Addr = "fake://" + n.name
		}
		ctx.Send(x.Runner.PID(), reply)
	case *msg.RankTable:
		if n.state != 1 || x.JobId != n.job {
			return
		}
		n.state = 2
		a := n.w.app(n.job, n.runner, n.size, n.args)
		a.mu.Lock()
		a.members[n.name] = &fakeMember{node: n.name, nodePID: ctx.Self(), rank: n.rank}
		if len(a.members) == a.size {
			a.started = true
		}
		a.mu.Unlock()
		ctx.Send(n.runner, &msg.RankConnected{JobId: n.job, Rank: n.rank})
	case *msg.ResizeRanks:
		if n.state == 0 || x.JobId != n.job {
			return
		}
		a := n.w.app(n.job, n.runner, n.size, n.args)
		a.mu.Lock()
		m := a.members[n.name]
		if m == nil && n.state == 1 { // a new rank joins
			n.state = 2
			m = &fakeMember{node: n.name, nodePID: ctx.Self(), rank: n.rank, joiner: true}
			a.members[n.name] = m
		}
		if m != nil {
			m.pending = x
		}
		a.mu.Unlock()
	case *msg.AbortRank:
		if n.state == 0 || x.JobId != n.job || n.aborting {
			return
		}
		wasRunning := n.state == 2
		n.w.mu.Lock()
		hold := n.w.HoldAborts && wasRunning
		if hold {
			n.w.held = append(n.w.held, ctx.Self())
		}
		n.w.mu.Unlock()
		if hold {
			n.aborting = true
			return
		}
		a := n.w.app(n.job, n.runner, n.size, n.args)
		a.mu.Lock()
		delete(a.members, n.name)
		a.mu.Unlock()
		if wasRunning || n.state == 1 {
			ctx.Send(n.runner, &msg.RankDone{JobId: n.job, Rank: n.rank, Node: n.name, Error: "aborted: " + x.Reason})
		}
		n.state, n.job = 0, ""
	case *fakeLetGo:
		if !n.aborting {
			return
		}
		a := n.w.app(n.job, n.runner, n.size, n.args)
		a.mu.Lock()
		delete(a.members, n.name)
		a.mu.Unlock()
		ctx.Send(n.runner, &msg.RankDone{JobId: n.job, Rank: n.rank, Node: n.name, Error: "aborted"})
		n.state, n.job, n.aborting = 0, "", false
	case *fakeFree:
		n.state, n.job, n.aborting = 0, "", false
	}
}
