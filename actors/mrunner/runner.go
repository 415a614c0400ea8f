package mrunner

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// Config builds the MRunner of one malleable job.
type Config struct {
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
	// ResizeTimeout bounds, in wall time, how long the runner waits for
	// the ranks to switch once they were asked to resize (ResizeRanks sent):
	// a rank that never reports RankResized (stuck in the switch) must not
	// leave the job running until the run's end. The job then fails
	// (FAILURE_RANK_TIMEOUT) and its ranks are aborted. Default RankTimeout.
	ResizeTimeout time.Duration
	// Stats counts the invariant checks; nil counts nothing.
	Stats *invariant.Stats
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
	// joinErr is the first failure a new rank reported during the switch
	// (see onResized); "" while none did.
	joinErr string
}

type mrunner struct {
	cfg     Config
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
	cause     msg.FailureCause // why the job failed (set with failure)
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
type resizeTimeout struct{ resizeID int64 }

// Props returns the props of a malleable job's runner.
//
// The runner submits the job (SubmitMalleable), starts its ranks once placed
// (like the rigid runner: StartRank, RankTable, all connected = "start") and
// reports MalleableStatus to the manager. It then acts on one request at a
// time: the reply (ResizeReply) goes out at once, the change is executed (grow:
// claims of one processor each, StartRank on the new processors, ResizeRanks
// to every rank; shrink: ResizeRanks to every rank, the highest ranks depart,
// their processors are freed after their RankDone), and ResizeAck follows
// once every rank has reported RankResized. Mandatory requests jump ahead of
// voluntary ones in the queue. A resize whose ranks have not all switched
// within ResizeTimeout of being asked fails the job (cause rank_timeout):
// a rank stuck in the switch must not keep the job until the run ends.
//
// Events (source "mrunner"): "submit", "start", "end" as the rigid runner
// (fields malleable=true, profile; "end" adds values avg_procs
// (time-weighted from start to end), max_procs, final_procs, grows, shrinks,
// resize_s (sum), released); "procs" (value size, field cluster) at every
// size change, 0 at the end; "grow" and "shrink" (values from, to, delta,
// requested, accepted, resize_s, op_s, safe_points, safe_points_max; fields
// cluster, mandatory, initiator); "resize_declined"; "grow_failed";
// "voluntary_release"; "invariant_violation".
func Props(cfg Config) *actor.Props {
	if cfg.RankTimeout <= 0 {
		cfg.RankTimeout = 60 * time.Second
	}
	if cfg.ResizeTimeout <= 0 {
		cfg.ResizeTimeout = cfg.RankTimeout
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &mrunner{cfg: cfg, job: policyJob(cfg), byNode: map[string]*member{}, pending: map[string]*member{}}
	})
}

// policyJob is the job as the malleability policies see it: the configured
// bounds intersected with the profile's, and whether only powers of two fit.
func policyJob(cfg Config) pm.Job {
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
		r.emit(msg.EventSubmit,
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
		r.cause = msg.FailureCause_FAILURE_PLACEMENT
		r.finish(ctx)
	case *msg.JobPlaced:
		r.onPlaced(ctx, x)
	case *launchRanks:
		r.launch(ctx)
	case *readyTimeout:
		if !r.started && !r.finished {
			if r.failure == "" {
				r.cause = msg.FailureCause_FAILURE_RANK_TIMEOUT
			}
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
	case *resizeTimeout:
		r.onResizeTimeout(ctx, x)
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
			if r.failure == "" {
				r.cause = msg.FailureCause_FAILURE_NODE_DOWN
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

// sendAfter sends m to the runner itself after d of wall time; stop
// cancels it.
func (r *mrunner) sendAfter(ctx actor.Context, d time.Duration, m interface{}) (stop func()) {
	self, root := ctx.Self(), r.env().System.Root
	t := time.AfterFunc(d, func() { root.Send(self, m) })
	return func() { t.Stop() }
}
