package batch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

const propertyRuns = 400

// interval is a job's hold on processors, for the brute-force oracles below,
// which do not use the package's profile.
type interval struct {
	from, to time.Duration
	procs    int
}

// usageAt sums the processors held at instant t.
func usageAt(ivs []interval, t time.Duration) int {
	u := 0
	for _, iv := range ivs {
		if iv.from <= t && t < iv.to {
			u += iv.procs
		}
	}
	return u
}

// fitsAt says whether procs processors are free on [s, s+d) besides ivs:
// usage only rises at an interval's start, so checking s and every start
// inside the window is enough.
func fitsAt(ivs []interval, capacity int, s, d time.Duration, procs int) bool {
	if usageAt(ivs, s)+procs > capacity {
		return false
	}
	for _, iv := range ivs {
		if iv.from > s && iv.from < s+d && usageAt(ivs, iv.from)+procs > capacity {
			return false
		}
	}
	return true
}

// bruteEarliest is the earliest s >= lb where the job fits: candidates are
// lb and every interval end after it.
func bruteEarliest(ivs []interval, capacity int, lb, d time.Duration, procs int) time.Duration {
	cands := []time.Duration{lb}
	for _, iv := range ivs {
		if iv.to > lb {
			cands = append(cands, iv.to)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a] < cands[b] })
	for _, s := range cands {
		if fitsAt(ivs, capacity, s, d, procs) {
			return s
		}
	}
	panic("no fit")
}

// simJob is a job of the simulated cluster: its walltime and its actual run
// time (at most the walltime; the cluster kills it at the walltime).
type simJob struct {
	id            string
	procs         int
	wall, runtime time.Duration
	start         time.Duration
}

// TestScheduleProperties replays random job streams through each policy the
// way a cluster actor would (jobs arrive, start when the plan says, end at
// their actual run time or are killed at their walltime; the planner is
// called at every event) and checks, at every plan:
//   - capacity: running jobs plus reservations never hold more processors
//     than the cluster at any instant;
//   - promises: a held reservation never moves later and is never Broken;
//   - the jobs started now are exactly those reserved now;
//   - FCFS keeps queue order; every reservation is at or after now;
//   - first reservations never delay an earlier job: removing a job that
//     got its first reservation in this plan leaves every earlier job's
//     reservation unchanged (brute-force re-check);
//   - compression is complete: each held job starts at the earliest instant
//     that the running jobs and the other reservations allow (brute force);
//   - Plan.Completion equals EstimateCompletion for a random candidate.
func TestScheduleProperties(t *testing.T) {
	for _, p := range []Policy{FCFS{}, CBF{}} {
		var st simStats
		for run := 0; run < propertyRuns; run++ {
			rng := rand.New(rand.NewPCG(uint64(run), 18))
			if err := simulate(p, rng, &st); err != nil {
				t.Fatalf("%s, run %d: %v", p.Name(), run, err)
			}
		}
		// The runs must exercise what the properties are about.
		t.Logf("%s: %d plans, %d reservations moved forward, %d backfills, %d plans from the previous one (%d after an early end)",
			p.Name(), st.plans, st.forward, st.backfills, st.follows, st.freed)
		if st.follows < st.plans/2 || st.freed < 100 {
			t.Errorf("%s: %d of %d plans made from the previous one, %d after an early end", p.Name(), st.follows, st.plans, st.freed)
		}
		if st.forward < 100 {
			t.Errorf("%s: only %d reservations moved forward on early finishes", p.Name(), st.forward)
		}
		if (p.Name() == "cbf") != (st.backfills > 0) {
			t.Errorf("%s: %d backfills", p.Name(), st.backfills)
		}
	}
}

// simStats counts what the simulated runs exercised.
type simStats struct {
	plans     int
	forward   int // held reservations that moved earlier
	backfills int // jobs started now while a job ahead of them waits
	follows   int // plans made from the previous one (ScheduleFrom)
	freed     int // of which with processors freed early
}

