package batch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// checkFrom checks that ScheduleFrom(prev, spare) gives what Schedule gave
// (want, made on the same inputs), down to the profile Completion reads,
// and leaves prev as it was; it counts the plans made from prev and
// returns the plan ScheduleFrom made.
func checkFrom(p Incremental, prev, spare Plan, now time.Duration, capacity int, running []Running, queue []Queued, want Plan, st *simStats) (Plan, error) {
	before := deepCopy(prev)
	got, err := p.ScheduleFrom(prev, spare, now, capacity, running, queue)
	if err != nil {
		return Plan{}, fmt.Errorf("ScheduleFrom: %v", err)
	}
	if err := samePlan(got, want); err != nil {
		return Plan{}, err
	}
	if err := samePlan(prev, before); err != nil {
		return Plan{}, fmt.Errorf("ScheduleFrom changed prev: %v", err)
	}
	if _, _, freedTo, ok := prev.follow(p.Name() == "cbf", now, capacity, running, queue, nil); ok {
		st.follows++
		if freedTo > now {
			st.freed++
		}
	}
	return got, nil
}

// deepCopy copies every slice a plan holds.
func deepCopy(p Plan) Plan {
	c := p
	c.Start = slices.Clone(p.Start)
	c.Reservations = slices.Clone(p.Reservations)
	if p.prof != nil {
		c.prof = &profile{capacity: p.prof.capacity, steps: slices.Clone(p.prof.steps)}
	}
	if p.from != nil {
		in := *p.from
		in.running, in.procs = slices.Clone(in.running), slices.Clone(in.procs)
		c.from = &in
	}
	return c
}

func samePlan(got, want Plan) error {
	if !reflect.DeepEqual(got.Start, want.Start) || !reflect.DeepEqual(got.Reservations, want.Reservations) || got.next != want.next {
		return fmt.Errorf("ScheduleFrom's plan\n%+v\nSchedule's\n%+v", got, want)
	}
	if !reflect.DeepEqual(got.prof, want.prof) {
		return fmt.Errorf("ScheduleFrom's profile %+v, Schedule's %+v", got.prof, want.prof)
	}
	if (got.from == nil) != (want.from == nil) || (got.from != nil && !sameInputs(got.from, want.from)) {
		return fmt.Errorf("ScheduleFrom's inputs %+v, Schedule's %+v", got.from, want.from)
	}
	return nil
}

func sameInputs(a, b *inputs) bool {
	return a.backfill == b.backfill && a.now == b.now && slices.Equal(a.running, b.running) && slices.Equal(a.procs, b.procs)
}

