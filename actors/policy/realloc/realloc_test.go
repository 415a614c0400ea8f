package realloc

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

func TestMinCompletion(t *testing.T) {
	tests := []struct {
		name string
		in   []Estimate
		want int
		ok   bool
	}{
		{"least", []Estimate{{sec(30), true}, {sec(10), true}, {sec(20), true}}, 1, true},
		{"tie to lowest index", []Estimate{{sec(30), true}, {sec(10), true}, {sec(10), true}}, 1, true},
		{"skips unavailable", []Estimate{{sec(1), false}, {sec(50), true}}, 1, true},
		{"none", []Estimate{{sec(1), false}}, -1, false},
		{"empty", nil, -1, false},
	}
	for _, tc := range tests {
		got, ok := MinCompletion(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: MinCompletion = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// threeJobs: two empty clusters, J1 (100 s), J2 (50 s), J3 (10 s) queued in
// that order on cluster 0, so their completions are 100, 150 and 160; each
// takes as long on cluster 1.
func threeJobs() (*fakeGrid, []Job) {
	g := newFakeGrid([]time.Duration{0, 0})
	js := []Job{
		g.add(0, "J1", sec(100), sec(100)),
		g.add(0, "J2", sec(50), sec(50)),
		g.add(0, "J3", sec(10), sec(10)),
	}
	for i := range js {
		js[i].Submit = sec(i)
	}
	return g, js
}

func mv(id string, from, to, old, new int) Move {
	return Move{Job: id, From: from, To: to, Old: sec(old), New: sec(new)}
}

func TestAlgorithms(t *testing.T) {
	tests := []struct {
		name  string
		alg   Algorithm
		h     Heuristic
		want  []Move
		log   []string
		queue [][]string
	}{
		{
			// J1 gains nothing; J2 gains 100 s and moves; then J3 would
			// finish at 60 instead of 110: 50 s, below the threshold.
			name: "regular mct", alg: Regular, h: MCT{},
			want:  []Move{mv("J2", 0, 1, 150, 50)},
			log:   []string{"submit J2 1", "cancel J2 0"},
			queue: [][]string{{"J1", "J3"}, {"J2"}},
		},
		{
			// Scores 100, 50, 10: J3 first (160 -> 10), then J2 (min of
			// 150 and 60: 150 -> 60), then J1 stays (100 vs 160).
			name: "regular minmin", alg: Regular, h: MinMin{},
			want:  []Move{mv("J3", 0, 1, 160, 10), mv("J2", 0, 1, 150, 60)},
			log:   []string{"submit J3 1", "cancel J3 0", "submit J2 1", "cancel J2 0"},
			queue: [][]string{{"J1"}, {"J3", "J2"}},
		},
		{
			// A window of 2: J2 (score 50) before J1 (100); J3 after
			// them, in submission order, gains only 50 s.
			name: "regular minmin window 2", alg: Regular, h: MinMin{Oldest: 2},
			want:  []Move{mv("J2", 0, 1, 150, 50)},
			queue: [][]string{{"J1", "J3"}, {"J2"}},
		},
		{
			// Cancel all, then J1 ties 100/100 and stays on 0, J2 goes to
			// 1 (50 vs 150), J3 to 1 (60 vs 110).
			name: "all-cancellation mct", alg: AllCancellation, h: MCT{},
			want:  []Move{mv("J1", 0, 0, 100, 100), mv("J2", 0, 1, 150, 50), mv("J3", 0, 1, 160, 60)},
			log:   []string{"cancel J1 0", "cancel J2 0", "cancel J3 0", "submit J1 0", "submit J2 1", "submit J3 1"},
			queue: [][]string{{"J1"}, {"J2", "J3"}},
		},
		{
			// Empty grid: J3 (10) to 0 on a tie, then J2 (50 on 1 vs 60
			// on 0) to 1, then J1 (110 on 0 vs 150 on 1) to 0.
			name: "all-cancellation minmin", alg: AllCancellation, h: MinMin{},
			want:  []Move{mv("J3", 0, 0, 160, 10), mv("J2", 0, 1, 150, 50), mv("J1", 0, 0, 100, 110)},
			queue: [][]string{{"J3", "J1"}, {"J2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, js := threeJobs()
			got, err := tc.alg(js, g, tc.h, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("moves = %+v\nwant    %+v", got, tc.want)
			}
			if tc.log != nil && !reflect.DeepEqual(g.log, tc.log) {
				t.Errorf("estimator calls = %v, want %v", g.log, tc.log)
			}
			if !reflect.DeepEqual(g.queues, tc.queue) {
				t.Errorf("queues = %v, want %v", g.queues, tc.queue)
			}
		})
	}
}

// TestRegularThreshold: J waits on cluster 0 behind X and completes at 200;
// on cluster 1 it would take 60 s after the cluster frees at base.
func TestRegularThreshold(t *testing.T) {
	tests := []struct {
		base      int
		threshold time.Duration
		moves     bool
	}{
		{81, 0, false},           // 200 - 141 = 59 s: not a move
		{80, 0, true},            // 60 s: a move
		{79, 0, true},            // 61 s
		{80, sec(61), false},     // a custom threshold
		{150, sec(1), false},     // later elsewhere
		{139, time.Second, true}, // exactly the custom threshold
		{140, time.Second, false},
	}
	for _, tc := range tests {
		g := newFakeGrid([]time.Duration{0, sec(tc.base)})
		x := g.add(0, "X", sec(100), sec(1000))
		j := g.add(0, "J", sec(100), sec(60))
		j.Submit = sec(1)
		moves, err := Regular([]Job{j, x}, g, MCT{}, Options{Threshold: tc.threshold})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(moves) == 1; got != tc.moves {
			t.Errorf("base %d, threshold %v: moves = %+v, want a move: %v", tc.base, tc.threshold, moves, tc.moves)
		}
		if tc.moves && (moves[0] != Move{Job: "J", From: 0, To: 1, Old: sec(200), New: sec(tc.base + 60)}) {
			t.Errorf("base %d: move = %+v", tc.base, moves[0])
		}
	}
}

func TestRegularPicksBestOtherCluster(t *testing.T) {
	// Three clusters; J on 0 completes at 500; cluster 1 gives 300,
	// cluster 2 gives 300 too (tie to 1), and cluster 0 is never a target.
	g := newFakeGrid([]time.Duration{sec(400), sec(200), sec(250)})
	j := g.add(0, "J", sec(100), sec(100), sec(50))
	moves, err := Regular([]Job{j}, g, MCT{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Move{mv("J", 0, 1, 500, 300)}; !reflect.DeepEqual(moves, want) {
		t.Errorf("moves = %+v, want %+v", moves, want)
	}
}

func TestAlgorithmErrors(t *testing.T) {
	g, js := threeJobs()
	dup := append([]Job(nil), js...)
	dup[2].ID = "J1"
	bad := append([]Job(nil), js...)
	bad[1].Cluster = 2
	nowhere := newFakeGrid([]time.Duration{0, 0})
	lost := nowhere.add(0, "L", sec(1), sec(1))
	nowhere.dur["L"] = []time.Duration{-1, -1}
	tests := []struct {
		name string
		alg  Algorithm
		w    []Job
		est  Estimator
		h    Heuristic
		opt  Options
		want string
	}{
		{"duplicate", Regular, dup, g, MCT{}, Options{}, `waiting[2]: duplicate job ID "J1"`},
		{"cluster", AllCancellation, bad, g, MCT{}, Options{}, `waiting[1] (job "J2"): cluster 2 out of range`},
		{"threshold", Regular, js, g, MCT{}, Options{Threshold: -1}, "threshold -1ns is negative"},
		{"nil estimator", Regular, js, nil, MCT{}, Options{}, "estimator is nil"},
		{"nil heuristic", AllCancellation, js, g, nil, Options{}, "heuristic is nil"},
		{"no own estimate", Regular, []Job{lost}, nowhere, MCT{}, Options{}, `job "L": no estimate on its own cluster 0`},
		{"no own estimate all", AllCancellation, []Job{lost}, nowhere, MinMin{}, Options{}, `job "L": no estimate on its own cluster 0`},
	}
	for _, tc := range tests {
		if _, err := tc.alg(tc.w, tc.est, tc.h, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestMoveReallocated(t *testing.T) {
	if (Move{From: 1, To: 1}).Reallocated() || !(Move{From: 0, To: 2}).Reallocated() {
		t.Error("Reallocated should be From != To")
	}
}

func TestRegistry(t *testing.T) {
	if got := HeuristicNames(); !reflect.DeepEqual(got, []string{"mct", "minmin"}) {
		t.Errorf("HeuristicNames = %v", got)
	}
	if got := AlgorithmNames(); !reflect.DeepEqual(got, []string{"all-cancellation", "regular"}) {
		t.Errorf("AlgorithmNames = %v", got)
	}
	for _, n := range HeuristicNames() {
		h, err := NewHeuristic(n)
		if err != nil || h.Name() != n {
			t.Errorf("NewHeuristic(%q) = %v, %v", n, h, err)
		}
	}
	if h, _ := NewHeuristic("minmin"); h.Scored(100) != 20 || h.Scored(7) != 7 {
		t.Errorf("minmin window: Scored(100) = %d, Scored(7) = %d", h.Scored(100), h.Scored(7))
	}
	for _, n := range AlgorithmNames() {
		if a, err := NewAlgorithm(n); err != nil || a == nil {
			t.Errorf("NewAlgorithm(%q): %v", n, err)
		}
	}
	if _, err := NewHeuristic("maxmin"); err == nil || !strings.Contains(err.Error(), "mct, minmin") {
		t.Errorf("NewHeuristic(maxmin): %v", err)
	}
	if _, err := NewAlgorithm("greedy"); err == nil || !strings.Contains(err.Error(), "all-cancellation, regular") {
		t.Errorf("NewAlgorithm(greedy): %v", err)
	}
}
