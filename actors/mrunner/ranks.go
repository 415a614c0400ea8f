package mrunner

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
)

func (r *mrunner) onResized(ctx actor.Context, x *msg.RankResized) {
	o := r.cur
	m := r.byNode[x.Node]
	if o == nil || o.phase != phResizing || x.ResizeId != o.resizeID || m == nil || r.finished {
		return
	}
	if x.Error != "" {
		reason := fmt.Sprintf("resize of rank %d on %s: %s", x.Rank, x.Node, x.Error)
		if o.req.grow && containsMember(o.joiners, m) {
			// A new rank could not join. The application may have ended
			// before the new table reached its ranks (they finished and
			// closed their communicators, which is what the new rank met):
			// then their RankDone end the job as it would have ended
			// (finishIfDone aborts the new ranks). Otherwise a current rank
			// fails in the switch (its peer aborted) or the switch times
			// out, and the job fails with this reason named.
			if o.joinErr == "" {
				o.joinErr = reason
			}
			return
		}
		r.fail(ctx, reason)
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
	kind := msg.ResizeKind(o.req.grow)
	if o.req.grow {
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
		invariant.Check(r.env(), r.cfg.Stats, "mrunner", id, invariant.Mandatory, o.safeReport && sp <= 1,
			func() string {
				return fmt.Sprintf("job %s: mandatory shrink %d->%d applied after %d safe points", id, o.from, newSize, sp)
			})
	}
	switch {
	case o.req.initiator == ByApp:
		r.released += o.from - newSize
		ctx.Send(r.cfg.Manager, &msg.VoluntaryRelease{JobId: r.cfg.Job.Id, Processors: int32(o.from - newSize), NewSize: int32(newSize)})
		r.emit(msg.EventVoluntaryRelease, map[string]string{"initiator": ByApp, "cluster": r.cluster},
			map[string]float64{"processors": float64(o.from - newSize), "size": float64(newSize)})
	case o.req.id != 0:
		ctx.Send(r.cfg.Manager, &msg.ResizeAck{JobId: r.cfg.Job.Id, RequestId: o.req.id, NewSize: int32(newSize),
			OldSize: int32(o.from), ResizeS: o.resizeS, Ok: true})
	}
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
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
