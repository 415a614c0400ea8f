package mmanager

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

func (m *manager) replied(ctx actor.Context, x *msg.ResizeReply) {
	j := m.ops[x.RequestId]
	if j == nil || j.op == nil || j.op.id != x.RequestId {
		return
	}
	j.op.replied = true
	j.op.accepted = int(x.Accepted)
	if x.Accepted == 0 {
		m.clearOp(ctx, j)
	}
}

func (m *manager) acked(ctx actor.Context, x *msg.ResizeAck) {
	j := m.jobs[x.JobId]
	if j == nil {
		return
	}
	j.size = int(x.NewSize)
	if j.op != nil && j.op.id == x.RequestId {
		m.clearOp(ctx, j)
	}
	m.checkJob(j)
	m.checkCluster(j.cluster)
}

// clearOp ends the job's operation in flight and starts the jobs that were
// waiting only for it.
func (m *manager) clearOp(ctx actor.Context, j *mjob) {
	if j.op == nil {
		return
	}
	id := j.op.id
	delete(m.ops, id)
	j.op = nil
	var rest, ready []*waiting
	for _, w := range m.after[j.cluster] {
		delete(w.afterShrink, id)
		if len(w.afterShrink) == 0 {
			ready = append(ready, w)
			continue
		}
		rest = append(rest, w)
	}
	if len(rest) == 0 {
		delete(m.after, j.cluster)
	} else {
		m.after[j.cluster] = rest
	}
	for _, w := range ready {
		m.start(ctx, w)
	}
}

// expire gives up on operations unacknowledged past their deadline. The
// runner may still carry one out (a late ResizeAck sets the size), so the
// books keep the worst case: an expired grow counts as done (the job is
// booked at its size plus the grow), an expired shrink as not done (the
// size stays, and a start waiting for it is claimed only if it fits).
func (m *manager) expire(ctx actor.Context) {
	now := m.env().Now()
	for _, j := range m.sortedJobs() {
		if j.op != nil && now > j.op.deadline {
			m.emit(msg.EventResizeTimeout, j.id, map[string]string{"op": msg.ResizeKind(j.op.grow), "cluster": j.cluster},
				map[string]float64{"processors": float64(j.op.asked)})
			if j.op.grow {
				j.size += j.op.delta()
			}
			m.clearOp(ctx, j)
		}
	}
}

func (m *manager) finished(ctx actor.Context, x *msg.JobFinished) {
	if j := m.jobs[x.JobId]; j != nil {
		// Off the books first: its processors are free (the runner released
		// them before it said so), which a start waiting for its op may use.
		delete(m.jobs, x.JobId)
		m.clearOp(ctx, j)
		return
	}
	if w := m.take(x.JobId); w != nil {
		return
	}
	for _, w := range m.claiming {
		if w.spec.Id == x.JobId {
			w.gone = true
		}
	}
	for c, ws := range m.after {
		for i, w := range ws {
			if w.spec.Id == x.JobId {
				m.after[c] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(m.after[c]) == 0 {
			delete(m.after, c)
		}
	}
}
