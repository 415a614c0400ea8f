package malleability

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const propertyRounds = 3000

// randJobs draws 0..8 running jobs with valid sizes. Start times are drawn
// from a small range so that ties occur.
func randJobs(r *rand.Rand) []Job {
	n := r.IntN(9)
	jobs := make([]Job, 0, n)
	for len(jobs) < n {
		j := Job{ID: fmt.Sprintf("j%d", len(jobs)), Start: int64(r.IntN(6))}
		switch r.IntN(3) {
		case 0:
			j.PowerOfTwo = true // FT: sizes 2..32, powers of two
			j.Min = max(1+r.IntN(4), 2)
			j.Max = min(j.Min+r.IntN(40), 32)
		case 1:
			// GADGET-2: sizes 2..46
			j.Min = max(1+r.IntN(4), 2)
			j.Max = min(j.Min+r.IntN(50), 46)
		default:
			j.Min = 1 + r.IntN(4)
			j.Max = j.Min + r.IntN(20)
		}
		lo, hi := j.Bounds()
		if lo > hi {
			continue
		}
		for {
			j.Size = lo + r.IntN(hi-lo+1)
			if j.Valid(j.Size) {
				break
			}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// apply checks that changes name distinct known jobs with the expected sign
// and returns the jobs after the changes and the sum of the deltas.
func apply(t *testing.T, jobs []Job, cs []Change, sign int) ([]Job, int) {
	t.Helper()
	after := append([]Job(nil), jobs...)
	pos := map[string]int{}
	for i, j := range jobs {
		pos[j.ID] = i
	}
	seen := map[string]bool{}
	sum := 0
	for _, c := range cs {
		i, ok := pos[c.JobID]
		if !ok {
			t.Fatalf("change for unknown job %q", c.JobID)
		}
		if seen[c.JobID] {
			t.Fatalf("job %q changed twice in %v", c.JobID, cs)
		}
		seen[c.JobID] = true
		if c.Delta*sign <= 0 {
			t.Fatalf("change %v has the wrong sign (want %+d): grows and shrinks mixed", c, sign)
		}
		after[i].Size += c.Delta
		sum += c.Delta
	}
	for _, j := range after {
		if j.Size < j.Min || j.Size > j.Max {
			t.Fatalf("job %+v outside [Min, Max]", j)
		}
		if !j.Valid(j.Size) {
			t.Fatalf("job %+v left on an invalid size (FT must be a power of two)", j)
		}
	}
	return after, sum
}

func TestPolicyProperties(t *testing.T) {
	for name, mk := range Registry() {
		t.Run(name, func(t *testing.T) {
			pol := mk()
			r := rand.New(rand.NewPCG(7, uint64(len(name))))
			for round := range propertyRounds {
				jobs := randJobs(r)
				free := r.IntN(120)
				ctx := fmt.Sprintf("round %d jobs %+v", round, jobs)

				// Grow: never more than free, everything placeable placed.
				g := pol.Grow(jobs, free)
				after, given := apply(t, jobs, g, +1)
				if given > free {
					t.Fatalf("%s: grew %d > free %d: %v", ctx, given, free, g)
				}
				for _, j := range after {
					if d := j.Take(free - given); d > 0 {
						t.Fatalf("%s free %d: after %v job %s still accepts %d of the %d left", ctx, free, g, j.ID, d, free-given)
					}
				}

				// Shrink: at least need when possible, else everyone to the minimum.
				avail := Releasable(jobs)
				need := r.IntN(avail + 10)
				s := pol.Shrink(jobs, need)
				after, released := apply(t, jobs, s, -1)
				released = -released
				if avail >= need && released < need {
					t.Fatalf("%s: need %d (releasable %d) but released %d: %v", ctx, need, avail, released, s)
				}
				if avail < need && released != avail {
					t.Fatalf("%s: need %d > releasable %d but released only %d", ctx, need, avail, released)
				}
				if need > 0 && released > 0 && Releasable(after) > 0 && released >= need {
					// Over-release comes only from power-of-two rounding: without FT it is exact.
					if !hasPow2(jobs) && released != need {
						t.Fatalf("%s: need %d, released %d without any FT job", ctx, need, released)
					}
				}
			}
		})
	}
}

func hasPow2(jobs []Job) bool {
	for _, j := range jobs {
		if shapeOf(j).pow2 {
			return true
		}
	}
	return false
}

// EGS equalises increments: with jobs that all accept any count and have room
// for more than their share, increments differ by at most one and the bonus
// (shrink: malus) falls on the earliest (latest) started jobs.
func TestEGSEqualIncrements(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for round := range propertyRounds {
		k := 1 + r.IntN(8)
		jobs := make([]Job, k)
		for i := range jobs {
			size := 2 + r.IntN(20)
			jobs[i] = Job{ID: fmt.Sprintf("j%d", i), Start: int64(r.IntN(1000)), Size: size, Min: 2, Max: 1000}
		}
		order := byStart(jobs)
		n := r.IntN(100)
		for _, grow := range []bool{true, false} {
			var cs []Change
			if grow {
				cs = EGS().Grow(jobs, n)
			} else {
				lim := n
				for _, j := range jobs { // keep the shrink within every job's room
					lim = min(lim, k*(j.Size-j.Min))
				}
				n = lim
				cs = EGS().Shrink(jobs, n)
			}
			delta := map[string]int{}
			for _, c := range cs {
				delta[c.JobID] = c.Delta
			}
			rem := n % k
			for pos, i := range order {
				want := n / k
				if grow && pos < rem || !grow && pos >= k-rem {
					want++
				}
				if !grow {
					want = -want
				}
				if got := delta[jobs[i].ID]; got != want {
					t.Fatalf("round %d grow=%v n=%d jobs %+v: job %s (start rank %d) got %d, want %d", round, grow, n, jobs, jobs[i].ID, pos, got, want)
				}
			}
		}
	}
}

func TestApproachProperties(t *testing.T) {
	for aname, a := range Approaches() {
		for pname, mk := range Registry() {
			t.Run(aname+"/"+pname, func(t *testing.T) {
				pol := mk()
				r := rand.New(rand.NewPCG(3, uint64(len(aname)*10+len(pname))))
				for round := range propertyRounds {
					running := randJobs(r)
					used := 0
					for _, j := range running {
						used += j.Size
					}
					used += r.IntN(20) // rigid jobs
					c := ClusterView{
						Name:      "c",
						Capacity:  used + r.IntN(80),
						KoalaUsed: used,
						Threshold: []float64{0, 0.5, 0.7, 0.8, 0.9, 1}[r.IntN(6)],
					}
					c.Idle = r.IntN(c.Capacity - used + 1)
					var queue []Waiting
					for i := range r.IntN(6) {
						queue = append(queue, Waiting{ID: fmt.Sprintf("w%d", i), Size: []int{2, 2, 2, 4, 8, 16, 40}[r.IntN(7)]})
					}
					ctx := fmt.Sprintf("round %d view %+v running %+v queue %+v", round, c, running, queue)

					d := a(pol, c, running, queue)
					if len(d.Grow) > 0 && len(d.Shrink) > 0 {
						t.Fatalf("%s: decision grows and shrinks: %+v", ctx, d)
					}
					_, grown := apply(t, running, d.Grow, +1)
					_, shrunk := apply(t, running, d.Shrink, -1)
					released := -shrunk
					started := 0
					seen := map[string]bool{}
					for _, s := range d.Start {
						if seen[s.JobID] || s.Cluster != c.Name || s.Size <= 0 {
							t.Fatalf("%s: bad start %+v in %+v", ctx, s, d)
						}
						seen[s.JobID] = true
						if s.AfterShrink && len(d.Shrink) == 0 {
							t.Fatalf("%s: start after shrink without shrinks: %+v", ctx, d)
						}
						started += s.Size
					}
					// Never more than available: idle processors and the threshold.
					if grown+started > c.Idle+released {
						t.Fatalf("%s: uses %d+%d > idle %d + released %d: %+v", ctx, grown, started, c.Idle, released, d)
					}
					if len(d.Shrink) == 0 && grown+started > c.Available() {
						t.Fatalf("%s: uses %d+%d > available %d: %+v", ctx, grown, started, c.Available(), d)
					}
					if grown+started > 0 && c.KoalaUsed-released+grown+started > c.Cap() {
						t.Fatalf("%s: KOALA would hold %d > cap %d: %+v", ctx, c.KoalaUsed-released+grown+started, c.Cap(), d)
					}
					if aname == "pra" {
						if len(d.Shrink) > 0 {
							t.Fatalf("%s: PRA shrank: %+v", ctx, d)
						}
						// Waiting jobs start only when no running job can grow.
						if len(d.Start) > 0 {
							after, _ := apply(t, running, d.Grow, +1)
							for _, j := range after {
								if j.Take(c.Available()-grown) > 0 {
									t.Fatalf("%s: started %+v while job %s could still grow", ctx, d.Start, j.ID)
								}
							}
						}
					}
					if aname == "pwa" && len(d.Grow) > 0 {
						// Growing only when no waiting job fits in what the grow took from.
						left := c.Available() - started
						for _, w := range queue {
							if !seen[w.ID] && w.Size <= left {
								t.Fatalf("%s: grew %+v while %s (%d) fits in %d", ctx, d.Grow, w.ID, w.Size, left)
							}
						}
					}
				}
			})
		}
	}
}
