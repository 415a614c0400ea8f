package malleability

import "sort"

// Job is a running malleable job on one cluster, as the policies see it.
type Job struct {
	ID string
	// Start orders jobs by start time: smaller means started earlier. Ties are
	// broken by ID, then by position in the slice.
	Start int64
	// Size is the current number of processors; Min and Max bound it (the
	// caller intersects the job's own bounds with its application's).
	Size, Min, Max int
	// PowerOfTwo: the application runs only on a power-of-two count (FT);
	// otherwise it accepts any count in [Min, Max].
	PowerOfTwo bool
}

// Change is one grow or shrink order for a job.
type Change struct {
	JobID string
	// Delta > 0 grows the job by Delta processors (the amount the job accepts,
	// so none is handed back); Delta < 0 shrinks it by -Delta processors (the
	// amount the job will release, which for a power-of-two application may be
	// more than was asked).
	Delta int
}

// shape is the set of sizes a job may have: the integers of [lo, hi], or only
// the powers of two in it.
type shape struct {
	lo, hi int
	pow2   bool
}

func shapeOf(j Job) shape {
	s := shape{lo: j.Min, hi: j.Max, pow2: j.PowerOfTwo}
	if s.lo < 1 {
		s.lo = 1
	}
	if s.pow2 {
		s.lo = ceilPow2(s.lo)
		s.hi = floorPow2(s.hi)
	}
	return s
}

// floor returns the largest valid size <= x (x capped at hi), or -1 if none.
func (s shape) floor(x int) int {
	if x > s.hi {
		x = s.hi
	}
	if x < s.lo {
		return -1
	}
	if s.pow2 {
		return floorPow2(x)
	}
	return x
}

// valid reports whether n is a size the job may have.
func (s shape) valid(n int) bool {
	return n >= s.lo && n <= s.hi && (!s.pow2 || isPow2(n))
}

// Bounds returns the smallest and largest sizes the job may have: its
// [Min, Max] with, for a power-of-two application, both ends rounded inwards
// to powers of two. lo > hi means no valid size.
func (j Job) Bounds() (lo, hi int) {
	s := shapeOf(j)
	return s.lo, s.hi
}

// Valid reports whether n is a size the job may run on.
func (j Job) Valid(n int) bool { return shapeOf(j).valid(n) }

// Take returns how many of offer extra processors the job accepts: the job
// grows to the largest valid size not above Size+offer (and not above its
// maximum). FT at 4 offered 3 takes 0, offered 5 takes 4. Never negative.
func (j Job) Take(offer int) int {
	if offer <= 0 {
		return 0
	}
	n := shapeOf(j).floor(j.Size + offer)
	if n <= j.Size {
		return 0
	}
	return n - j.Size
}

// Release returns how many processors the job gives back when asked to
// release ask of them: it shrinks to the largest valid size not above
// Size-ask, or to its minimum if that is lower. So it may release more than
// asked (FT at 16 asked for 3 shrinks to 8) or less (never below the minimum).
// Never negative.
func (j Job) Release(ask int) int {
	if ask <= 0 {
		return 0
	}
	s := shapeOf(j)
	if j.Size <= s.lo {
		return 0
	}
	n := s.lo
	if t := j.Size - ask; t > s.lo {
		n = s.floor(t)
	}
	if n >= j.Size {
		return 0
	}
	return j.Size - n
}

// Releasable returns the processors the jobs hold above their minimum sizes:
// the most any shrink can obtain from them.
func Releasable(jobs []Job) int {
	total := 0
	for _, j := range jobs {
		if lo, _ := j.Bounds(); j.Size > lo {
			total += j.Size - lo
		}
	}
	return total
}

// byStart returns the indices of jobs in increasing start order (ties by ID,
// then by position), without touching the caller's slice.
func byStart(jobs []Job) []int {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ja, jb := jobs[idx[a]], jobs[idx[b]]
		if ja.Start != jb.Start {
			return ja.Start < jb.Start
		}
		return ja.ID < jb.ID
	})
	return idx
}
