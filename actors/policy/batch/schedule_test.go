package batch

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// want is a hand-computed reservation: job ID and start in seconds.
type want struct {
	id    string
	start int
}

func checkPlan(t *testing.T, plan Plan, queue []Queued, now time.Duration, ws []want, starts []string) {
	t.Helper()
	if len(plan.Reservations) != len(ws) {
		t.Fatalf("got %d reservations, want %d", len(plan.Reservations), len(ws))
	}
	for i, w := range ws {
		r := plan.Reservations[i]
		if r.ID != w.id || r.Start != sec(w.start) || r.End != sec(w.start)+queue[i].Walltime || r.Broken {
			t.Errorf("reservation %d = %+v, want %s at %ds ending %v", i, r, w.id, w.start, sec(w.start)+queue[i].Walltime)
		}
	}
	if !reflect.DeepEqual(plan.Start, starts) {
		t.Errorf("start now = %v, want %v", plan.Start, starts)
	}
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name     string
		policy   Policy
		now      int
		capacity int
		running  []Running
		queue    []Queued
		want     []want
		start    []string
	}{
		{
			// (a) A (4 procs, walltime end 100) ended at 10. Held
			// reservations B@100, C@150, D@100 (D backfilled next to B)
			// move forward: B and D start now, C to 60 when B ends.
			name: "cbf early finish moves jobs forward", policy: CBF{}, now: 10, capacity: 4,
			queue: []Queued{
				{ID: "B", Procs: 2, Walltime: sec(50), Held: true, Reserved: sec(100)},
				{ID: "C", Procs: 4, Walltime: sec(20), Held: true, Reserved: sec(150)},
				{ID: "D", Procs: 2, Walltime: sec(30), Held: true, Reserved: sec(100)},
			},
			want:  []want{{"B", 10}, {"C", 60}, {"D", 10}},
			start: []string{"B", "D"},
		},
		{
			// (a) the same under FCFS, whose earlier plan was B@100,
			// C@150, D@170: B starts now, C at 60, D after C at 80.
			name: "fcfs early finish moves jobs forward in order", policy: FCFS{}, now: 10, capacity: 4,
			queue: []Queued{
				{ID: "B", Procs: 2, Walltime: sec(50), Held: true, Reserved: sec(100)},
				{ID: "C", Procs: 4, Walltime: sec(20), Held: true, Reserved: sec(150)},
				{ID: "D", Procs: 2, Walltime: sec(30), Held: true, Reserved: sec(170)},
			},
			want:  []want{{"B", 10}, {"C", 60}, {"D", 80}},
			start: []string{"B"},
		},
		{
			// Nothing finished early: a held plan is a fixed point.
			name: "cbf held plan unchanged", policy: CBF{}, now: 10, capacity: 4,
			running: []Running{{ID: "A", Procs: 4, Start: 0, Walltime: sec(100)}},
			queue: []Queued{
				{ID: "B", Procs: 2, Walltime: sec(50), Held: true, Reserved: sec(100)},
				{ID: "C", Procs: 4, Walltime: sec(20), Held: true, Reserved: sec(150)},
				{ID: "D", Procs: 2, Walltime: sec(30), Held: true, Reserved: sec(100)},
			},
			want: []want{{"B", 100}, {"C", 150}, {"D", 100}},
		},
		{
			// (b) A holds 2 of 4 until 100, B needs all 4 at 100. A short
			// narrow job C (2 procs, 60 s) ends before 100: it jumps.
			name: "cbf short narrow job backfills", policy: CBF{}, now: 0, capacity: 4,
			running: []Running{{ID: "A", Procs: 2, Start: 0, Walltime: sec(100)}},
			queue: []Queued{
				{ID: "B", Procs: 4, Walltime: sec(50)},
				{ID: "C", Procs: 2, Walltime: sec(60)},
			},
			want:  []want{{"B", 100}, {"C", 0}},
			start: []string{"C"},
		},
		{
			// (b) a long narrow job D (2 procs, 150 s) would delay B's
			// reservation at 100: it waits until B ends at 150.
			name: "cbf long narrow job must not delay a reservation", policy: CBF{}, now: 0, capacity: 4,
			running: []Running{{ID: "A", Procs: 2, Start: 0, Walltime: sec(100)}},
			queue: []Queued{
				{ID: "B", Procs: 4, Walltime: sec(50)},
				{ID: "D", Procs: 2, Walltime: sec(150)},
			},
			want: []want{{"B", 100}, {"D", 150}},
		},
		{
			// Control for the case above: without B, D starts now.
			name: "cbf long narrow job alone starts", policy: CBF{}, now: 0, capacity: 4,
			running: []Running{{ID: "A", Procs: 2, Start: 0, Walltime: sec(100)}},
			queue:   []Queued{{ID: "D", Procs: 2, Walltime: sec(150)}},
			want:    []want{{"D", 0}},
			start:   []string{"D"},
		},
		{
			// (b) exact fit: C ends at 100 exactly when B starts.
			name: "cbf backfill ending at the reservation", policy: CBF{}, now: 0, capacity: 4,
			running: []Running{{ID: "A", Procs: 2, Start: 0, Walltime: sec(100)}},
			queue: []Queued{
				{ID: "B", Procs: 4, Walltime: sec(50)},
				{ID: "C", Procs: 2, Walltime: sec(100)},
			},
			want:  []want{{"B", 100}, {"C", 0}},
			start: []string{"C"},
		},
		{
			// (c) capacity 10, R holds 6 until 40. CBF: J2 fills the hole
			// before J1, J3 runs beside J1, J4 needs the whole cluster.
			name: "cbf queue", policy: CBF{}, now: 0, capacity: 10,
			running: []Running{{ID: "R", Procs: 6, Start: 0, Walltime: sec(40)}},
			queue:   queueC(),
			want:    []want{{"J1", 40}, {"J2", 0}, {"J3", 40}, {"J4", 140}},
			start:   []string{"J2"},
		},
		{
			// (c) the same queue under FCFS: no job passes the one ahead.
			name: "fcfs queue", policy: FCFS{}, now: 0, capacity: 10,
			running: []Running{{ID: "R", Procs: 6, Start: 0, Walltime: sec(40)}},
			queue:   queueC(),
			want:    []want{{"J1", 40}, {"J2", 70}, {"J3", 70}, {"J4", 170}},
		},
		{
			// Kill rule: a running job whose walltime ends now releases
			// its processors now; one that started 10 s ago holds them
			// until its walltime end, whatever its actual run time.
			name: "walltime end frees processors", policy: CBF{}, now: 100, capacity: 4,
			running: []Running{
				{ID: "A", Procs: 2, Start: 0, Walltime: sec(100)},
				{ID: "E", Procs: 2, Start: sec(90), Walltime: sec(30)},
			},
			queue: []Queued{{ID: "B", Procs: 2, Walltime: sec(5)}, {ID: "C", Procs: 4, Walltime: sec(5)}},
			want:  []want{{"B", 100}, {"C", 120}},
			start: []string{"B"},
		},
		{
			// A reservation in the past counts as now.
			name: "past reservation starts now", policy: CBF{}, now: 50, capacity: 4,
			queue: []Queued{{ID: "B", Procs: 4, Walltime: sec(5), Held: true, Reserved: sec(40)}},
			want:  []want{{"B", 50}},
			start: []string{"B"},
		},
		{
			name: "empty queue", policy: FCFS{}, now: 0, capacity: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := tc.policy.Schedule(sec(tc.now), tc.capacity, tc.running, tc.queue)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, plan, tc.queue, sec(tc.now), tc.want, tc.start)
		})
	}
}

