package malleable

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// RunnerConfig builds the MRunner of one malleable job.
type RunnerConfig struct {
	// Job is the job; Job.Size is its initial size in processors (one
	// processor is one single-processor node actor).
	Job *msg.JobSpec
	// Min and Max bound the job's size; they are intersected with the
	// profile's bounds.
	Min, Max int
	// Profile is the application's malleability profile (nodes/apps), handed
	// in by the wiring: the counts it accepts and its execution time by
	// count. The zero Profile accepts any count in [Min, Max].
	Profile apps.Profile
	// Manager is the malleability manager the job is submitted to.
	Manager *actor.PID
	// Clusters are the cluster managers, to claim and release processors.
	Clusters  map[string]*actor.PID
	TimeScale float64
	// StartupDelay emulates the local resource manager's start latency, in
	// scenario time.
	StartupDelay time.Duration
	// RankTimeout bounds, in wall time, how long the runner waits for ranks
	// to report ready (at the start and on every grow).
	RankTimeout time.Duration
	// Stats counts the invariant checks; nil counts nothing.
	Stats *Stats
	Env   actors.Env
}

// Initiators of a size change, in events.
const (
	ByScheduler = "scheduler" // a GrowRequest or ShrinkRequest
	ByApp       = "app"       // the application's AppRelease
	ByRunner    = "runner"    // the runner itself (FT keeping a power of two of a partial grow)
)

type mstate int

const (
	mStarting  mstate = iota // StartRank sent, no RankReady yet
	mReady                   // endpoint open, waiting for the table or a resize
	mRunning                 // part of the running application
	mDeparting               // told to leave at the next safe point
	mGone                    // done, aborted or released
)

type member struct {
	rank     int32
	node     string
	pid      *actor.PID
	addr     string
	state    mstate
	conn     bool
	released bool // reported RankResized released: its RankDone ends a departure
	done     *msg.RankDone
	// sent: StartRank went to the node; refused: the node answered it with
	// an error (it never held the rank) or went down; ended: the node
	// reported the end of a rank the runner had given up. See letGo.
	sent, refused, ended bool
}

// letGo reports whether the member's node holds nothing of the job any
// more, so that its processor may be given back: the rank was never
// started, the node refused it, the rank reported RankDone (the node sends
// it once the rank has ended, also after AbortRank), or the node is down.
// A rank that was aborted (or whose job ended) is not gone until then: its
// node may still be running it.
func (m *member) letGo() bool { return !m.sent || m.refused || m.ended || m.done != nil }

// request is one observed size-change request, queued until the runner is
// free to act on it.
type request struct {
	id        int64 // the manager's request id; 0 for the application's own
	grow      bool
	n         int
	mandatory bool
	initiator string
}

type opPhase int

const (
	phClaiming opPhase = iota
	phStarting
	phResizing
	// phAborting: the grow was given up; it ends once every new rank's
	// node has let go (see letGo).
	phAborting
)

// op is the size change being executed.
type op struct {
	req       request
	resizeID  int64
	phase     opPhase
	from      int
	accepted  int
	startedAt float64
	// grow
	claims  map[int64]bool
	claimed []*msg.NodeRef
	joiners []*member
	readyN  int
	cancel  func()
	// resize
	expect     map[*member]bool // ranks that must report RankResized (not released)
	resized    int
	departing  []*member
	departed   int
	resizeS    float64
	safeMin    int32
	safeMax    int32
	safeReport bool
	abortWhy   string // phAborting: why the grow was given up
}

type mrunner struct {
	cfg     RunnerConfig
	job     pm.Job // Size is the current size once running
	cluster string
	self    *actor.PID

	members []*member // every member ever, in creation order
	byNode  map[string]*member

	placed    bool
	started   bool
	finished  bool
	ending    bool // a rank of the application has ended: it resizes no more
	failure   string
	cancelArm func()
	startS    float64

	queue     []request
	cur       *op
	nextID    int64
	claimsOut int // claims not yet answered (the actor stops only without any)
	// pending are the processors to give back once their node has let go
	// (by node name); announced: JobFinished went out, which waits for
	// them so that the manager's books never miss a processor the job
	// still holds.
	pending   map[string]*member
	announced bool

	// time-weighted size
	lastT, area float64
	maxSize     int
	grows       int
	shrinks     int
	resizeTotal float64
	released    int // processors given back voluntarily
}

type launchRanks struct{}
type readyTimeout struct{}
type joinTimeout struct{ resizeID int64 }

