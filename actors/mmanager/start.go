package mmanager

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
)

// start claims the processors of a job a round started on cluster w.at, if
// it fits what KOALA may hold there now; otherwise the job goes back to the
// queue for the next round. The check is against holding, which counts every
// claim and grow in flight and no shrink before its acknowledgement, so it
// holds whatever happened since the round decided: a start that waited for
// shrinks is claimed only if they released enough (a shrink may be declined,
// release less than asked, or time out), and never on the word of a round's
// view alone.
func (m *manager) start(ctx actor.Context, w *waiting) {
	if st := m.status[w.at]; st != nil {
		h := m.holding(w.at)
		limit := min(pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(w.at)}.Cap(), int(st.Capacity))
		if h+w.size > limit {
			m.emit(msg.EventStartDeferred, w.spec.Id, map[string]string{"cluster": w.at},
				map[string]float64{"size": float64(w.size), "holding": float64(h), "cap": float64(limit)})
			w.at, w.afterShrink = "", nil
			m.requeue(w)
			return
		}
	}
	m.claim(ctx, w)
}

func (m *manager) claim(ctx actor.Context, w *waiting) {
	m.nextID++
	m.claiming[m.nextID] = w
	ctx.Send(m.cfg.Clusters[w.at], &msg.Claim{JobId: w.spec.Id, Nodes: int32(w.size), ClaimId: m.nextID, ReplyTo: msg.FromPID(ctx.Self())})
}

func (m *manager) claimed(ctx actor.Context, r *msg.ClaimReply) {
	w := m.claiming[r.ClaimId]
	if w == nil || w.spec.Id != r.JobId || w.gone {
		if w != nil {
			delete(m.claiming, r.ClaimId)
		}
		if r.Ok { // nobody waits for these processors
			ctx.Send(m.cfg.Clusters[r.Cluster], &msg.ReleaseNodes{JobId: r.JobId, Nodes: msg.NodeNames(r.Nodes)})
		}
		return
	}
	delete(m.claiming, r.ClaimId)
	if !r.Ok {
		w.tries++
		m.emit(msg.EventClaimFailed, w.spec.Id, map[string]string{"reason": r.Cluster + ": " + r.Reason}, nil)
		w.at = ""
		if m.cfg.MaxTries > 0 && w.tries > m.cfg.MaxTries {
			m.reject(ctx, w, ReasonTooManyTries+" (claim failed)")
			return
		}
		m.requeue(w)
		return
	}
	j := &mjob{id: w.spec.Id, cluster: r.Cluster, runner: w.runner, malleable: w.malleable,
		min: w.min, max: w.max, pow2: w.pow2, profile: w.profile, size: len(r.Nodes)}
	m.jobs[j.id] = j
	m.emit(msg.EventPlaced, j.id, map[string]string{"components": fmt.Sprintf("%s:%d", r.Cluster, len(r.Nodes))},
		map[string]float64{"tries": float64(w.tries + 1), "clusters": 1})
	ctx.Send(w.runner, &msg.JobPlaced{JobId: j.id, PlacedS: m.env().Now(), Tries: int32(w.tries + 1),
		Allocations: []*msg.Allocation{{Cluster: r.Cluster, Nodes: r.Nodes}}})
	m.checkCluster(r.Cluster)
}
