package runner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
)

// Config builds a runner for one job.
type Config struct {
	Job       *msg.JobSpec
	Scheduler *actor.PID
	Clusters  map[string]*actor.PID // cluster managers, to release nodes
	TimeScale float64
	// StartupDelay emulates the local resource managers' job start latency
	// (about 10 s on DAS-3), in scenario time.
	StartupDelay time.Duration
	// RankTimeout bounds, in wall time, how long the runner waits for ranks
	// to report ready; a job whose nodes do not answer fails.
	RankTimeout time.Duration
	// Resubmits is how many times a job that failed after its placement
	// is submitted again (policy.on_failure: resubmit(n)); 0 fails it.
	Resubmits int
	// Migration, when set, makes the runner a migrating runner for a
	// checkpointable application (migrate.go).
	Migration *Migration
	Env       actors.Env
}

type member struct {
	rank    int32
	cluster string
	node    string
	pid     *actor.PID
	addr    string
	ready   bool
	conn    bool
	done    *msg.RankDone
}

type runner struct {
	cfg      Config
	placed   *msg.JobPlaced
	members  []*member
	readyN   int
	connN    int
	doneN    int
	started  bool
	finished bool
	failure  string
	cause    msg.FailureCause
	attempt  int // resubmissions so far
	// down are the nodes reported down (NodeDown) that held no rank of the
	// job then: a placement on one that crossed the report fails at once.
	down      map[string]*msg.NodeDown
	cancelArm func()
	mig       *migration // a migrating runner's state
}

// launch and readyTimeout carry the attempt they were armed for, so that
// a resubmitted job ignores its failed attempt's timers.
type launch struct{ attempt int }
type readyTimeout struct{ attempt int }

// Props returns the props of a job's runner.
func Props(cfg Config) *actor.Props {
	if cfg.RankTimeout <= 0 {
		cfg.RankTimeout = 60 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor { return &runner{cfg: cfg} })
}

func (r *runner) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		r.submit(ctx)
	case *msg.JobRejected:
		r.cause = msg.FailureCause_FAILURE_PLACEMENT
		r.finish(ctx, fmt.Sprintf("placement failed after %d tries: %s", x.Tries, x.Reason))
	case *msg.JobPlaced:
		r.jobPlaced(ctx, x)
	case *launch:
		r.startRanks(ctx, x)
	case *readyTimeout:
		if x.attempt == r.attempt && r.placed != nil && !r.started && !r.finished {
			r.fail(ctx, msg.FailureCause_FAILURE_RANK_TIMEOUT, fmt.Sprintf("ranks not ready within %s", r.cfg.RankTimeout))
		}
	case *msg.RankReady:
		r.ready(ctx, x)
	case *msg.RankConnected:
		r.rankConnected(x)
	case *msg.RankDone:
		r.rankDone(ctx, x)
	case *msg.NodeDown:
		r.nodeDown(ctx, x)
	case *msg.PhaseDone:
		r.phaseDone(ctx, x)
	case *msg.MigrationDecision:
		r.decided(ctx, x)
	case *msg.RankStopped:
		r.rankStopped(x)
	}
}

// submit records the job's submission and sends it to the scheduler.
func (r *runner) submit(ctx actor.Context) {
	ev := r.cfg.Env.Event(msg.EventSubmit, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"app": r.cfg.Job.App, "request": r.cfg.Job.Request}
	ev.Values = map[string]float64{"size": float64(r.cfg.Job.Size)}
	r.cfg.Env.Emit(ev)
	ctx.Send(r.cfg.Scheduler, &msg.SubmitJob{Job: r.cfg.Job, Runner: msg.FromPID(ctx.Self())})
}

// jobPlaced numbers the ranks over the placement's nodes and arms the
// launch after the startup delay; a placement on a node already reported
// down fails at once.
func (r *runner) jobPlaced(ctx actor.Context, x *msg.JobPlaced) {
	if r.placed != nil || r.finished {
		return
	}
	r.placed = x
	total := 0
	for _, a := range x.Allocations {
		total += len(a.Nodes)
	}
	// The members in one allocation (its capacity fixed, so their pointers
	// stay valid), not one per rank.
	ms := make([]member, 0, total)
	for _, a := range x.Allocations {
		for _, n := range a.Nodes {
			ms = append(ms, member{rank: int32(len(ms)), cluster: a.Cluster, node: n.Name, pid: n.Pid.PID()})
			r.members = append(r.members, &ms[len(ms)-1])
		}
	}
	for _, m := range r.members {
		if nd := r.down[m.node]; nd != nil {
			r.nodeDown(ctx, nd)
			return
		}
	}
	r.cfg.Env.After(r.cfg.StartupDelay, ctx.Self(), &launch{attempt: r.attempt})
}