// TestScheduleFromPerturbed makes a plan, applies it as a cluster would
// (the jobs it starts run, the others hold their reservations), then
// changes the state at random, the ways a cluster does (time passes,
// running jobs end, queued jobs are cancelled, new jobs arrive) and the
// ways it does not (a promise moved, a job resized, the queue reordered, a
// duplicate or malformed job, another capacity, the other policy's plan):
// ScheduleFrom must give Schedule's plan or error every time.
func TestScheduleFromPerturbed(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	var follows, freed, errs int
	for run := range 4000 {
		capacity := 1 + rng.IntN(32)
		now0 := sec(rng.IntN(50))
		var running []Running
		busy := 0
		for i := range rng.IntN(8) {
			r := Running{ID: fmt.Sprintf("r%d", i), Procs: 1 + rng.IntN(capacity), Start: sec(rng.IntN(50)), Walltime: sec(1 + rng.IntN(100))}
			if r.End() > now0 && busy+r.Procs > capacity {
				continue
			}
			if r.End() > now0 {
				busy += r.Procs
			}
			running = append(running, r)
		}
		var queue []Queued
		for i := range rng.IntN(20) {
			queue = append(queue, Queued{ID: fmt.Sprintf("q%d", i), Procs: 1 + rng.IntN(capacity), Walltime: sec(1 + rng.IntN(100))})
		}
		for _, p := range []Incremental{FCFS{}, CBF{}} {
			prev, err := p.Schedule(now0, capacity, running, queue)
			if err != nil {
				t.Fatal(err)
			}
			older, _ := p.Schedule(now0, capacity, running[:len(running)/2], queue[:len(queue)/2])
			// Apply prev.
			rs := append([]Running(nil), running...)
			var q []Queued
			for i, r := range prev.Reservations {
				if r.Start == now0 {
					rs = append(rs, Running{ID: r.ID, Procs: queue[i].Procs, Start: now0, Walltime: queue[i].Walltime})
					continue
				}
				j := queue[i]
				j.Held, j.Reserved = true, r.Start
				q = append(q, j)
			}
			now := now0 + sec(rng.IntN(3)*rng.IntN(40))
			capNow := capacity
			// Changes a cluster makes.
			if rng.IntN(2) == 0 && len(rs) > 0 { // a running job ended
				i := rng.IntN(len(rs))
				rs = append(rs[:i:i], rs[i+1:]...)
			}
			if rng.IntN(3) == 0 && len(q) > 0 { // a queued job cancelled
				i := rng.IntN(len(q))
				q = append(q[:i:i], q[i+1:]...)
			}
			for i := range rng.IntN(4) { // arrivals
				q = append(q, Queued{ID: fmt.Sprintf("n%d", i), Procs: 1 + rng.IntN(capacity), Walltime: sec(1 + rng.IntN(100))})
			}
			// Changes it does not make.
			switch rng.IntN(12) {
			case 0:
				if len(q) > 0 {
					q[rng.IntN(len(q))].Reserved += sec(rng.IntN(5) - 2)
				}
			case 1:
				if len(q) > 0 {
					q[rng.IntN(len(q))].Procs = rng.IntN(capacity + 2)
				}
			case 2:
				if len(q) > 1 {
					q[0], q[1] = q[1], q[0]
				}
			case 3:
				if len(q) > 1 {
					q[len(q)-1].ID = q[0].ID
				}
			case 4:
				capNow = capacity + rng.IntN(3) - 1
			case 5:
				if len(rs) > 0 {
					rs[rng.IntN(len(rs))].Walltime += sec(1)
				}
			case 6:
				rs = append(rs, Running{ID: "x", Procs: 1 + rng.IntN(capacity), Start: now, Walltime: sec(10)})
			case 7:
				now = now0 - sec(1)
			case 8:
				if len(q) > 0 {
					q[len(q)-1].Held = !q[len(q)-1].Held
				}
			}
			other := Incremental(CBF{})
			if p.Name() == "cbf" {
				other = FCFS{}
			}
			for _, from := range []Incremental{p, other} {
				want, werr := p.Schedule(now, capNow, rs, q)
				if from == other {
					prevOther, _ := other.Schedule(now0, capacity, running, queue)
					prev = prevOther
				}
				// The plan before prev lends its memory; prev itself
				// must not (it is still read).
				spare := []Plan{{}, prev, older}[rng.IntN(3)]
				got, gerr := p.ScheduleFrom(prev, spare, now, capNow, rs, q)
				if fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Fatalf("run %d %s: ScheduleFrom's error %v, Schedule's %v", run, p.Name(), gerr, werr)
				}
				if werr != nil {
					errs++
					continue
				}
				if err := samePlan(got, want); err != nil {
					t.Fatalf("run %d %s: %v", run, p.Name(), err)
				}
				if _, _, fr, ok := prev.follow(p.Name() == "cbf", now, capNow, rs, q, nil); ok {
					follows++
					if fr > now {
						freed++
					}
				}
			}
		}
	}
	t.Logf("%d plans from the previous one (%d after a release), %d errors", follows, freed, errs)
	if follows < 2000 || freed < 1000 || errs < 100 {
		t.Errorf("%d plans from the previous one, %d after a release, %d errors: the perturbations miss what they are about", follows, freed, errs)
	}
}