func simulate(p Policy, rng *rand.Rand, st *simStats) error {
	capacity := 1 + rng.IntN(16)
	var arrivals []simJob
	at := time.Duration(0)
	var times []time.Duration
	for i := range 5 + rng.IntN(30) {
		at += sec(rng.IntN(40))
		wall := sec(1 + rng.IntN(100))
		rt := wall
		if rng.IntN(3) > 0 {
			rt = sec(1 + rng.IntN(int(wall/time.Second)))
		}
		arrivals = append(arrivals, simJob{id: fmt.Sprintf("j%d", i), procs: 1 + rng.IntN(capacity), wall: wall, runtime: rt})
		times = append(times, at)
	}
	var running []simJob
	var queue []Queued
	byID := map[string]simJob{}
	now := time.Duration(0)
	next := 0
	var prev, spare Plan
	for steps := 0; next < len(arrivals) || len(running) > 0 || len(queue) > 0; steps++ {
		if steps > 10000 {
			return fmt.Errorf("no progress at %v", now)
		}
		// Jobs ending now (actual end or walltime kill) leave.
		kept := running[:0]
		for _, r := range running {
			if r.start+min(r.runtime, r.wall) > now {
				kept = append(kept, r)
			}
		}
		running = kept
		newFrom := len(queue)
		for next < len(arrivals) && times[next] <= now {
			a := arrivals[next]
			byID[a.id] = a
			queue = append(queue, Queued{ID: a.id, Procs: a.procs, Walltime: a.wall})
			next++
		}
		rs := make([]Running, len(running))
		for i, r := range running {
			rs[i] = Running{ID: r.id, Procs: r.procs, Start: r.start, Walltime: r.wall}
		}
		plan, err := p.Schedule(now, capacity, rs, queue)
		if err != nil {
			return err
		}
		from, err := checkFrom(p.(Incremental), prev, spare, now, capacity, rs, queue, plan, st)
		if err != nil {
			return fmt.Errorf("at %v: %w", now, err)
		}
		prev, spare = from, prev
		if err := checkProperties(p, now, capacity, rs, queue, newFrom, plan, rng); err != nil {
			return fmt.Errorf("at %v: %w", now, err)
		}
		st.plans++
		waiting := false
		for i, r := range plan.Reservations {
			if queue[i].Held && r.Start < max(queue[i].Reserved, now) {
				st.forward++
			}
			if r.Start > now {
				waiting = true
			} else if waiting {
				st.backfills++
			}
		}
		// Apply the plan.
		started := map[string]bool{}
		for _, id := range plan.Start {
			started[id] = true
			j := byID[id]
			j.start = now
			running = append(running, j)
		}
		var q []Queued
		for i, r := range plan.Reservations {
			if !started[r.ID] {
				j := queue[i]
				j.Held, j.Reserved = true, r.Start
				q = append(q, j)
			}
		}
		queue = q
		// Next event: an arrival, an end, or a reservation.
		ev := time.Duration(1 << 62)
		if next < len(arrivals) {
			ev = times[next]
		}
		for _, r := range running {
			ev = min(ev, r.start+min(r.runtime, r.wall))
		}
		for _, q := range queue {
			ev = min(ev, q.Reserved)
		}
		if ev <= now && len(plan.Start) == 0 {
			return fmt.Errorf("next event %v is not after now %v", ev, now)
		}
		now = max(ev, now)
	}
	return nil
}