// startRanks starts every rank (with the checkpoint to restart from, for a
// migrated job) and arms the timeout on their readiness.
func (r *runner) startRanks(ctx actor.Context, x *launch) {
	if x.attempt != r.attempt || r.placed == nil || r.failure != "" || r.finished {
		return
	}
	for _, m := range r.members {
		ctx.Send(m.pid, &msg.StartRank{
			JobId: r.cfg.Job.Id, Rank: m.rank, Size: int32(len(r.members)), App: r.cfg.Job.App,
			Args: r.cfg.Job.Args, TimeScale: r.cfg.TimeScale, Cluster: m.cluster, Runner: msg.FromPID(ctx.Self()),
		})
		if r.mig != nil && r.mig.restart != nil {
			ctx.Send(m.pid, r.mig.restart)
		}
	}
	self, attempt := ctx.Self(), r.attempt
	t := time.AfterFunc(r.cfg.RankTimeout, func() { r.cfg.Env.System.Root.Send(self, &readyTimeout{attempt: attempt}) })
	r.cancelArm = func() { t.Stop() }
}

// rankConnected counts a rank connected to its peers; when every rank is,
// the job has started (a restarted migrating job emits no second start).
func (r *runner) rankConnected(x *msg.RankConnected) {
	m := r.member(x.Rank)
	if m == nil || m.conn {
		return
	}
	m.conn = true
	r.connN++
	if r.connN != len(r.members) || r.started || r.failure != "" {
		return
	}
	r.started = true
	if r.cancelArm != nil {
		r.cancelArm()
	}
	if r.mig == nil || r.mig.restart == nil {
		r.cfg.Env.Emit(r.cfg.Env.Event(msg.EventStart, "runner", r.cfg.Job.Id))
	}
	r.contract()
}

// rankDone records a rank's end, fails the job on a rank's error, and
// finishes it when every rank has ended.
func (r *runner) rankDone(ctx actor.Context, x *msg.RankDone) {
	// Matched on the node too: a late report of an earlier attempt's
	// rank (the job was resubmitted) is not this attempt's.
	m := r.member(x.Rank)
	if m == nil || m.done != nil || m.node != x.Node {
		return
	}
	m.done = x
	r.doneN++
	if !x.Ok && r.failure == "" {
		r.fail(ctx, msg.FailureCause_FAILURE_RANK, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
	}
	r.maybeFinish(ctx)
}

// nodeDown fails the job when the node lost held one of its ranks, and
// otherwise remembers the node.
func (r *runner) nodeDown(ctx actor.Context, x *msg.NodeDown) {
	hit := false
	for _, m := range r.members {
		if m.node == x.Node {
			hit = true
		}
	}
	if !hit {
		if r.down == nil {
			r.down = map[string]*msg.NodeDown{}
		}
		r.down[x.Node] = x
		return
	}
	for _, m := range r.members {
		if m.node != x.Node || m.done != nil {
			continue
		}
		reason := fmt.Sprintf("node %s of cluster %s went down: %s", x.Node, x.Cluster, x.Reason)
		if r.failure != "" && r.cause != msg.FailureCause_FAILURE_NODE_DOWN {
			// A crashed node's peers usually lose their connections to it
			// (and fail) before the membership declares it dead; the node
			// failure is the cause, so it leads the reason.
			r.failure = reason + " (first error: " + r.failure + ")"
			r.cause = msg.FailureCause_FAILURE_NODE_DOWN
		}
		// The node will never report: count it as done.
		m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: "node down"}
		r.doneN++
		r.fail(ctx, msg.FailureCause_FAILURE_NODE_DOWN, reason)
		r.maybeFinish(ctx)
		return
	}
}

// maybeFinish ends the attempt once every rank of it has reported (a
// resubmitted job has no ranks until it is placed again).
func (r *runner) maybeFinish(ctx actor.Context) {
	if !r.finished && len(r.members) > 0 && r.doneN == len(r.members) {
		r.finish(ctx, r.failure)
	}
}

func (r *runner) member(rank int32) *member {
	if int(rank) < 0 || int(rank) >= len(r.members) {
		return nil
	}
	return r.members[rank]
}

func (r *runner) ready(ctx actor.Context, x *msg.RankReady) {
	m := r.member(x.Rank)
	if m == nil || m.ready || m.node != x.Node {
		return
	}
	m.ready = true
	r.readyN++
	if x.Error != "" {
		// This rank never opened: it will not report done.
		m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: x.Error}
		r.doneN++
		r.fail(ctx, msg.FailureCause_FAILURE_RANK, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
		r.maybeFinish(ctx)
		return
	}
	m.addr = x.Addr
	if r.readyN == len(r.members) && r.failure == "" {
		table := &msg.RankTable{JobId: r.cfg.Job.Id, Peers: make([]*msg.RankPeer, len(r.members))}
		peers := make([]msg.RankPeer, len(r.members))
		for i, mm := range r.members {
			peers[i].Rank, peers[i].Addr, peers[i].Cluster = mm.rank, mm.addr, mm.cluster
			table.Peers[i] = &peers[i]
		}
		for _, mm := range r.members {
			ctx.Send(mm.pid, table)
		}
	}
}

