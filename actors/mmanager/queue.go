package mmanager

import (
	"fmt"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
)

func (m *manager) enqueue(ctx actor.Context, w *waiting) {
	m.nextSeq++
	w.seq = m.nextSeq
	m.queue = append(m.queue, w)
	m.round(ctx) // a new job is tried at once
}

func (m *manager) submitRigid(ctx actor.Context, x *msg.SubmitJob) {
	w := &waiting{spec: x.Job, runner: x.Runner.PID(), size: int(x.Job.Size)}
	if reason := m.shape(w); reason != "" {
		m.reject(ctx, w, reason)
		return
	}
	m.enqueue(ctx, w)
}

func (m *manager) submitMalleable(ctx actor.Context, x *msg.SubmitMalleable) {
	w := &waiting{spec: x.Job, runner: x.Runner.PID(), size: int(x.Job.Size), malleable: true,
		min: int(x.Min), max: int(x.Max), pow2: x.PowerOfTwo, profile: x.Profile}
	if reason := m.shape(w); reason != "" {
		m.reject(ctx, w, reason)
		return
	}
	j := pm.Job{Size: w.size, Min: w.min, Max: w.max, PowerOfTwo: w.pow2}
	if !j.Valid(w.size) {
		lo, hi := j.Bounds()
		m.reject(ctx, w, fmt.Sprintf("%s: initial size %d not valid for bounds [%d, %d] of profile %q", ReasonBadRequest, w.size, lo, hi, w.profile))
		return
	}
	m.enqueue(ctx, w)
}

// shape checks that the job asks for one cluster's worth of processors.
func (m *manager) shape(w *waiting) string {
	if w.spec == nil || w.size < 1 {
		return ReasonBadRequest + ": no size"
	}
	switch len(w.spec.Components) {
	case 0:
	case 1:
		w.fixed = w.spec.Components[0].Cluster
		if w.fixed != "" && m.cfg.Clusters[w.fixed] == nil {
			return fmt.Sprintf("%s: unknown cluster %q", ReasonBadRequest, w.fixed)
		}
	default:
		return ReasonCoalloc
	}
	return ""
}

func (m *manager) reject(ctx actor.Context, w *waiting, reason string) {
	id := ""
	if w.spec != nil {
		id = w.spec.Id
	}
	m.emit(msg.EventRejected, id, map[string]string{"reason": reason}, map[string]float64{"tries": float64(w.tries)})
	if w.runner != nil {
		ctx.Send(w.runner, &msg.JobRejected{JobId: id, Reason: reason, Tries: int32(w.tries)})
	}
}

// take removes a job from the queue and returns it.
func (m *manager) take(id string) *waiting {
	for i, w := range m.queue {
		if w.spec.Id == id {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			return w
		}
	}
	return nil
}

// requeue puts a job back in the queue at its submission position.
func (m *manager) requeue(w *waiting) {
	i := sort.Search(len(m.queue), func(i int) bool { return m.queue[i].seq > w.seq })
	m.queue = append(m.queue[:i], append([]*waiting{w}, m.queue[i:]...)...)
}