// RunnerProps returns the props of a malleable job's runner.
//
// The runner submits the job (SubmitMalleable), starts its ranks once placed
// (like the rigid runner: StartRank, RankTable, all connected = "start") and
// reports MalleableStatus to the manager. It then acts on one request at a
// time: the reply (ResizeReply) goes out at once, the change is executed (grow:
// claims of one processor each, StartRank on the new processors, ResizeRanks
// to every rank; shrink: ResizeRanks to every rank, the highest ranks depart,
// their processors are freed after their RankDone), and ResizeAck follows
// once every rank has reported RankResized. Mandatory requests jump ahead of
// voluntary ones in the queue.
//
// Events (source "mrunner"): "submit", "start", "end" as the rigid runner
// (fields malleable=true, profile; "end" adds values avg_procs
// (time-weighted from start to end), max_procs, final_procs, grows, shrinks,
// resize_s (sum), released); "procs" (value size, field cluster) at every
// size change, 0 at the end; "grow" and "shrink" (values from, to, delta,
// requested, accepted, resize_s, op_s, safe_points, safe_points_max; fields
// cluster, mandatory, initiator); "resize_declined"; "grow_failed";
// "voluntary_release"; "invariant_violation".
func RunnerProps(cfg RunnerConfig) *actor.Props {
	if cfg.RankTimeout <= 0 {
		cfg.RankTimeout = 60 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &mrunner{cfg: cfg, job: policyJob(cfg), byNode: map[string]*member{}, pending: map[string]*member{}}
	})
}

// policyJob is the job as the malleability policies see it: the configured
// bounds intersected with the profile's, and whether only powers of two fit.
func policyJob(cfg RunnerConfig) pm.Job {
	j := pm.Job{ID: cfg.Job.Id, Size: int(cfg.Job.Size), Min: cfg.Min, Max: cfg.Max, PowerOfTwo: cfg.Profile.PowerOfTwo}
	if cfg.Profile.Name != "" {
		j.Min, j.Max = max(j.Min, cfg.Profile.Min), min(j.Max, cfg.Profile.Max)
	}
	return j
}

func (r *mrunner) env() actors.Env { return r.cfg.Env }

func (r *mrunner) emit(kind string, fields map[string]string, values map[string]float64) {
	ev := r.env().Event(kind, "mrunner", r.cfg.Job.Id)
	ev.Fields, ev.Values = fields, values
	r.env().Emit(ev)
}

func (r *mrunner) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		r.self = ctx.Self()
		r.emit("submit",
			map[string]string{"app": r.cfg.Job.App, "request": r.cfg.Job.Request, "malleable": "true", "profile": r.cfg.Profile.Name},
			map[string]float64{"size": float64(r.cfg.Job.Size), "min": float64(r.cfg.Min), "max": float64(r.cfg.Max)})
		ctx.Send(r.cfg.Manager, &msg.SubmitMalleable{Job: r.cfg.Job, Runner: msg.FromPID(ctx.Self()),
			Min: int32(r.job.Min), Max: int32(r.job.Max), Profile: r.cfg.Profile.Name, PowerOfTwo: r.job.PowerOfTwo})
	case *actor.Stopping:
		r.disarm()
		if r.cur != nil && r.cur.cancel != nil {
			r.cur.cancel()
		}
	case *msg.JobRejected:
		r.failure = fmt.Sprintf("placement failed after %d tries: %s", x.Tries, x.Reason)
		r.finish(ctx)
	case *msg.JobPlaced:
		r.onPlaced(ctx, x)
	case *launchRanks:
		r.launch(ctx)
	case *readyTimeout:
		if !r.started && !r.finished {
			r.fail(ctx, fmt.Sprintf("ranks not ready within %s", r.cfg.RankTimeout))
		}
	case *msg.RankReady:
		if r.settle(ctx, x.Node, x.Error != "", false) {
			return
		}
		r.onReady(ctx, x)
	case *msg.RankConnected:
		r.onConnected(ctx, x)
	case *msg.RankResized:
		r.onResized(ctx, x)
	case *msg.RankDone:
		if r.settle(ctx, x.Node, false, true) {
			return
		}
		r.onDone(ctx, x)
	case *msg.GrowRequest:
		r.observe(ctx, request{id: x.RequestId, grow: true, n: int(x.Processors), mandatory: x.Mandatory, initiator: ByScheduler})
	case *msg.ShrinkRequest:
		r.observe(ctx, request{id: x.RequestId, n: int(x.Processors), mandatory: x.Mandatory, initiator: ByScheduler})
	case *msg.AppRelease:
		// Every rank of an SPMD program may ask; rank 0 speaks for the job.
		if r.started && !r.finished && x.Processors > 0 && x.Rank == 0 {
			r.observe(ctx, request{n: int(x.Processors), initiator: ByApp})
		}
	case *msg.ClaimReply:
		r.onClaim(ctx, x)
	case *joinTimeout:
		if o := r.cur; o != nil && o.resizeID == x.resizeID && o.phase == phStarting {
			r.abortGrow(ctx, fmt.Sprintf("new ranks not ready within %s", r.cfg.RankTimeout))
		}
	case *msg.NodeDown:
		if r.settle(ctx, x.Node, true, false) {
			return
		}
		if m := r.byNode[x.Node]; m != nil && m.state != mGone {
			reason := fmt.Sprintf("node %s of cluster %s went down: %s", x.Node, x.Cluster, x.Reason)
			if m.state == mRunning || m.state == mDeparting {
				m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: "node down"}
				m.state = mGone
			}
			r.fail(ctx, reason)
		}
	}
}