// fail aborts every rank still running; the job ends when all ranks report.
// The first failure gives the job its cause and reason.
func (r *runner) fail(ctx actor.Context, cause msg.FailureCause, reason string) {
	if r.failure != "" {
		return
	}
	r.failure, r.cause = reason, cause
	for _, m := range r.members {
		if m.done == nil {
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
		}
	}
	// Ranks that were told to start but never got the table have nothing to
	// run: they report done after the abort closes their endpoint. Ranks that
	// never became ready are covered by readyTimeout.
	if !r.started && r.readyN < len(r.members) {
		for _, m := range r.members {
			if !m.ready && m.done == nil {
				m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: "not ready"}
				r.doneN++
			}
		}
		r.maybeFinish(ctx)
	}
}

func (r *runner) finish(ctx actor.Context, failure string) {
	if r.finished {
		return
	}
	if r.cancelArm != nil {
		r.cancelArm()
		r.cancelArm = nil
	}
	byCluster := r.release(ctx)
	if failure == "" && r.moveOn(ctx) {
		return
	}
	if r.mig != nil && r.mig.restart != nil && r.started {
		r.restarted()
	}
	if failure != "" && r.cause == msg.FailureCause_FAILURE_NONE {
		r.cause = msg.FailureCause_FAILURE_RANK
	}
	if failure != "" && r.resubmit(ctx, failure) {
		return
	}
	r.finished = true
	ev := r.cfg.Env.Event(msg.EventEnd, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"status": "completed"}
	ev.Values = map[string]float64{}
	if failure != "" {
		ev.Fields["status"] = "failed"
		ev.Fields["reason"] = failure
		ev.Fields["cause"] = r.cause.Name()
	}
	if r.placed != nil {
		clusters := make([]string, 0, len(byCluster))
		for c := range byCluster {
			clusters = append(clusters, c)
		}
		sort.Strings(clusters)
		ev.Fields["clusters"] = strings.Join(clusters, "+")
		var bytes, msgs int64
		var comp, comm float64
		var fid [][]byte
		for _, m := range r.members {
			if m.done != nil {
				bytes += m.done.BytesSent
				msgs += m.done.MsgsSent
				comp += m.done.ComputeS
				comm += m.done.CommS
				fid = append(fid, m.done.Fidelity)
			}
		}
		if f, err := fidelity.MergeEncoded(fid); err != nil {
			ev.Fields["fidelity_error"] = err.Error()
		} else if f != "" {
			ev.Fields[fidelity.EventField] = f
		}
		ev.Values["bytes_sent"] = float64(bytes)
		ev.Values["msgs_sent"] = float64(msgs)
		if n := float64(len(r.members)); n > 0 {
			ev.Values["rank_compute_wall_s"] = comp / n
			ev.Values["rank_comm_wall_s"] = comm / n
		}
		if len(r.members) > 0 && r.members[0].done != nil {
			ev.Values["value"] = r.members[0].done.Value
			ev.Values["iterations"] = float64(r.members[0].done.Iterations)
		}
	}
	r.cfg.Env.Emit(ev)
	ctx.Send(r.cfg.Scheduler, &msg.JobFinished{JobId: r.cfg.Job.Id, Ok: failure == "", Reason: failure, Cause: r.cause})
	r.ended(ctx, failure == "", byCluster)
	ctx.Stop(ctx.Self())
}

// release gives every claimed node back, per cluster, and returns them by
// cluster.
func (r *runner) release(ctx actor.Context) map[string][]string {
	byCluster := map[string][]string{}
	for _, m := range r.members {
		byCluster[m.cluster] = append(byCluster[m.cluster], m.node)
	}
	for c, nodes := range byCluster {
		if pid := r.cfg.Clusters[c]; pid != nil {
			ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodes})
		}
	}
	return byCluster
}

// resubmit submits a job that failed after its placement again while it
// has resubmissions left (Config.Resubmits): the failed attempt is
// recorded (EventResubmit), the scheduler forgets it (JobFinished), and the
// job waits in the placement queue again under the same ID. A placement
// failure is never resubmitted: the same request would fail the same way.
func (r *runner) resubmit(ctx actor.Context, failure string) bool {
	if r.attempt >= r.cfg.Resubmits || r.placed == nil || r.cause == msg.FailureCause_FAILURE_PLACEMENT {
		return false
	}
	r.attempt++
	ev := r.cfg.Env.Event(msg.EventResubmit, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"cause": r.cause.Name(), "reason": failure}
	ev.Values = map[string]float64{"attempt": float64(r.attempt)}
	r.cfg.Env.Emit(ev)
	ctx.Send(r.cfg.Scheduler, &msg.JobFinished{JobId: r.cfg.Job.Id, Reason: failure, Cause: r.cause})
	r.placed, r.members = nil, nil
	r.readyN, r.connN, r.doneN = 0, 0, 0
	r.started, r.failure, r.cause = false, "", msg.FailureCause_FAILURE_NONE
	ctx.Send(r.cfg.Scheduler, &msg.SubmitJob{Job: r.cfg.Job, Runner: msg.FromPID(ctx.Self())})
	return true
}
