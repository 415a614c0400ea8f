package realloc

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomGrid draws 1-4 clusters with random base instants and 0-40 jobs
// with random durations (some clusters unable to run some jobs, never all).
func randomGrid(rng *rand.Rand) (*fakeGrid, []Job) {
	k := 1 + rng.IntN(4)
	base := make([]time.Duration, k)
	for c := range base {
		base[c] = sec(rng.IntN(500))
	}
	g := newFakeGrid(base)
	var jobs []Job
	for i := range rng.IntN(41) {
		dur := make([]time.Duration, k)
		for c := range dur {
			dur[c] = sec(1 + rng.IntN(300))
		}
		home := rng.IntN(k)
		for c := range dur {
			if c != home && rng.IntN(6) == 0 {
				dur[c] = -1
			}
		}
		j := g.add(home, fmt.Sprintf("j%d", i), dur...)
		j.Submit = sec(rng.IntN(1000)) // ties happen; stable order keeps the slice's
		jobs = append(jobs, j)
	}
	rng.Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	return g, jobs
}

func clone(g *fakeGrid) *fakeGrid {
	c := newFakeGrid(g.base)
	c.dur = g.dur
	for i, q := range g.queues {
		c.queues[i] = append([]string(nil), q...)
	}
	return c
}

func location(g *fakeGrid) map[string]int {
	loc := map[string]int{}
	for c, q := range g.queues {
		for _, id := range q {
			if _, dup := loc[id]; dup {
				panic("job queued twice: " + id)
			}
			loc[id] = c
		}
	}
	return loc
}

// TestAlgorithmProperties checks every algorithm and heuristic on random
// grids against a replay of the returned moves on a copy of the grid:
//   - every job ends queued exactly once, where the moves say;
//   - regular: a job moves at most once, to another cluster, gaining at
//     least the threshold at the time of the move, and a job not moved did
//     not have such a gain when it was considered (MCT: replayed in
//     submission order); with MCT the moves come in submission order;
//   - all-cancellation: one move per job; each goes to the cluster of least
//     estimate at its turn (ties to the lowest index) with New that
//     estimate; with MinMin the first min(20, n) moves are the oldest jobs,
//     each with the least best estimate among the window jobs left.
func TestAlgorithmProperties(t *testing.T) {
	for it := range 1500 {
		rng := rand.New(rand.NewPCG(uint64(it), 60))
		g0, jobs := randomGrid(rng)
		thr := []time.Duration{0, sec(1), sec(200)}[rng.IntN(3)]
		for _, hn := range HeuristicNames() {
			for _, an := range AlgorithmNames() {
				h, _ := NewHeuristic(hn)
				if rng.IntN(3) == 0 && hn == "minmin" {
					h = MinMin{Oldest: 1 + rng.IntN(5)}
				}
				alg, _ := NewAlgorithm(an)
				g := clone(g0)
				moves, err := alg(jobs, g, h, Options{Threshold: thr})
				if err != nil {
					t.Fatalf("it %d %s/%s: %v", it, an, hn, err)
				}
				if err := checkMoves(an, h, thr, g0, g, jobs, moves); err != nil {
					t.Fatalf("it %d %s/%s: %v\nmoves %+v", it, an, hn, err, moves)
				}
			}
		}
	}
}

func checkMoves(alg string, h Heuristic, thr time.Duration, g0, g *fakeGrid, jobs []Job, moves []Move) error {
	if thr == 0 {
		thr = DefaultThreshold
	}
	byID := map[string]Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	order := append([]Job(nil), jobs...)
	// Submission order, stable: the oracle sorts by insertion.
	for a := 1; a < len(order); a++ {
		for b := a; b > 0 && order[b].Submit < order[b-1].Submit; b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	rank := map[string]int{}
	for i, j := range order {
		rank[j.ID] = i
	}
	replay := clone(g0)
	want := location(g0)
	best := func(j Job, skip int) (int, time.Duration) {
		bc, bt := -1, time.Duration(0)
		for c := range replay.Clusters() {
			if t, ok := replay.Estimate(j, c); ok && c != skip && (bc < 0 || t < bt) {
				bc, bt = c, t
			}
		}
		return bc, bt
	}
	switch alg {
	case "regular":
		moved := map[string]bool{}
		for _, m := range moves {
			j := byID[m.Job]
			if moved[m.Job] || m.From != j.Cluster || m.To == m.From {
				return fmt.Errorf("bad move %+v", m)
			}
			moved[m.Job] = true
			cur, _ := replay.Estimate(j, j.Cluster)
			c, t := best(j, j.Cluster)
			if cur != m.Old || c != m.To || t != m.New || m.Old-m.New < thr {
				return fmt.Errorf("move %+v: replay says current %v, best %d at %v", m, cur, c, t)
			}
			replay.Submit(j, m.To)
			replay.Cancel(j, m.From)
			want[m.Job] = m.To
		}
		if h.Scored(len(jobs)) == 0 {
			// MCT: replay the rule in submission order.
			replay = clone(g0)
			k := 0
			for _, j := range order {
				cur, _ := replay.Estimate(j, j.Cluster)
				c, t := best(j, j.Cluster)
				if c >= 0 && cur-t >= thr {
					if k >= len(moves) || moves[k].Job != j.ID {
						return fmt.Errorf("job %s should move at its turn (move %d)", j.ID, k)
					}
					replay.Submit(j, c)
					replay.Cancel(j, j.Cluster)
					k++
				}
			}
			if k != len(moves) {
				return fmt.Errorf("replay made %d moves, the algorithm %d", k, len(moves))
			}
		}
	case "all-cancellation":
		if len(moves) != len(jobs) {
			return fmt.Errorf("%d moves for %d jobs", len(moves), len(jobs))
		}
		for _, j := range order {
			old, _ := replay.Estimate(j, j.Cluster)
			for _, m := range moves {
				if m.Job == j.ID && (m.Old != old || m.From != j.Cluster) {
					return fmt.Errorf("move %+v: old estimate %v", m, old)
				}
			}
		}
		for _, j := range order {
			replay.Cancel(j, j.Cluster)
		}
		k := h.Scored(len(jobs))
		window := map[string]bool{}
		for _, j := range order[:k] {
			window[j.ID] = true
		}
		for i, m := range moves {
			j := byID[m.Job]
			if i < k {
				if !window[m.Job] {
					return fmt.Errorf("move %d (%s) is not among the %d oldest", i, m.Job, k)
				}
				_, mine := best(j, -1)
				for id := range window {
					_, t := best(byID[id], -1)
					if t < mine || (t == mine && rank[id] < rank[m.Job]) {
						return fmt.Errorf("move %d picks %s (best %v) but %s (older or equal) has %v", i, m.Job, mine, id, t)
					}
				}
				delete(window, m.Job)
			} else if m.Job != order[i].ID {
				return fmt.Errorf("move %d is %s, submission order says %s", i, m.Job, order[i].ID)
			}
			c, t := best(j, -1)
			if c != m.To || t != m.New {
				return fmt.Errorf("move %+v: best is %d at %v", m, c, t)
			}
			replay.Submit(j, m.To)
			want[m.Job] = m.To
		}
	}
	got := location(g)
	if len(got) != len(want) {
		return fmt.Errorf("%d jobs queued, want %d", len(got), len(want))
	}
	for id, c := range want {
		if got[id] != c {
			return fmt.Errorf("job %s on cluster %d, want %d", id, got[id], c)
		}
	}
	return nil
}