func (r *mrunner) disarm() {
	if r.cancelArm != nil {
		r.cancelArm()
		r.cancelArm = nil
	}
}

// --- start ---------------------------------------------------------------

func (r *mrunner) onPlaced(ctx actor.Context, x *msg.JobPlaced) {
	if r.placed || r.finished {
		return
	}
	r.placed = true
	if len(x.Allocations) != 1 {
		// Give back what was claimed: a malleable job lives on one cluster.
		for _, a := range x.Allocations {
			if pid := r.cfg.Clusters[a.Cluster]; pid != nil {
				ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodeNames(a.Nodes)})
			}
		}
		r.failure = fmt.Sprintf("malleable job placed on %d clusters: malleable jobs are not co-allocated", len(x.Allocations))
		r.finish(ctx)
		return
	}
	a := x.Allocations[0]
	r.cluster = a.Cluster
	for i, n := range a.Nodes {
		r.addMember(int32(i), n)
	}
	r.env().After(r.cfg.StartupDelay, ctx.Self(), &launchRanks{})
}

func (r *mrunner) addMember(rank int32, n *msg.NodeRef) *member {
	m := &member{rank: rank, node: n.Name, pid: n.Pid.PID()}
	r.members = append(r.members, m)
	r.byNode[m.node] = m
	return m
}

func (r *mrunner) startRank(ctx actor.Context, m *member, size int) {
	m.sent = true
	ctx.Send(m.pid, &msg.StartRank{
		JobId: r.cfg.Job.Id, Rank: m.rank, Size: int32(size), App: r.cfg.Job.App, Args: r.cfg.Job.Args,
		TimeScale: r.cfg.TimeScale, Cluster: r.cluster, Runner: msg.FromPID(ctx.Self()),
	})
}

func (r *mrunner) launch(ctx actor.Context) {
	if r.finished || r.failure != "" {
		return
	}
	for _, m := range r.members {
		r.startRank(ctx, m, len(r.members))
	}
	self, root := ctx.Self(), r.env().System.Root
	t := time.AfterFunc(r.cfg.RankTimeout, func() { root.Send(self, &readyTimeout{}) })
	r.cancelArm = func() { t.Stop() }
}

