package batch

import "time"

// Incremental is a Policy that can plan a cluster from the plan it made of
// it before, in time proportional to what changed since rather than to the
// whole queue. FCFS and CBF are.
type Incremental interface {
	Policy
	// ScheduleFrom returns what Schedule returns on the same inputs: the
	// same plan or the same error. prev may be any Plan, the zero Plan
	// included; when it is the plan this policy made on the previous call
	// for the cluster, and the inputs are that call's changed only as a
	// cluster changes them (running jobs ended or were killed, the jobs prev
	// started now run since prev's instant, every other queued job holds
	// its reservation of prev, queued jobs were cancelled, new jobs joined
	// the tail), the schedule starts from prev's profile instead of being
	// rebuilt. prev is only read. spare is a plan the caller will not read
	// again (the one before prev), or the zero Plan: the new plan may be
	// made in its memory; its content makes no difference to the plan.
	ScheduleFrom(prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error)
}

// Compile-time checks that both policies plan incrementally.
var (
	_ Incremental = FCFS{}
	_ Incremental = CBF{}
)

// ScheduleFrom is p.ScheduleFrom when p is Incremental, else p.Schedule.
func ScheduleFrom(p Policy, prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	if ip, ok := p.(Incremental); ok {
		return ip.ScheduleFrom(prev, spare, now, capacity, running, queue)
	}
	return p.Schedule(now, capacity, running, queue)
}

// ScheduleFrom plans the queue first come, first served from prev
// (Incremental).
func (FCFS) ScheduleFrom(prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	return scheduleFrom(false, prev, spare, now, capacity, running, queue)
}

// ScheduleFrom plans the queue with conservative backfilling from prev
// (Incremental).
func (CBF) ScheduleFrom(prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	return scheduleFrom(true, prev, spare, now, capacity, running, queue)
}

// inputs is what a settled plan leaves behind for the next one
// (Plan.follow): the policy, the instant, the running jobs after it (those
// it was given, then those it starts, started at now, in Start order) and
// every reserved job's processors (procs[i] for Reservations[i]).
type inputs struct {
	backfill bool
	now      time.Duration
	running  []Running
	procs    []int
}

// maxNew bounds the jobs without a reservation that the incremental path
// takes: each is checked for a duplicate ID against the queue ahead of it
// by a scan; more than that go through Schedule's check.
const maxNew = 16

// buffers is the memory a plan is made in: a spare plan's (Plan.spare), or
// none (every field nil: all made afresh).
type buffers struct {
	res   []Reservation
	prof  *profile
	from  *inputs
	start []string
}

// spare returns p's memory for a plan made from prev, or none when p and
// prev share any of it (the same plan twice).
func (p Plan) spare(prev Plan) buffers {
	if p.prof == nil || p.prof == prev.prof || p.from == prev.from ||
		(cap(p.Reservations) > 0 && cap(prev.Reservations) > 0 && &p.Reservations[:1][0] == &prev.Reservations[:1][0]) {
		return buffers{}
	}
	return buffers{res: p.Reservations, prof: p.prof, from: p.from, start: p.Start}
}

func inputsOf(backfill bool, now time.Duration, running []Running, queue []Queued, p Plan, in *inputs) *inputs {
	if in == nil {
		in = &inputs{}
	}
	*in = inputs{backfill: backfill, now: now, running: append(in.running[:0], running...), procs: in.procs[:0]}
	for i := range queue {
		q := &queue[i]
		in.procs = append(in.procs, q.Procs)
		if p.Reservations[i].Start == now {
			in.running = append(in.running, Running{ID: q.ID, Procs: q.Procs, Start: now, Walltime: q.Walltime})
		}
	}
	return in
}

// scheduleFrom is schedule, starting from prev's profile when the inputs
// follow from prev (Plan.follow). With nothing released since prev, the
// held reservations stay where they are: each was at the earliest start
// the others allowed, and neither the profile from now on nor a job's
// lower bound has changed but for the later now. Otherwise they are
// compressed as schedule would, from the same profile and reservations;
// what was released lies before freedTo, which settle may use (FCFS).
func scheduleFrom(backfill bool, prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	buf := spare.spare(prev)
	prof, held, freedTo, ok := prev.follow(backfill, now, capacity, running, queue, buf.prof)
	if !ok {
		return schedule(backfill, now, capacity, running, queue)
	}
	res := buf.res[:0]
	if res == nil || cap(res) < len(queue) {
		// Room for a queue that grows: the spare plan is two plans old.
		res = make([]Reservation, len(queue), len(queue)+len(queue)/4+8)
	}
	res = res[:len(queue)]
	for i := range queue[:held] {
		q := &queue[i]
		res[i] = Reservation{ID: q.ID, Start: q.Reserved, End: q.Reserved + q.Walltime}
	}
	settled := true
	if freedTo > now {
		settled = settle(backfill, now, prof, queue[:held], res, nil, freedTo)
	}
	return plan(backfill, now, running, queue, held, res, prof, settled, buf), nil
}

// follow checks that the inputs follow from plan p as a cluster changes
// them (Incremental) and returns the profile they make from now on, p's
// own profile with the holds that are gone released (freedTo is the
// latest end of those still to come: now when there is none), and the
// number of held jobs. ok is false when
// they do not follow, or when a held reservation is in the past (schedule
// then counts it from now, which p's profile does not). The profile is
// made in into's memory when into is not nil.
func (p Plan) follow(backfill bool, now time.Duration, capacity int, running []Running, queue []Queued, into *profile) (prof *profile, held int, freedTo time.Duration, ok bool) {
	in := p.from
	if in == nil || in.backfill != backfill || now < in.now || capacity != p.prof.capacity {
		return nil, 0, 0, false
	}
	freedTo = now
	k := p.prof.index(now)
	if into == nil {
		into = &profile{steps: make([]step, 0, len(p.prof.steps)-k+8)}
	}
	prof = into
	prof.capacity, prof.steps = capacity, append(prof.steps[:0], p.prof.steps[k:]...)
	prof.steps[0].at = now
	// The running jobs still running, in order; the others release their
	// processors from now to their end.
	j := 0
	for k := range in.running {
		r := &in.running[k]
		if j < len(running) && running[j] == *r {
			j++
			continue
		}
		if r.End() > now {
			prof.add(now, r.End(), r.Procs)
			freedTo = max(freedTo, r.End())
		}
	}
	if j != len(running) {
		return nil, 0, 0, false
	}
	// The held jobs, each as p reserved it; a job p reserved that is no
	// longer queued (cancelled) releases its reservation.
	for i := range p.Reservations {
		r := &p.Reservations[i]
		if r.Start == in.now { // started by p: running now
			continue
		}
		if held < len(queue) && queue[held].Held && queue[held].ID == r.ID {
			q := &queue[held]
			if q.Procs != in.procs[i] || q.Walltime != r.End-r.Start || q.Reserved != r.Start || r.Start < now {
				return nil, 0, 0, false
			}
			held++
			continue
		}
		if r.End > now {
			prof.add(max(r.Start, now), r.End, in.procs[i])
			freedTo = max(freedTo, r.End)
		}
	}
	if len(queue)-held > maxNew {
		return nil, 0, 0, false
	}
	for i := held; i < len(queue); i++ {
		q := queue[i]
		if q.Held || checkJob(q.Procs, q.Walltime, capacity) != nil {
			return nil, 0, 0, false
		}
		for _, o := range queue[:i] {
			if o.ID == q.ID {
				return nil, 0, 0, false
			}
		}
	}
	return prof, held, freedTo, true
}
