package batch

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Policy is a batch-queue discipline of one cluster.
type Policy interface {
	// Name is the key of the policy in Registry.
	Name() string
	// Schedule plans the queue at instant now on a cluster of capacity
	// processors where running hold processors. It fails, naming the input
	// at fault, when the inputs are malformed: capacity below 1, a job with
	// no processor, more processors than the cluster or a walltime not
	// above 0, more processors running than the cluster has, duplicate
	// queued IDs, or a job without a reservation queued ahead of one that
	// holds a reservation.
	Schedule(now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error)
}

// EstimateCompletion returns the completion time (reservation + walltime)
// candidate would get if it were appended to queue now under policy p: the
// schedule of queue plus candidate, read at candidate. The candidate's Held
// field is ignored. Completion is the walltime end, the latest the job may
// finish, since the planner does not know actual run times.
func EstimateCompletion(p Policy, now time.Duration, capacity int, running []Running, queue []Queued, candidate Queued) (time.Duration, error) {
	candidate.Held = false
	q := append(append(make([]Queued, 0, len(queue)+1), queue...), candidate)
	plan, err := p.Schedule(now, capacity, running, q)
	if err != nil {
		return 0, err
	}
	return plan.Reservations[len(q)-1].End, nil
}

// schedule is the planner shared by FCFS and CBF; the two differ only by the
// lower bound of a job's start: now for CBF, the reservation of the job ahead
// in the queue for FCFS (so jobs start in queue order and none jumps ahead).
//
// Rule:
//  1. The profile starts from the running jobs, each holding its processors
//     until its End (a job whose End is not after now releases them now).
//  2. Held reservations are put back in queue order; one that no longer fits
//     (inconsistent input) is marked Broken and placed afresh, in its queue
//     position, by the first compression pass.
//  3. Compression: in queue order, each held job is taken out of the profile
//     and put back at the earliest start that fits (respecting the policy's
//     lower bound) on the profile made of the running jobs and every other
//     reservation. Its own old slot is still free, so it never moves later;
//     it moves earlier when resources freed up early. Passes repeat until no
//     reservation moves (at most one pass per held job plus one; in
//     practice two or three), so every held job ends at the earliest start
//     that the other reservations allow.
//  4. Jobs without a reservation get one, in queue order, at the earliest
//     start that fits on the profile holding every reservation: a later job
//     may start before an earlier one (backfill, CBF only) only in a hole
//     where it delays no reservation.
//  5. The jobs whose reservation is now start now.
//
// Choices where SPEC §5 is silent:
//   - Compression goes in queue order and repeats to a fixed point. A job
//     that holds a reservation keeps its promise even when an earlier job
//     could have moved further forward without it: promises are never
//     broken to improve another job (see TestCompressionKeepsPromises).
//   - FCFS keeps promises the same way; with FCFS every reservation is at or
//     after the one of the job ahead.
//   - Holds are half-open intervals [start, end): a job ending at t frees
//     its processors for a job starting at t.
//   - A job with no held reservation queued ahead of one holding a
//     reservation is refused (an error) rather than reordered: new jobs
//     join the tail of the queue.
func schedule(backfill bool, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	held, err := checkInput(now, capacity, running, queue)
	if err != nil {
		return Plan{}, err
	}
	res := make([]Reservation, len(queue))
	prof, settled := compress(backfill, now, capacity, running, queue[:held], res)
	return plan(backfill, now, running, queue, held, res, prof, settled, buffers{}), nil
}

// plan books the jobs without a reservation (queue[held:]) on prof, which
// holds the running jobs and the held reservations res[:held], and makes the
// Plan. settled says the held reservations are all kept and at the earliest
// start the others allow: what ScheduleFrom needs to plan from this plan.
// The plan's Start list and inputs are made in buf's memory.
func plan(backfill bool, now time.Duration, running []Running, queue []Queued, held int, res []Reservation, prof *profile, settled bool, buf buffers) Plan {
	next := now
	if !backfill && held > 0 {
		next = res[held-1].Start
	}
	for i, q := range queue[held:] {
		s := prof.earliest(next, q.Procs, q.Walltime)
		res[held+i] = Reservation{ID: q.ID, Start: s, End: s + q.Walltime}
		prof.add(s, s+q.Walltime, -q.Procs)
		if !backfill {
			next = s
		}
	}
	p := Plan{Reservations: res, prof: prof, next: next}
	// First come, first served, no start is before the one ahead: those at
	// now come first.
	start := buf.start[:0]
	for i := range res {
		if r := &res[i]; r.Start == now {
			start = append(start, r.ID)
		} else if !backfill {
			break
		}
	}
	if len(start) > 0 { // nil when nothing starts
		p.Start = start
	}
	if settled {
		p.from = inputsOf(backfill, now, running, queue, p, buf.from)
	}
	return p
}