func (r *mrunner) onReady(ctx actor.Context, x *msg.RankReady) {
	m := r.byNode[x.Node]
	if m != nil && m.rank == x.Rank && x.Error != "" {
		m.refused = true // whatever state the runner keeps: the node never held it
	}
	if m == nil || m.state != mStarting || m.rank != x.Rank {
		return
	}
	if o := r.cur; o != nil && o.phase == phStarting && containsMember(o.joiners, m) {
		r.joinerReady(ctx, m, x)
		return
	}
	if r.started || r.finished {
		return
	}
	if x.Error != "" {
		m.state, m.refused = mGone, true
		r.fail(ctx, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
		return
	}
	m.state, m.addr = mReady, x.Addr
	for _, mm := range r.members {
		if mm.state != mReady {
			return
		}
	}
	if r.failure != "" {
		return
	}
	table := &msg.RankTable{JobId: r.cfg.Job.Id}
	for _, mm := range r.members {
		table.Peers = append(table.Peers, &msg.RankPeer{Rank: mm.rank, Addr: mm.addr, Cluster: r.cluster})
	}
	for _, mm := range r.members {
		mm.state = mRunning
		ctx.Send(mm.pid, table)
	}
}

func (r *mrunner) onConnected(ctx actor.Context, x *msg.RankConnected) {
	if r.started || r.finished {
		return
	}
	var m *member
	for _, mm := range r.members {
		if mm.rank == x.Rank && mm.state == mRunning {
			m = mm
		}
	}
	if m == nil || m.conn {
		return
	}
	m.conn = true
	for _, mm := range r.members {
		if !mm.conn {
			return
		}
	}
	if r.failure != "" {
		return
	}
	r.started = true
	r.disarm()
	now := r.env().Now()
	r.startS, r.lastT = now, now
	r.job.Size = 0
	r.setSize(len(r.members))
	r.emit("start", nil, nil)
	ctx.Send(r.cfg.Manager, &msg.MalleableStatus{JobId: r.cfg.Job.Id, Cluster: r.cluster, Size: int32(r.job.Size),
		Min: int32(r.job.Min), Max: int32(r.job.Max), Profile: r.cfg.Profile.Name, StartS: now, Running: true})
	r.next(ctx)
}

// setSize records a size change on the time-weighted account and checks the
// size invariants.
func (r *mrunner) setSize(n int) {
	now := r.env().Now()
	r.area += float64(r.job.Size) * (now - r.lastT)
	r.lastT = now
	r.job.Size = n
	r.maxSize = max(r.maxSize, n)
	r.emit("procs", map[string]string{"cluster": r.cluster}, map[string]float64{"size": float64(n)})
	if n == 0 {
		return
	}
	lo, hi := r.job.Bounds()
	id := r.cfg.Job.Id
	check(r.env(), r.cfg.Stats, "mrunner", id, InvBounds, n >= lo && n <= hi,
		func() string { return fmt.Sprintf("job %s on %d processors, bounds [%d, %d]", id, n, lo, hi) })
	if r.job.PowerOfTwo {
		check(r.env(), r.cfg.Stats, "mrunner", id, InvPow2, n&(n-1) == 0,
			func() string { return fmt.Sprintf("job %s (%s) on %d processors", id, r.cfg.Profile.Name, n) })
	}
}

// --- observe / decide -----------------------------------------------------

// observe queues a request; mandatory ones go before voluntary ones. The
// runner acts on one request at a time, when the previous change is done.
func (r *mrunner) observe(ctx actor.Context, q request) {
	if !r.started || r.finished || r.failure != "" {
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Reason: "job not running"})
		}
		return
	}
	if q.n <= 0 {
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Reason: "no processors asked"})
		}
		return
	}
	if q.mandatory {
		i := 0
		for i < len(r.queue) && r.queue[i].mandatory {
			i++
		}
		r.queue = append(r.queue[:i], append([]request{q}, r.queue[i:]...)...)
	} else {
		r.queue = append(r.queue, q)
	}
	r.next(ctx)
}

// decide returns how many processors the job accepts to add or remove, and
// why fewer than asked.
//
// A grow accepts what the application can use (Job.Take: its maximum and,
// for FT, the largest power of two). A mandatory shrink releases what the
// application must (Job.Release: never below the minimum; FT lands on a
// power of two and may give more). A voluntary shrink is accepted only when
// it does not make the application slower by its profile (past the best
// size); otherwise it is declined. Unknown profiles accept any count.
func (r *mrunner) decide(q request) (int, string) {
	if q.grow {
		a := r.job.Take(q.n)
		if a < q.n {
			return a, fmt.Sprintf("accepts %d of %d (size %d, profile %s)", a, q.n, r.job.Size, r.cfg.Profile.Name)
		}
		return a, ""
	}
	a := r.job.Release(q.n)
	if a == 0 {
		return 0, fmt.Sprintf("at its minimum (size %d)", r.job.Size)
	}
	if !q.mandatory && q.initiator == ByScheduler && r.cfg.Profile.Name != "" && r.cfg.Profile.Exec(r.job.Size-a) > r.cfg.Profile.Exec(r.job.Size) {
		return 0, fmt.Sprintf("voluntary shrink to %d would slow the application down", r.job.Size-a)
	}
	if a != q.n {
		return a, fmt.Sprintf("releases %d of %d asked (size %d, profile %s)", a, q.n, r.job.Size, r.cfg.Profile.Name)
	}
	return a, ""
}

// next starts the next queued request when no change is under way.
func (r *mrunner) next(ctx actor.Context) {
	for r.cur == nil && len(r.queue) > 0 && r.started && !r.finished && r.failure == "" {
		q := r.queue[0]
		r.queue = r.queue[1:]
		acc, why := r.decide(q)
		if r.ending {
			acc, why = 0, "the application is ending"
		}
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Accepted: int32(acc), Reason: why})
		}
		if acc == 0 {
			r.emit("resize_declined", map[string]string{"op": opName(q.grow), "initiator": q.initiator,
				"mandatory": strconv.FormatBool(q.mandatory), "reason": why},
				map[string]float64{"requested": float64(q.n), "size": float64(r.job.Size)})
			continue
		}
		r.nextID++
		r.cur = &op{req: q, resizeID: r.nextID, from: r.job.Size, accepted: acc, startedAt: r.env().Now(), safeMin: -1}
		if q.grow {
			r.planGrow(ctx)
		} else {
			r.planShrink(ctx)
		}
	}
}

