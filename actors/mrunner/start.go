package mrunner

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
)

func (r *mrunner) onPlaced(ctx actor.Context, x *msg.JobPlaced) {
	if r.placed || r.finished {
		return
	}
	r.placed = true
	if len(x.Allocations) != 1 {
		// Give back what was claimed: a malleable job lives on one cluster.
		for _, a := range x.Allocations {
			if pid := r.cfg.Clusters[a.Cluster]; pid != nil {
				ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: msg.NodeNames(a.Nodes)})
			}
		}
		r.failure = fmt.Sprintf("malleable job placed on %d clusters: malleable jobs are not co-allocated", len(x.Allocations))
		r.cause = msg.FailureCause_FAILURE_PLACEMENT
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
	r.cancelArm = r.sendAfter(ctx, r.cfg.RankTimeout, &readyTimeout{})
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
	r.emit(msg.EventStart, nil, nil)
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
	r.emit(msg.EventProcs, map[string]string{"cluster": r.cluster}, map[string]float64{"size": float64(n)})
	if n == 0 {
		return
	}
	lo, hi := r.job.Bounds()
	id := r.cfg.Job.Id
	invariant.Check(r.env(), r.cfg.Stats, "mrunner", id, invariant.Bounds, n >= lo && n <= hi,
		func() string { return fmt.Sprintf("job %s on %d processors, bounds [%d, %d]", id, n, lo, hi) })
	if r.job.PowerOfTwo {
		invariant.Check(r.env(), r.cfg.Stats, "mrunner", id, invariant.Pow2, n&(n-1) == 0,
			func() string { return fmt.Sprintf("job %s (%s) on %d processors", id, r.cfg.Profile.Name, n) })
	}
}