// seenPool recycles checkInput's set of queued IDs: a plan is made on every
// change of a cluster, and the set would be its largest allocation.
var seenPool = sync.Pool{New: func() any { return map[string]struct{}{} }}

// checkInput checks the input and returns how many queued jobs (a prefix of
// the queue) hold a reservation.
func checkInput(now time.Duration, capacity int, running []Running, queue []Queued) (int, error) {
	if capacity < 1 {
		return 0, fmt.Errorf("capacity %d is less than 1", capacity)
	}
	busy := 0
	for i, r := range running {
		if err := checkJob(r.Procs, r.Walltime, capacity); err != nil {
			return 0, fmt.Errorf("running[%d] (job %q): %w", i, r.ID, err)
		}
		if r.End() > now {
			busy += r.Procs
		}
	}
	if busy > capacity {
		return 0, fmt.Errorf("running: %d processors busy on a cluster of %d", busy, capacity)
	}
	seen := seenPool.Get().(map[string]struct{})
	defer func() {
		clear(seen)
		seenPool.Put(seen)
	}()
	held := 0
	for i, q := range queue {
		if err := checkJob(q.Procs, q.Walltime, capacity); err != nil {
			return 0, fmt.Errorf("queue[%d] (job %q): %w", i, q.ID, err)
		}
		if _, dup := seen[q.ID]; dup {
			return 0, fmt.Errorf("queue[%d]: duplicate job ID %q", i, q.ID)
		}
		seen[q.ID] = struct{}{}
		if q.Held {
			if held != i {
				return 0, fmt.Errorf("queue[%d] (job %q): holds a reservation behind a job without one", i, q.ID)
			}
			held++
		}
	}
	return held, nil
}

// runningFree returns the processors the running jobs leave free at now
// and appends the instants they release them (their End) to ds.
func runningFree(ds []delta, now time.Duration, capacity int, running []Running) (int, []delta) {
	free := capacity
	for _, r := range running {
		if r.End() > now {
			free -= r.Procs
			ds = append(ds, delta{r.End(), r.Procs})
		}
	}
	return free, ds
}

// compress books the held jobs' reservations (into res) on the profile the
// running jobs leave from now on, then moves them forward in queue order
// until none moves: a reservation never moves later than its promise; one
// that no longer fits is marked Broken. It returns the profile holding
// every reservation and whether the held jobs settled (settle).
//
// When every promise fits together (the profile holding them all is
// nowhere below 0, so each fits on the ones before it) the profile is made
// in one sweep over the holds' ends; otherwise they are booked one by one
// and those that do not fit are left out. In a pass, a job that could not
// start before its reservation even with its own hold taken out stays: the
// profile is the same as after taking it out and putting it back.
func compress(backfill bool, now time.Duration, capacity int, running []Running, held []Queued, res []Reservation) (*profile, bool) {
	// starts: the holds' starts, in queue order; ends: the running jobs'
	// and the holds' ends.
	buf := make([]delta, 0, len(running)+2*len(held))
	starts := buf[:len(held)]
	free, ends := runningFree(buf[len(held):len(held)], now, capacity, running)
	for i, q := range held {
		s := max(q.Reserved, now)
		starts[i] = delta{s, -q.Procs}
		ends = append(ends, delta{s + q.Walltime, q.Procs})
	}
	var placed []bool // nil: every hold is placed
	prof, least := profileOfDeltas(now, capacity, free, starts, ends)
	if least >= 0 {
		for i, q := range held {
			s := max(q.Reserved, now)
			res[i] = Reservation{ID: q.ID, Start: s, End: s + q.Walltime}
		}
	} else {
		placed = make([]bool, len(held))
		free, ends := runningFree(buf[:0], now, capacity, running)
		prof, _ = profileOfDeltas(now, capacity, free, nil, ends)
		for i, q := range held {
			s := max(q.Reserved, now)
			res[i] = Reservation{ID: q.ID, Start: s, End: s + q.Walltime}
			if prof.minFree(s, s+q.Walltime) >= q.Procs {
				prof.add(s, s+q.Walltime, -q.Procs)
				placed[i] = true
			} else {
				res[i].Broken = true
			}
		}
	}
	settled := settle(backfill, now, prof, held, res, placed, unsettled)
	return prof, settled && placed == nil
}