func opName(grow bool) string {
	if grow {
		return "grow"
	}
	return "shrink"
}

// --- grow ------------------------------------------------------------------

// planGrow claims the accepted processors one at a time (single-processor
// allocations) before the application is touched.
func (r *mrunner) planGrow(ctx actor.Context) {
	o := r.cur
	o.phase = phClaiming
	o.claims = map[int64]bool{}
	pid := r.cfg.Clusters[r.cluster]
	if pid == nil {
		r.endGrow(ctx, "no cluster manager for "+r.cluster)
		return
	}
	for i := 0; i < o.accepted; i++ {
		id := o.resizeID<<16 | int64(i)
		o.claims[id] = true
		r.claimsOut++
		ctx.Send(pid, &msg.Claim{JobId: r.cfg.Job.Id, Nodes: 1, ClaimId: id, ReplyTo: msg.FromPID(ctx.Self())})
	}
}

func (r *mrunner) onClaim(ctx actor.Context, x *msg.ClaimReply) {
	r.claimsOut--
	o := r.cur
	if o == nil || o.phase != phClaiming || !o.claims[x.ClaimId] || r.finished || r.failure != "" {
		if pid := r.cfg.Clusters[x.Cluster]; x.Ok && pid != nil { // nobody waits for these processors any more
			ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodeNames(x.Nodes)})
		}
		r.maybeStop(ctx)
		return
	}
	delete(o.claims, x.ClaimId)
	if x.Ok {
		o.claimed = append(o.claimed, x.Nodes...)
	}
	if len(o.claims) > 0 {
		return
	}
	r.claimsDone(ctx)
}

// claimsDone keeps what the application accepts of the processors obtained
// (FT: the largest power of two) and gives the rest back at once, reported as
// a voluntary release; then it starts ranks on the kept processors.
func (r *mrunner) claimsDone(ctx actor.Context) {
	o := r.cur
	if r.ending {
		if len(o.claimed) > 0 {
			ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodeNames(o.claimed)})
		}
		r.endGrow(ctx, "the application ended during the grow")
		return
	}
	got := len(o.claimed)
	keep := r.job.Take(got)
	if extra := o.claimed[keep:]; len(extra) > 0 {
		ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodeNames(extra)})
		r.released += len(extra)
		ctx.Send(r.cfg.Manager, &msg.VoluntaryRelease{JobId: r.cfg.Job.Id, Processors: int32(len(extra)),
			NewSize: int32(r.job.Size + keep), RequestId: o.req.id})
		r.emit("voluntary_release", map[string]string{"initiator": ByRunner, "cluster": r.cluster},
			map[string]float64{"processors": float64(len(extra)), "size": float64(r.job.Size + keep), "claimed": float64(got)})
	}
	if keep == 0 {
		r.endGrow(ctx, fmt.Sprintf("claimed %d of %d processors, the application can use none of them", got, o.accepted))
		return
	}
	o.phase = phStarting
	newSize := r.job.Size + keep
	for i, n := range o.claimed[:keep] {
		o.joiners = append(o.joiners, r.addMember(int32(r.job.Size+i), n))
	}
	for _, m := range o.joiners {
		r.startRank(ctx, m, newSize)
	}
	self, root, id := ctx.Self(), r.env().System.Root, o.resizeID
	t := time.AfterFunc(r.cfg.RankTimeout, func() { root.Send(self, &joinTimeout{resizeID: id}) })
	o.cancel = func() { t.Stop() }
}

func (r *mrunner) joinerReady(ctx actor.Context, m *member, x *msg.RankReady) {
	o := r.cur
	if x.Error != "" {
		m.state, m.refused = mGone, true
		r.abortGrow(ctx, fmt.Sprintf("new rank %d on %s: %s", x.Rank, x.Node, x.Error))
		return
	}
	m.state, m.addr = mReady, x.Addr
	o.readyN++
	if o.readyN < len(o.joiners) {
		return
	}
	if r.ending {
		r.abortGrow(ctx, "the application ended during the grow")
		return
	}
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	// Every new rank listens: hand the new table to all ranks.
	running := r.running()
	table := make([]*msg.RankPeer, 0, len(running)+len(o.joiners))
	for _, mm := range append(running, o.joiners...) {
		table = append(table, &msg.RankPeer{Rank: mm.rank, Addr: mm.addr, Cluster: r.cluster})
	}
	o.phase = phResizing
	o.expect = map[*member]bool{}
	for _, mm := range append(running, o.joiners...) {
		o.expect[mm] = true
		ctx.Send(mm.pid, &msg.ResizeRanks{JobId: r.cfg.Job.Id, ResizeId: o.resizeID, Peers: table,
			OldSize: int32(len(running)), Self: mm.rank, Mandatory: o.req.mandatory})
	}
}