func queueC() []Queued {
	return []Queued{
		{ID: "J1", Procs: 8, Walltime: sec(30)},
		{ID: "J2", Procs: 4, Walltime: sec(40)},
		{ID: "J3", Procs: 2, Walltime: sec(100)},
		{ID: "J4", Procs: 10, Walltime: sec(10)},
	}
}

// TestCompressionKeepsPromises documents a choice: capacity 3, R1 (2 procs)
// ended early at 10, R2 (1 proc) holds until 20. i (3 procs) held 100, j
// (1 proc, 50 s) held 20 in the hole beside R1. Compression moves j to now
// (10..60) and i to 60, the earliest j's promise allows; without j, i would
// start at 20. A held reservation is a promise and is not given up to move
// an earlier job further forward, so "removing a backfilled job never makes
// an earlier reservation earlier" holds only for jobs getting their first
// reservation (see the property test), not across compressions.
func TestCompressionKeepsPromises(t *testing.T) {
	running := []Running{{ID: "R2", Procs: 1, Start: 0, Walltime: sec(20)}}
	queue := []Queued{
		{ID: "i", Procs: 3, Walltime: sec(10), Held: true, Reserved: sec(100)},
		{ID: "j", Procs: 1, Walltime: sec(50), Held: true, Reserved: sec(20)},
	}
	plan, err := CBF{}.Schedule(sec(10), 3, running, queue)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, plan, queue, sec(10), []want{{"i", 60}, {"j", 10}}, []string{"j"})
	plan, err = CBF{}.Schedule(sec(10), 3, running, queue[:1])
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, plan, queue, sec(10), []want{{"i", 20}}, nil)
}

