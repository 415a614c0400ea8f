package mrunner

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

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
			ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: msg.NodeNames(x.Nodes)})
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
			ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: msg.NodeNames(o.claimed)})
		}
		r.endGrow(ctx, "the application ended during the grow")
		return
	}
	got := len(o.claimed)
	keep := r.job.Take(got)
	if extra := o.claimed[keep:]; len(extra) > 0 {
		ctx.Send(r.cfg.Clusters[r.cluster], &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: msg.NodeNames(extra)})
		r.released += len(extra)
		ctx.Send(r.cfg.Manager, &msg.VoluntaryRelease{JobId: r.cfg.Job.Id, Processors: int32(len(extra)),
			NewSize: int32(r.job.Size + keep), RequestId: o.req.id})
		r.emit(msg.EventVoluntaryRelease, map[string]string{"initiator": ByRunner, "cluster": r.cluster},
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
	o.cancel = r.sendAfter(ctx, r.cfg.RankTimeout, &joinTimeout{resizeID: o.resizeID})
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
	r.armResize(ctx)
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
	r.emit(msg.EventGrowFailed, map[string]string{"reason": reason, "cluster": r.cluster, "initiator": o.req.initiator},
		map[string]float64{"requested": float64(o.req.n), "accepted": float64(o.accepted), "claimed": float64(len(o.claimed)), "size": float64(r.job.Size)})
	if o.req.id != 0 {
		ctx.Send(r.cfg.Manager, &msg.ResizeAck{JobId: r.cfg.Job.Id, RequestId: o.req.id, NewSize: int32(r.job.Size),
			OldSize: int32(o.from), Ok: false, Reason: reason})
	}
	r.cur = nil
	r.next(ctx)
}