// abortGrow gives up the grow under way before the application was asked to
// resize: new ranks are aborted and their processors freed as their nodes
// let go; the grow ends (ResizeAck) once all have.
func (r *mrunner) abortGrow(ctx actor.Context, reason string) {
	o := r.cur
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	for _, m := range o.joiners {
		if m.state != mGone {
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
		}
		m.state = mGone
		if r.byNode[m.node] == m {
			delete(r.byNode, m.node)
		}
	}
	r.release(ctx, o.joiners)
	o.phase, o.abortWhy = phAborting, reason
	r.afterSettle(ctx)
}

// release gives the members' processors back: at once for the nodes that
// have let go (see letGo), later (settle) for the others.
func (r *mrunner) release(ctx actor.Context, ms []*member) {
	var names []string
	for _, m := range ms {
		if m.letGo() {
			names = append(names, m.node)
		} else {
			r.pending[m.node] = m
		}
	}
	if len(names) > 0 && r.cfg.Clusters[r.cluster] != nil {
		ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: names})
	}
}

// settle takes a report from a node whose processor waits to be given back:
// a RankDone (done), a RankReady with an error (refused) or the node going
// down (refused) means it holds nothing of the job any more; a RankReady
// without an error means the aborted rank had opened, and its RankDone
// follows. It reports whether the message was for such a node.
func (r *mrunner) settle(ctx actor.Context, node string, refused, done bool) bool {
	m := r.pending[node]
	if m == nil {
		return false
	}
	switch {
	case done:
		m.ended = true
	case refused:
		m.refused = true
	default:
		return true
	}
	delete(r.pending, node)
	r.release(ctx, []*member{m})
	r.afterSettle(ctx)
	return true
}

// afterSettle moves on once nodes have let go: an aborted grow ends, a
// finished job is announced and the actor may stop.
func (r *mrunner) afterSettle(ctx actor.Context) {
	if o := r.cur; o != nil && o.phase == phAborting && !r.finished {
		for _, m := range o.joiners {
			if r.pending[m.node] == m {
				return
			}
		}
		r.endGrow(ctx, o.abortWhy)
		return
	}
	if r.finished && len(r.pending) == 0 {
		r.announce(ctx)
		r.maybeStop(ctx)
	}
}

// endGrow closes a grow that added nothing.
func (r *mrunner) endGrow(ctx actor.Context, reason string) {
	o := r.cur
	r.emit("grow_failed", map[string]string{"reason": reason, "cluster": r.cluster, "initiator": o.req.initiator},
		map[string]float64{"requested": float64(o.req.n), "accepted": float64(o.accepted), "claimed": float64(len(o.claimed)), "size": float64(r.job.Size)})
	if o.req.id != 0 {
		ctx.Send(r.cfg.Manager, &msg.ResizeAck{JobId: r.cfg.Job.Id, RequestId: o.req.id, NewSize: int32(r.job.Size),
			OldSize: int32(o.from), Ok: false, Reason: reason})
	}
	r.cur = nil
	r.next(ctx)
}

// --- shrink ------------------------------------------------------------------

// planShrink picks the departing ranks (the highest) and asks every rank to
// resize at its next safe point; the processors are freed once the departing
// ranks are gone.
func (r *mrunner) planShrink(ctx actor.Context) {
	o := r.cur
	running := r.running()
	keep := len(running) - o.accepted
	o.phase = phResizing
	o.departing = running[keep:]
	table := make([]*msg.RankPeer, 0, keep)
	for _, m := range running[:keep] {
		table = append(table, &msg.RankPeer{Rank: m.rank, Addr: m.addr, Cluster: r.cluster})
	}
	o.expect = map[*member]bool{}
	for _, m := range running[:keep] {
		o.expect[m] = true
	}
	for _, m := range running {
		self := m.rank
		if int(m.rank) >= keep {
			self = -1
			m.state = mDeparting
		}
		ctx.Send(m.pid, &msg.ResizeRanks{JobId: r.cfg.Job.Id, ResizeId: o.resizeID, Peers: table,
			OldSize: int32(len(running)), Self: self, Mandatory: o.req.mandatory})
	}
}

// --- execute: ranks report ------------------------------------------------