func TestBrokenReservation(t *testing.T) {
	// B was planned at 0 beside A but A's start was late by 10 s, so A now
	// holds 3 of 4 processors until 110: B's slot is gone and it moves to
	// 110, marked Broken. C, held at 100, keeps its promise.
	running := []Running{{ID: "A", Procs: 3, Start: sec(10), Walltime: sec(100)}}
	queue := []Queued{
		{ID: "B", Procs: 2, Walltime: sec(20), Held: true, Reserved: sec(10)},
		{ID: "C", Procs: 1, Walltime: sec(5), Held: true, Reserved: sec(100)},
	}
	plan, err := CBF{}.Schedule(sec(10), 4, running, queue)
	if err != nil {
		t.Fatal(err)
	}
	got := plan.Reservations
	if got[0].Start != sec(110) || !got[0].Broken {
		t.Errorf("B = %+v, want broken, at 110 s", got[0])
	}
	if got[1].Start != sec(10) || got[1].Broken {
		t.Errorf("C = %+v, want kept, at 10 s", got[1])
	}
}

func TestCompletion(t *testing.T) {
	running := []Running{{ID: "R", Procs: 6, Start: 0, Walltime: sec(40)}}
	cand := Queued{ID: "X", Procs: 5, Walltime: sec(10)}
	// CBF: the first 5 free processors for 10 s are at 70 (J1 ends), so
	// completion 80. FCFS: not before J4's start at 170, which takes the
	// whole cluster until 180, so 190.
	for _, tc := range []struct {
		p    Policy
		want int
	}{{CBF{}, 80}, {FCFS{}, 190}} {
		plan, err := tc.p.Schedule(0, 10, running, queueC())
		if err != nil {
			t.Fatal(err)
		}
		got, err := plan.Completion(cand.Procs, cand.Walltime)
		if err != nil || got != sec(tc.want) {
			t.Errorf("%s: Completion = %v, %v; want %ds", tc.p.Name(), got, err, tc.want)
		}
		est, err := EstimateCompletion(tc.p, 0, 10, running, queueC(), cand)
		if err != nil || est != sec(tc.want) {
			t.Errorf("%s: EstimateCompletion = %v, %v; want %ds", tc.p.Name(), est, err, tc.want)
		}
	}
	if _, err := (Plan{}).Completion(1, sec(1)); err == nil {
		t.Error("Completion on a zero Plan: no error")
	}
	plan, _ := CBF{}.Schedule(0, 10, nil, nil)
	if _, err := plan.Completion(11, sec(1)); err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("oversized candidate: err = %v", err)
	}
}

func TestScheduleErrors(t *testing.T) {
	ok := Queued{ID: "a", Procs: 1, Walltime: sec(1)}
	tests := []struct {
		name     string
		capacity int
		running  []Running
		queue    []Queued
		want     string
	}{
		{"capacity", 0, nil, nil, "capacity 0"},
		{"running procs", 4, []Running{{ID: "r", Procs: 0, Walltime: sec(1)}}, nil, `running[0] (job "r"): procs 0`},
		{"running walltime", 4, []Running{{ID: "r", Procs: 1}}, nil, `running[0] (job "r"): walltime`},
		{"overbooked", 4, []Running{{ID: "r", Procs: 3, Walltime: sec(9)}, {ID: "s", Procs: 2, Walltime: sec(9)}}, nil, "5 processors busy"},
		{"too big", 4, nil, []Queued{ok, {ID: "b", Procs: 5, Walltime: sec(1)}}, `queue[1] (job "b"): procs 5 exceeds`},
		{"no walltime", 4, nil, []Queued{{ID: "b", Procs: 1}}, `queue[0] (job "b"): walltime`},
		{"duplicate", 4, nil, []Queued{ok, ok}, `queue[1]: duplicate job ID "a"`},
		{"held behind new", 4, nil, []Queued{ok, {ID: "b", Procs: 1, Walltime: sec(1), Held: true}}, `queue[1] (job "b"): holds a reservation`},
	}
	for _, tc := range tests {
		for _, p := range []Policy{FCFS{}, CBF{}} {
			_, err := p.Schedule(0, tc.capacity, tc.running, tc.queue)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s/%s: err = %v, want it to contain %q", p.Name(), tc.name, err, tc.want)
			}
		}
	}
}

func TestRegistry(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"cbf", "fcfs"}) {
		t.Errorf("Names = %v", got)
	}
	for _, n := range Names() {
		p, err := New(n)
		if err != nil || p.Name() != n {
			t.Errorf("New(%q) = %v, %v", n, p, err)
		}
	}
	if _, err := New("easy"); err == nil || !strings.Contains(err.Error(), "cbf, fcfs") {
		t.Errorf("New(easy): err = %v", err)
	}
}
