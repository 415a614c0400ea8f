package realloc

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
)

// A reallocation round: gather every cluster's state, decide the moves on
// copies (the pure algorithm), cancel the jobs to move on every cluster at
// once, then submit those whose cancellation succeeded, in the order
// decided. Arrivals during a round wait for its end.

func (a *agent) startRound(ctx actor.Context) {
	if a.phase != phaseIdle {
		return
	}
	a.phase, a.round, a.got = phaseStates, a.round+1, 0
	a.states = make([]*msg.BatchState, len(a.cfg.Servers))
	for _, s := range a.cfg.Servers {
		ctx.Send(s, &msg.ServerStateRequest{ReplyTo: msg.FromPID(a.self)})
	}
}

func (a *agent) index(cluster string) int {
	for i, c := range a.cfg.Clusters {
		if c.Name == cluster {
			return i
		}
	}
	return -1
}

func (a *agent) gotState(ctx actor.Context, s *msg.BatchState) {
	i := a.index(s.GetCluster())
	if a.phase != phaseStates || i < 0 || a.states[i] != nil {
		return
	}
	a.states[i] = s
	if a.got++; a.got < len(a.states) {
		return
	}
	waiting := a.waitingJobs()
	a.waiting = len(waiting)
	copies := NewCopies(a.cfg.Policy, a.cfg.Env.Clock.Now(), a.cfg.Clusters, a.states, a.jobs)
	moves, err := a.algorithm(waiting, copies, a.heuristic, rp.Options{Threshold: a.cfg.Threshold})
	if err != nil {
		ev := a.cfg.Env.Event(msg.EventInvariantViolation, "agent", "")
		ev.Fields = map[string]string{"invariant": "realloc_round", "detail": err.Error()}
		a.cfg.Env.Emit(ev)
		moves = nil
	}
	a.moves, a.chosen = moves, copies.Chosen
	a.cancelMoves(ctx)
}

// waitingJobs lists the grid jobs waiting in the queues (local jobs stay
// where their users put them).
func (a *agent) waitingJobs() []rp.Job {
	var out []rp.Job
	for i, s := range a.states {
		for _, q := range s.GetQueue() {
			if _, ok := a.jobs[q.GetId()]; ok && !q.GetLocal() {
				out = append(out, rp.Job{ID: q.GetId(), Submit: time.Duration(q.GetSubmitNs()), Cluster: i})
			}
		}
	}
	return out
}

// cancelMoves sends one cancellation per cluster holding jobs to move.
func (a *agent) cancelMoves(ctx actor.Context) {
	ids := make([][]string, len(a.cfg.Servers))
	for _, m := range a.moves {
		ids[m.From] = append(ids[m.From], m.Job)
	}
	a.phase, a.left, a.done = phaseCancel, 0, map[string]bool{}
	for i, l := range ids {
		if len(l) > 0 {
			a.left++
			ctx.Send(a.cfg.Servers[i], &msg.ServerCancel{JobIds: l, ReplyTo: msg.FromPID(a.self), Tag: a.round})
		}
	}
	if a.left == 0 {
		a.finishRound(ctx)
	}
}

func (a *agent) cancelled(ctx actor.Context, c *msg.BatchCancelled) {
	if a.phase != phaseCancel || c.GetTag() != a.round {
		return
	}
	for _, id := range c.GetJobIds() {
		a.done[id] = true
	}
	if a.left--; a.left == 0 {
		a.finishRound(ctx)
	}
}

// finishRound submits the cancelled jobs where the algorithm sent them, in
// its order, then serves the arrivals that waited.
func (a *agent) finishRound(ctx actor.Context) {
	moved := 0
	for _, m := range a.moves {
		if !a.done[m.Job] {
			continue // it started meanwhile: it stays
		}
		sz, j := a.chosen[m.Job], a.jobs[m.Job]
		ctx.Send(a.cfg.Servers[m.To], &msg.ServerSubmit{Job: &msg.BatchJob{Id: m.Job, Procs: int32(sz.Procs),
			WalltimeNs: int64(sz.Walltime), RuntimeNs: int64(sz.Runtime), SubmitNs: j.GetSubmitNs()}})
		a.where[m.Job] = m.To
		if m.Reallocated() {
			moved++
			ev := a.cfg.Env.Event(msg.EventReallocMove, "agent", m.Job)
			ev.Fields = map[string]string{"from": a.cfg.Clusters[m.From].Name, "to": a.cfg.Clusters[m.To].Name}
			ev.Values = map[string]float64{"old_s": m.Old.Seconds(), "new_s": m.New.Seconds(), "procs": float64(sz.Procs)}
			a.cfg.Env.Emit(ev)
		}
	}
	ev := a.cfg.Env.Event(msg.EventReallocRound, "agent", "")
	ev.Fields = map[string]string{"mode": a.cfg.Mode, "heuristic": a.cfg.Heuristic}
	ev.Values = map[string]float64{"waiting": float64(a.waiting), "decided": float64(len(a.moves)), "moved": float64(moved)}
	a.cfg.Env.Emit(ev)
	a.phase, a.moves, a.chosen, a.done, a.states = phaseIdle, nil, nil, nil, nil
	deferred := a.deferred
	a.deferred = nil
	for _, j := range deferred {
		a.request(ctx, j)
	}
}
