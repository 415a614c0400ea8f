package batch

import (
	"fmt"
	"strconv"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
)

// replan applies the policy at the current instant, from the plan it made
// last (policy.ScheduleFrom: the same plan as from scratch; the plan before
// it, read no more, lends its memory): every running job
// whose walltime has come is killed first (the planner counts its
// processors free from then), then the jobs the plan starts now start and
// every other queued job holds its (possibly earlier) reservation.
func (m *manager) replan() {
	now := m.now()
	var kill []*running
	for i, in := range m.rin {
		if policy.KillTime(in.Start, in.Walltime) <= now {
			kill = append(kill, m.order[i])
		}
	}
	for _, r := range kill {
		m.walltime(r)
	}
	plan, err := policy.ScheduleFrom(m.cfg.Policy, m.plan, m.spare, now, m.cfg.Capacity, m.rin, m.qin)
	if err != nil {
		m.plan, m.spare = policy.Plan{}, policy.Plan{}
		m.violation("plan", err.Error())
		return
	}
	m.plan, m.spare = plan, m.plan
	// plan.Start is in queue order: walk it beside the queue, moving the
	// jobs kept forward over those started (in place: none moves while
	// none has started).
	next, kept := 0, 0
	for i := range m.queue {
		r, in := &plan.Reservations[i], &m.qin[i]
		if r.Broken {
			m.violation("reservation", fmt.Sprintf("job %s: reservation broken", r.ID))
		}
		if next < len(plan.Start) && plan.Start[next] == in.ID {
			next++
			m.start(m.queue[i], in.Reserved)
			continue
		}
		in.Held, in.Reserved = true, r.Start
		if kept < i {
			m.queue[kept], m.qin[kept] = m.queue[i], *in
		}
		kept++
	}
	clear(m.queue[kept:])
	m.queue, m.qin = m.queue[:kept], m.qin[:kept]
	if m.busy > m.cfg.Capacity {
		m.violation("capacity", fmt.Sprintf("%d processors busy on a cluster of %d", m.busy, m.cfg.Capacity))
	}
}

// start runs a queued job for its runtime, or until its walltime if the
// runtime is longer: OnTimers a timer of the manager ends it; OnNodes its
// processes start (launch), and a timer at its walltime ends its hold on
// the plan's processors.
func (m *manager) start(w *waiting, reserved time.Duration) {
	j := w.job
	now := m.now()
	wall, run := time.Duration(j.GetWalltimeNs()), time.Duration(j.GetRuntimeNs())
	d, killed := run, false
	switch {
	case m.pool != nil: // the processes end the job; the timer ends the plan's hold
		d, killed = wall, true
	case run >= wall:
		d, killed = wall, run > wall
	}
	r := &running{job: j, start: now}
	in := policy.Running{ID: j.GetId(), Procs: int(j.GetProcs()), Start: now, Walltime: wall}
	r.stop = m.cfg.Env.After(d, m.self, &jobDone{id: j.GetId(), killed: killed})
	m.running[j.GetId()] = r
	m.order, m.rin = append(m.order, r), append(m.rin, in)
	m.busy += in.Procs
	ev := m.event(msg.EventBatchStart, j)
	ev.Values["wait_s"] = (now - time.Duration(j.GetSubmitNs())).Seconds()
	ev.Values["reserved_s"] = reserved.Seconds()
	m.cfg.Env.Emit(ev)
	// The job's life as every backend's results read it.
	placed := m.cfg.Env.Event(msg.EventPlaced, m.cfg.Name, j.GetId())
	placed.Fields = m.components(j.GetProcs())
	placed.Values = placedValues
	m.cfg.Env.Emit(placed)
	if m.pool != nil {
		m.launch(r) // the job starts when its processes run
		return
	}
	m.cfg.Env.Emit(m.cfg.Env.Event(msg.EventStart, m.cfg.Name, j.GetId()))
}

// components are the fields of a placed event of a job of procs
// processors: one map per size, shared by the manager's events (read only
// once emitted).
func (m *manager) components(procs int32) map[string]string {
	f := m.placed[procs]
	if f == nil {
		if m.placed == nil {
			m.placed = map[int32]map[string]string{}
		}
		f = map[string]string{"components": m.cfg.Name + ":" + strconv.Itoa(int(procs))}
		m.placed[procs] = f
	}
	return f
}

// violation reports a broken invariant of the batch cluster.
func (m *manager) violation(what, detail string) {
	ev := m.cfg.Env.Event(msg.EventInvariantViolation, m.cfg.Name, "")
	ev.Fields = map[string]string{"invariant": "batch_" + what, "detail": m.cfg.Name + ": " + detail}
	m.cfg.Env.Emit(ev)
}

// state is the cluster's state as a BatchState (StateRequest).
//
// A job's entry is made once and shared by the states sent until it
// changes (a queued job's reservation; a running job's never does): those
// who ask only read the states they are sent.
func (m *manager) state() *msg.BatchState {
	s := &msg.BatchState{Cluster: m.cfg.Name, NowNs: int64(m.now()), Capacity: int32(m.cfg.Capacity)}
	if len(m.order) > 0 {
		s.Running = make([]*msg.BatchRunning, len(m.order))
		for i, r := range m.order {
			if r.pub == nil {
				r.pub = &msg.BatchRunning{Id: r.job.GetId(), Procs: r.job.GetProcs(), StartNs: int64(r.start), WalltimeNs: r.job.GetWalltimeNs()}
			}
			s.Running[i] = r.pub
		}
	}
	if len(m.queue) > 0 {
		s.Queue = make([]*msg.BatchQueued, len(m.queue))
		for i, w := range m.queue {
			in := m.qin[i]
			if w.pub == nil || w.pub.Held != in.Held || w.pub.ReservedNs != int64(in.Reserved) {
				w.pub = &msg.BatchQueued{Id: w.job.GetId(), Procs: w.job.GetProcs(), WalltimeNs: w.job.GetWalltimeNs(),
					Held: in.Held, ReservedNs: int64(in.Reserved), SubmitNs: w.job.GetSubmitNs(), Local: w.job.GetLocal()}
			}
			s.Queue[i] = w.pub
		}
	}
	return s
}
