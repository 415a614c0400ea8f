package batch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The planner before it built its profile in one sweep and skipped the
// jobs that cannot move (refSchedule and its helpers, kept verbatim): the
// planner must give the same plans, the same errors and the same
// completions on every input, consistent or not.

func refNewProfile(origin time.Duration, capacity int) *profile {
	return &profile{capacity: capacity, steps: []step{{at: origin, free: capacity}}}
}

func refSchedule(backfill bool, now time.Duration, capacity int, running []Running, queue []Queued) (Plan, error) {
	prof, held, err := refProfileOf(now, capacity, running, queue)
	if err != nil {
		return Plan{}, err
	}
	res := make([]Reservation, len(queue))
	refCompress(backfill, now, prof, queue[:held], res)
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
	plan := Plan{Reservations: res, prof: prof, next: next}
	for _, r := range res {
		if r.Start == now {
			plan.Start = append(plan.Start, r.ID)
		}
	}
	return plan, nil
}

// profileOf checks the input and returns the availability profile the
// running jobs leave from now on, and how many queued jobs (a prefix of
// the queue) hold a reservation.
func refProfileOf(now time.Duration, capacity int, running []Running, queue []Queued) (*profile, int, error) {
	if capacity < 1 {
		return nil, 0, fmt.Errorf("capacity %d is less than 1", capacity)
	}
	prof := refNewProfile(now, capacity)
	busy := 0
	for i, r := range running {
		if err := checkJob(r.Procs, r.Walltime, capacity); err != nil {
			return nil, 0, fmt.Errorf("running[%d] (job %q): %w", i, r.ID, err)
		}
		if r.End() > now {
			busy += r.Procs
			prof.add(now, r.End(), -r.Procs)
		}
	}
	if busy > capacity {
		return nil, 0, fmt.Errorf("running: %d processors busy on a cluster of %d", busy, capacity)
	}
	seen := make(map[string]bool, len(queue))
	held := 0
	for i, q := range queue {
		if err := checkJob(q.Procs, q.Walltime, capacity); err != nil {
			return nil, 0, fmt.Errorf("queue[%d] (job %q): %w", i, q.ID, err)
		}
		if seen[q.ID] {
			return nil, 0, fmt.Errorf("queue[%d]: duplicate job ID %q", i, q.ID)
		}
		seen[q.ID] = true
		if q.Held {
			if held != i {
				return nil, 0, fmt.Errorf("queue[%d] (job %q): holds a reservation behind a job without one", i, q.ID)
			}
			held++
		}
	}
	return prof, held, nil
}

// compress books the held jobs' reservations on prof (into res), then moves
// them forward in queue order until none moves: a reservation never moves
// later than its promise; one that no longer fits is marked Broken.
func refCompress(backfill bool, now time.Duration, prof *profile, held []Queued, res []Reservation) {
	placed := make([]bool, len(held))
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
	for pass := 0; pass <= len(held); pass++ {
		moved := false
		lb := now
		for i, q := range held {
			if placed[i] {
				prof.add(res[i].Start, res[i].End, q.Procs)
			}
			s := prof.earliest(lb, q.Procs, q.Walltime)
			if !placed[i] || s != res[i].Start {
				moved = true
			}
			if s > max(q.Reserved, now) {
				res[i].Broken = true
			}
			res[i].Start, res[i].End = s, s+q.Walltime
			prof.add(s, s+q.Walltime, -q.Procs)
			placed[i] = true
			if !backfill {
				lb = s
			}
		}
		if !moved {
			return
		}
	}
}

func TestScheduleSameAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 3000 {
		capacity := 1 + rng.IntN(64)
		now := sec(rng.IntN(100))
		var running []Running
		for i := range rng.IntN(12) {
			procs := 1 + rng.IntN(capacity)
			if run%50 == 0 {
				procs = rng.IntN(capacity + 2) // errors too
			}
			running = append(running, Running{ID: fmt.Sprintf("r%d", i), Procs: procs, Start: sec(rng.IntN(120)), Walltime: sec(1 + rng.IntN(200))})
		}
		// Keep the running jobs within the capacity, but not always.
		if run%7 != 0 {
			busy, kept := 0, running[:0]
			for _, r := range running {
				if r.End() > now && busy+r.Procs > capacity {
					continue
				}
				if r.End() > now {
					busy += r.Procs
				}
				kept = append(kept, r)
			}
			running = kept
		}
		var queue []Queued
		for i := range rng.IntN(25) {
			queue = append(queue, Queued{ID: fmt.Sprintf("q%d", i), Procs: 1 + rng.IntN(capacity), Walltime: sec(1 + rng.IntN(200))})
		}
		for _, p := range []Policy{FCFS{}, CBF{}} {
			backfill := p.Name() == "cbf"
			q := append([]Queued(nil), queue...)
			// Hold the reservations of a plan made earlier, sometimes with
			// the state changed since (jobs ended, started late, promises
			// moved) so that some promises no longer fit.
			if plan, err := refSchedule(backfill, 0, capacity, nil, q); err == nil && rng.IntN(4) != 0 {
				nheld := rng.IntN(len(q) + 1)
				for i := range nheld {
					q[i].Held, q[i].Reserved = true, plan.Reservations[i].Start
					if rng.IntN(10) == 0 {
						q[i].Reserved = sec(rng.IntN(300))
					}
				}
			}
			if run%97 == 0 && len(q) > 1 {
				q[1].ID = q[0].ID
			}
			want, werr := refSchedule(backfill, now, capacity, running, q)
			got, gerr := p.Schedule(now, capacity, running, q)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) {
				t.Fatalf("run %d %s: error %v, want %v", run, p.Name(), gerr, werr)
			}
			if werr != nil {
				continue
			}
			if !reflect.DeepEqual(got.Start, want.Start) || !reflect.DeepEqual(got.Reservations, want.Reservations) || got.next != want.next {
				t.Fatalf("run %d %s: plan\n%+v\nwant\n%+v", run, p.Name(), got, want)
			}
			for range 5 {
				procs, wall := 1+rng.IntN(capacity), sec(1+rng.IntN(300))
				gc, _ := got.Completion(procs, wall)
				wc, _ := want.Completion(procs, wall)
				if gc != wc {
					t.Fatalf("run %d %s: completion of %d x %v %v, want %v", run, p.Name(), procs, wall, gc, wc)
				}
			}
		}
	}
}

func BenchmarkScheduleReference(b *testing.B) {
	for _, p := range []Policy{FCFS{}, CBF{}} {
		running, queue := benchState(b, p, 100)
		b.Run(fmt.Sprintf("%s/queue=100", p.Name()), func(b *testing.B) {
			for b.Loop() {
				if _, err := refSchedule(p.Name() == "cbf", time.Second, 640, running, queue); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