func (r *mrunner) onResized(ctx actor.Context, x *msg.RankResized) {
	o := r.cur
	m := r.byNode[x.Node]
	if o == nil || o.phase != phResizing || x.ResizeId != o.resizeID || m == nil || r.finished {
		return
	}
	if x.Error != "" {
		r.fail(ctx, fmt.Sprintf("resize of rank %d on %s: %s", x.Rank, x.Node, x.Error))
		return
	}
	o.resizeS = max(o.resizeS, x.ResizeS)
	if !containsMember(o.joiners, m) { // joiners pass no safe point before the switch
		if !o.safeReport || x.SafePoints < o.safeMin {
			o.safeMin = x.SafePoints
		}
		o.safeMax = max(o.safeMax, x.SafePoints)
		o.safeReport = true
	}
	switch {
	case x.Released:
		if m.state != mDeparting || m.released {
			return
		}
		m.released = true
	case o.expect[m]:
		delete(o.expect, m)
		o.resized++
		m.state = mRunning
		m.rank = x.NewRank
	default:
		return
	}
	r.maybeComplete(ctx)
}

func (r *mrunner) onDone(ctx actor.Context, x *msg.RankDone) {
	m := r.byNode[x.Node]
	if m == nil || m.done != nil {
		return
	}
	switch m.state {
	case mRunning, mDeparting:
	default:
		m.ended = true // an aborted rank that never ran: its node let go
		return
	}
	m.done = x
	if m.released {
		m.state = mGone
		if !x.Ok {
			r.fail(ctx, fmt.Sprintf("departing rank %d on %s: %s", x.Rank, x.Node, x.Error))
			return
		}
		if o := r.cur; o != nil && containsMember(o.departing, m) {
			o.departed++
			r.maybeComplete(ctx)
		}
		return
	}
	m.state = mGone
	if !x.Ok {
		r.fail(ctx, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
	}
	if !r.ending {
		// The application ends: a grow whose new ranks were not yet handed
		// the new table is given up (the remaining ranks are no longer a
		// complete table); one at the claiming stage ends in claimsDone.
		r.ending = true
		if o := r.cur; o != nil && o.phase == phStarting && r.failure == "" && !r.finished {
			r.abortGrow(ctx, "the application ended during the grow")
		}
	}
	r.finishIfDone(ctx)
}

// maybeComplete ends the change once every remaining rank has switched and
// every departing rank is gone.
func (r *mrunner) maybeComplete(ctx actor.Context) {
	o := r.cur
	if o == nil || o.phase != phResizing || len(o.expect) > 0 || o.departed < len(o.departing) {
		return
	}
	now := r.env().Now()
	if len(o.departing) > 0 {
		names := make([]string, 0, len(o.departing))
		for _, m := range o.departing {
			names = append(names, m.node)
			if r.byNode[m.node] == m {
				delete(r.byNode, m.node)
			}
		}
		ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: names})
	}
	newSize := len(r.running())
	r.setSize(newSize)
	r.resizeTotal += o.resizeS
	kind := "shrink"
	if o.req.grow {
		kind = "grow"
		r.grows++
	} else {
		r.shrinks++
	}
	vals := map[string]float64{
		"from": float64(o.from), "to": float64(newSize), "delta": float64(newSize - o.from),
		"requested": float64(o.req.n), "accepted": float64(o.accepted),
		"resize_s": o.resizeS, "op_s": now - o.startedAt,
	}
	if o.safeReport {
		vals["safe_points"] = float64(o.safeMin)
		vals["safe_points_max"] = float64(o.safeMax)
	}
	r.emit(kind, map[string]string{"cluster": r.cluster, "mandatory": strconv.FormatBool(o.req.mandatory), "initiator": o.req.initiator}, vals)
	if !o.req.grow && o.req.mandatory {
		id, sp := r.cfg.Job.Id, o.safeMin
		check(r.env(), r.cfg.Stats, "mrunner", id, InvMandatory, o.safeReport && sp <= 1,
			func() string {
				return fmt.Sprintf("job %s: mandatory shrink %d->%d applied after %d safe points", id, o.from, newSize, sp)
			})
	}
	switch {
	case o.req.initiator == ByApp:
		r.released += o.from - newSize
		ctx.Send(r.cfg.Manager, &msg.VoluntaryRelease{JobId: r.cfg.Job.Id, Processors: int32(o.from - newSize), NewSize: int32(newSize)})
		r.emit("voluntary_release", map[string]string{"initiator": ByApp, "cluster": r.cluster},
			map[string]float64{"processors": float64(o.from - newSize), "size": float64(newSize)})
	case o.req.id != 0:
		ctx.Send(r.cfg.Manager, &msg.ResizeAck{JobId: r.cfg.Job.Id, RequestId: o.req.id, NewSize: int32(newSize),
			OldSize: int32(o.from), ResizeS: o.resizeS, Ok: true})
	}
	r.cur = nil
	r.next(ctx)
}