// unsettled is settle's changedTo when the reservations are not those of a
// settled plan: every job is checked.
const unsettled = time.Duration(math.MaxInt64)

// settle runs compression passes over the held jobs booked on prof (all of
// them when placed is nil, else those placed; the others get a reservation
// in their turn) until no reservation moves, and reports whether that
// happened with every promise kept.
//
// First come, first served, one pass is enough unless it took a job out
// from before its lower bound (the start of the job ahead; only an
// inconsistent input holds such a reservation): a job's check reads the
// profile from its lower bound to its start, and what the jobs behind it
// do later in the pass then lies at or after its start, so a second pass
// would find every job where the first left it.
//
// changedTo is unsettled, or says that the reservations are a settled
// plan's (ScheduleFrom: each at the earliest start the others and its lower
// bound allow) and that the profile has changed since only before
// changedTo. First come, first served, a job whose lower bound is at or
// after changedTo then stays where it is, and so does every job behind it:
// what it could start on from its lower bound on is what it was in the
// settled plan, and so is its lower bound (a job that moves ends earlier
// than it did, and its old end joins changedTo). The pass stops there.
func settle(backfill bool, now time.Duration, prof *profile, held []Queued, res []Reservation, placed []bool, changedTo time.Duration) bool {
	for pass := 0; pass <= len(held); pass++ {
		moved, broken := false, false
		once := !backfill // this pass is the last one (above)
		lb := now
		for i, q := range held {
			if !backfill && lb >= changedTo {
				break
			}
			s := res[i].Start
			in := placed == nil || placed[i]
			if in && lb > s {
				once = false
			}
			if in && lb <= s {
				// Taking the job out and putting it back at the earliest
				// start is moving its hold to the first start before it
				// that fits, if any.
				if t, ok := prof.fitBefore(lb, s, q.Procs, q.Walltime); ok {
					changedTo = max(changedTo, res[i].End)
					prof.move(s, res[i].End, t, t+q.Walltime, q.Procs)
					s, moved = t, true
					res[i].Start, res[i].End = s, s+q.Walltime
				}
			} else {
				if in {
					prof.add(res[i].Start, res[i].End, q.Procs)
					changedTo = max(changedTo, res[i].End)
				}
				s = prof.earliest(lb, q.Procs, q.Walltime)
				if !in || s != res[i].Start {
					moved = true
				}
				res[i].Start, res[i].End = s, s+q.Walltime
				prof.add(s, s+q.Walltime, -q.Procs)
				if placed != nil {
					placed[i] = true
				}
			}
			if s > max(q.Reserved, now) {
				res[i].Broken = true
			}
			broken = broken || res[i].Broken
			if !backfill {
				lb = s
			}
		}
		if !moved || once {
			return !broken
		}
	}
	return false
}

// FCFS is first come, first served: jobs start in queue order, each at the
// earliest instant at or after the start of the job ahead where its
// processors are free for its whole walltime. It is CBF without backfilling
// (SPEC §5); see schedule for the shared rule.
type FCFS struct{}

// Name is "fcfs".
func (FCFS) Name() string { return "fcfs" }

// Schedule plans the queue first come, first served.
func (FCFS) Schedule(now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	return schedule(false, now, capacity, running, queue)
}

// CBF is Conservative Backfilling: every job gets a reservation when it is
// queued, at the earliest instant where it fits without delaying any earlier
// reservation, and moves forward (never back) when resources free up early.
// See schedule for the rule and the choices where SPEC §5 is silent.
type CBF struct{}

// Name is "cbf".
func (CBF) Name() string { return "cbf" }

// Schedule plans the queue with conservative backfilling.
func (CBF) Schedule(now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	return schedule(true, now, capacity, running, queue)
}