func checkProperties(p Policy, now time.Duration, capacity int, running []Running, queue []Queued, newFrom int, plan Plan, rng *rand.Rand) error {
	if len(plan.Reservations) != len(queue) {
		return fmt.Errorf("%d reservations for %d queued jobs", len(plan.Reservations), len(queue))
	}
	var base []interval // running jobs from now on
	for _, r := range running {
		if r.End() > now {
			base = append(base, interval{now, r.End(), r.Procs})
		}
	}
	all := append([]interval(nil), base...)
	startSet := map[string]bool{}
	for _, id := range plan.Start {
		startSet[id] = true
	}
	for i, r := range plan.Reservations {
		q := queue[i]
		if r.ID != q.ID || r.End != r.Start+q.Walltime {
			return fmt.Errorf("reservation %d = %+v for job %+v", i, r, q)
		}
		if r.Start < now {
			return fmt.Errorf("job %s reserved at %v before now", r.ID, r.Start)
		}
		if q.Held && (r.Start > max(q.Reserved, now) || r.Broken) {
			return fmt.Errorf("job %s moved later: %v -> %v (broken %v)", r.ID, q.Reserved, r.Start, r.Broken)
		}
		if startSet[r.ID] != (r.Start == now) {
			return fmt.Errorf("job %s reserved at %v, in Start: %v", r.ID, r.Start, startSet[r.ID])
		}
		if p.Name() == "fcfs" && i > 0 && r.Start < plan.Reservations[i-1].Start {
			return fmt.Errorf("fcfs: job %s at %v before the job ahead at %v", r.ID, r.Start, plan.Reservations[i-1].Start)
		}
		all = append(all, interval{r.Start, r.End, q.Procs})
	}
	for _, iv := range all {
		if u := usageAt(all, iv.from); u > capacity {
			return fmt.Errorf("%d processors used at %v on a cluster of %d", u, iv.from, capacity)
		}
	}
	// Compression is complete.
	for i, r := range plan.Reservations {
		if !queue[i].Held {
			continue
		}
		others := append(append([]interval(nil), all[:len(base)+i]...), all[len(base)+i+1:]...)
		lb := now
		if p.Name() == "fcfs" && i > 0 {
			lb = plan.Reservations[i-1].Start
		}
		if s := bruteEarliest(others, capacity, lb, queue[i].Walltime, queue[i].Procs); s != r.Start {
			return fmt.Errorf("held job %s at %v could start at %v", r.ID, r.Start, s)
		}
	}
	// First reservations never delay earlier jobs.
	for k := newFrom; k < len(queue); k++ {
		without := append(append([]Queued(nil), queue[:k]...), queue[k+1:]...)
		alt, err := p.Schedule(now, capacity, running, without)
		if err != nil {
			return err
		}
		for i := range k {
			if alt.Reservations[i] != plan.Reservations[i] {
				return fmt.Errorf("removing new job %s changes job %s: %+v -> %+v", queue[k].ID, queue[i].ID, plan.Reservations[i], alt.Reservations[i])
			}
		}
	}
	// Completion agrees with EstimateCompletion.
	cand := Queued{ID: "candidate", Procs: 1 + rng.IntN(capacity), Walltime: sec(1 + rng.IntN(100))}
	c1, err := plan.Completion(cand.Procs, cand.Walltime)
	if err != nil {
		return err
	}
	c2, err := EstimateCompletion(p, now, capacity, running, queue, cand)
	if err != nil {
		return err
	}
	if c1 != c2 {
		return fmt.Errorf("Completion %v, EstimateCompletion %v", c1, c2)
	}
	return nil
}

// fitBefore says whether a held job could start before its hold, and
// where: exactly when earliest, on the profile with the hold taken out,
// finds a start before it, and that start (lb at, before or after the
// hold's start). move gives the profile of taking the hold out and putting
// it back elsewhere, later or earlier, overlapping or apart.
func TestFitsBeforeMatchesEarliest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const capacity = 8
	for run := range 4000 {
		p, s, procs, d := randomHold(rng, capacity)
		lb := time.Duration(rng.IntN(25))
		got, ok := p.fitBefore(lb, s, procs, d)
		out := &profile{capacity: capacity, steps: slices.Clone(p.steps)}
		out.add(s, s+d, procs)
		want := out.earliest(lb, procs, d)
		if wantOK := lb < s && want < s; ok != wantOK || (ok && got != want) {
			t.Fatalf("run %d: fitBefore(lb %v, s %v, procs %d, d %v) = %v, %v; earliest from lb %v; steps %v", run, lb, s, procs, d, got, ok, want, p.steps)
		}
		ns := time.Duration(rng.IntN(30))
		out.add(ns, ns+d, -procs)
		p.move(s, s+d, ns, ns+d, procs)
		if !slices.Equal(p.steps, out.steps) {
			t.Fatalf("run %d: move [%v, %v) to [%v, %v) of %d: %v, taken out and put back %v", run, s, s+d, ns, ns+d, procs, p.steps, out.steps)
		}
	}
}

// randomHold makes a profile of a few random holds that fit and books one
// more of procs processors for d at s, the earliest start from a random
// instant.
func randomHold(rng *rand.Rand, capacity int) (p *profile, s time.Duration, procs int, d time.Duration) {
	p = &profile{capacity: capacity, steps: []step{{at: 0, free: capacity}}}
	for range rng.IntN(6) {
		from, to := time.Duration(rng.IntN(20)), time.Duration(21+rng.IntN(10))
		to = from + (to-from)%11 + 1
		if procs := 1 + rng.IntN(capacity); p.minFree(from, to) >= procs {
			p.add(from, to, -procs)
		}
	}
	procs, d = 1+rng.IntN(capacity), time.Duration(1+rng.IntN(8))
	s = p.earliest(time.Duration(rng.IntN(20)), procs, d) // a hold that fits
	p.add(s, s+d, -procs)
	return p, s, procs, d
}
