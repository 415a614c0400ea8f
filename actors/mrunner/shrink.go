package mrunner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

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
	r.armResize(ctx)
}

// armResize bounds the resize under way, once every rank has been asked to
// switch: if it has not completed within ResizeTimeout (wall time), the job
// fails instead of running, stuck, until the run ends.
func (r *mrunner) armResize(ctx actor.Context) {
	o := r.cur
	if o.cancel != nil {
		o.cancel()
	}
	o.cancel = r.sendAfter(ctx, r.cfg.ResizeTimeout, &resizeTimeout{resizeID: o.resizeID})
}

// onResizeTimeout fails the job whose resize did not complete in time: the
// ranks that have not switched (or departing ranks that have not left) are
// named in the reason, and every rank is aborted (a rank stuck in the
// switch waits on its context, which the abort cancels).
func (r *mrunner) onResizeTimeout(ctx actor.Context, x *resizeTimeout) {
	o := r.cur
	if o == nil || o.resizeID != x.resizeID || o.phase != phResizing || r.finished || r.failure != "" {
		return
	}
	o.cancel = nil // fired
	var late []string
	for m := range o.expect {
		late = append(late, fmt.Sprintf("rank %d on %s", m.rank, m.node))
	}
	for _, m := range o.departing {
		if m.done == nil {
			late = append(late, fmt.Sprintf("departing rank %d on %s", m.rank, m.node))
		}
	}
	sort.Strings(late)
	if len(late) > 8 {
		late = append(late[:8], fmt.Sprintf("%d more", len(late)-8))
	}
	kind := msg.ResizeKind(o.req.grow)
	r.cause = msg.FailureCause_FAILURE_RANK_TIMEOUT
	why := ""
	if o.joinErr != "" {
		why = " (first: " + o.joinErr + ")"
	}
	r.fail(ctx, fmt.Sprintf("%s %d (%d -> %d processors) not completed within %s: %s did not switch%s",
		kind, o.resizeID, o.from, o.from+r.delta(o), r.cfg.ResizeTimeout, strings.Join(late, ", "), why))
}

// delta is the change in processors the op makes once complete.
func (r *mrunner) delta(o *op) int {
	if o.req.grow {
		return len(o.joiners)
	}
	return -len(o.departing)
}