// running returns the running members (the application's current ranks),
// ordered by rank.
func (r *mrunner) running() []*member {
	var out []*member
	for _, m := range r.members {
		if m.state == mRunning {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].rank < out[b].rank })
	return out
}

// --- end ---------------------------------------------------------------------

// fail aborts every rank still alive; the job ends once the running ones
// have reported.
func (r *mrunner) fail(ctx actor.Context, reason string) {
	if r.failure != "" || r.finished {
		return
	}
	r.failure = reason
	if o := r.cur; o != nil && o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	for _, m := range r.members {
		switch m.state {
		case mStarting, mReady:
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
			m.state = mGone
		case mRunning, mDeparting:
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
		}
	}
	r.finishIfDone(ctx)
}

// finishIfDone ends the job once no rank of the application is alive; new
// ranks of an unfinished grow are aborted.
func (r *mrunner) finishIfDone(ctx actor.Context) {
	if r.finished {
		return
	}
	if !r.started && r.failure == "" {
		return
	}
	for _, m := range r.members {
		if m.state == mRunning || m.state == mDeparting {
			return
		}
	}
	for _, m := range r.members {
		if m.state == mStarting || m.state == mReady {
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: "job ended"})
			m.state = mGone
		}
	}
	r.finish(ctx)
}

func (r *mrunner) finish(ctx actor.Context) {
	if r.finished {
		return
	}
	r.finished = true
	r.disarm()
	if o := r.cur; o != nil && o.cancel != nil {
		o.cancel()
	}
	r.queue = nil
	// Free every processor still held (members not yet released), each
	// once its node has let go.
	var held []*member
	for _, m := range r.members {
		if r.byNode[m.node] == m {
			held = append(held, m)
		}
	}
	r.release(ctx, held)
	fields := map[string]string{"status": "completed", "malleable": "true", "profile": r.cfg.Profile.Name}
	if r.failure != "" {
		fields["status"], fields["reason"] = "failed", r.failure
	}
	vals := map[string]float64{}
	if r.placed {
		fields["clusters"] = r.cluster
		var bytes, msgs, comp, comm float64
		var fid [][]byte
		n := 0
		for _, m := range r.members {
			if m.done != nil {
				fid = append(fid, m.done.Fidelity)
				bytes += float64(m.done.BytesSent)
				msgs += float64(m.done.MsgsSent)
				comp += m.done.ComputeS
				comm += m.done.CommS
				n++
			}
		}
		vals["bytes_sent"], vals["msgs_sent"] = bytes, msgs
		if f, err := fidelity.MergeEncoded(fid); err != nil {
			fields["fidelity_error"] = err.Error()
		} else if f != "" {
			fields[fidelity.EventField] = f
		}
		if n > 0 {
			vals["rank_compute_wall_s"], vals["rank_comm_wall_s"] = comp/float64(n), comm/float64(n)
		}
		for _, m := range r.members {
			if m.done != nil && m.done.Ok && !m.released && m.rank == 0 {
				vals["value"], vals["iterations"] = m.done.Value, float64(m.done.Iterations)
			}
		}
	}
	if r.started {
		final := r.job.Size
		r.setSize(0)
		if span := r.lastT - r.startS; span > 0 {
			vals["avg_procs"] = r.area / span
		} else {
			vals["avg_procs"] = float64(final)
		}
		vals["max_procs"] = float64(r.maxSize)
		vals["final_procs"] = float64(final)
		vals["grows"] = float64(r.grows)
		vals["shrinks"] = float64(r.shrinks)
		vals["resize_s"] = r.resizeTotal
		vals["released"] = float64(r.released)
	}
	r.emit("end", fields, vals)
	r.afterSettle(ctx)
}

// announce tells the manager the job left, once: after every processor it
// held was given back.
func (r *mrunner) announce(ctx actor.Context) {
	if r.announced {
		return
	}
	r.announced = true
	ctx.Send(r.cfg.Manager, &msg.JobFinished{JobId: r.cfg.Job.Id, Ok: r.failure == "", Reason: r.failure})
}

// maybeStop stops the actor once it has finished, every processor it held
// is given back and no claim is outstanding (a late claim reply must still
// find it to free the processor).
func (r *mrunner) maybeStop(ctx actor.Context) {
	if r.finished && r.announced && r.claimsOut <= 0 && len(r.pending) == 0 {
		ctx.Stop(ctx.Self())
	}
}

func containsMember(ms []*member, m *member) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func nodeNames(ns []*msg.NodeRef) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}
