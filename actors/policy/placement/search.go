package placement

import "slices"

// search is the depth-first placement engine the policies share. A policy
// supplies a preference order of clusters; the engine tries choices in that
// order, keeps the constraints (cap, unavailable pairs, eligibility) and
// backtracks on a dead end, so the first complete placement it finds is the
// policy's greedy placement whenever that one is valid.
type search struct {
	v   *view
	lim limits
	b   *budget
	// idle is what is left of each cluster's idle nodes.
	idle []int
	// used is what this job has taken on each cluster.
	used []int
	// order lists the clusters in first-use order.
	order []int
	// eligible, when set, excludes clusters the policy may not use (CF: input
	// files cannot be staged there).
	eligible []bool
}

func newSearch(v *view, lim limits, b *budget) *search {
	// idle, used and order share one allocation: a placement makes a
	// search for every cluster count it tries.
	n := len(v.idle)
	buf := make([]int, 3*n)
	copy(buf, v.idle)
	return &search{
		v:     v,
		lim:   lim,
		b:     b,
		idle:  buf[:n:n],
		used:  buf[n : 2*n : 2*n],
		order: buf[2*n : 2*n],
	}
}

// reset empties s for a new try under lim: deepen tries one cluster count
// after another on the same search.
func (s *search) reset(lim limits) {
	s.lim = lim
	copy(s.idle, s.v.idle)
	clear(s.used)
	s.order = s.order[:0]
}

// canUse: cluster i may receive (more of) this job.
func (s *search) canUse(i int) bool {
	if s.used[i] > 0 {
		return true
	}
	if s.eligible != nil && !s.eligible[i] {
		return false
	}
	if s.lim.maxClusters > 0 && len(s.order) >= s.lim.maxClusters {
		return false
	}
	if s.lim.pairs {
		for _, j := range s.order {
			if !s.v.available(i, j) {
				return false
			}
		}
	}
	return true
}

func (s *search) take(i, n int) {
	if s.used[i] == 0 {
		s.order = append(s.order, i)
	}
	s.used[i] += n
	s.idle[i] -= n
}

// undo reverses the latest take; depth-first order guarantees a cluster
// whose share drops to zero is the last one in s.order.
func (s *search) undo(i, n int) {
	s.used[i] -= n
	s.idle[i] += n
	if s.used[i] == 0 {
		s.order = s.order[:len(s.order)-1]
	}
}

func (s *search) result() []Assignment {
	out := make([]Assignment, len(s.order))
	for k, i := range s.order {
		out[k] = Assignment{Cluster: s.v.names[i], Size: s.used[i]}
	}
	return out
}

// feasible is a cheap necessary condition: need nodes, the largest piece
// being largest, can still be found on the clusters already used plus the
// best new clusters among cands that the cap and the pairs still allow.
func (s *search) feasible(cands []int, need, largest int) bool {
	sum, most := 0, 0
	var fresh []int
	for _, i := range s.order {
		sum += s.idle[i]
		most = max(most, s.idle[i])
	}
	for _, i := range cands {
		if s.used[i] == 0 && s.idle[i] > 0 && s.canUse(i) {
			fresh = append(fresh, s.idle[i])
		}
	}
	slots := len(fresh)
	if s.lim.maxClusters > 0 {
		slots = min(slots, s.lim.maxClusters-len(s.order))
	}
	slices.SortFunc(fresh, largestFirst)
	for _, n := range fresh[:max(slots, 0)] {
		sum += n
		most = max(most, n)
	}
	return sum >= need && most >= largest
}

// items places sizes[k:] (largest first) one piece at a time; rank returns
// the clusters in the policy's preference order for the current state. A
// piece may go to a cluster already used by the job (shares are merged).
func (s *search) items(sizes []int, k int, rank func(*search) []int) bool {
	if k == len(sizes) {
		return true
	}
	if !s.b.step() {
		return false
	}
	need := 0
	for _, n := range sizes[k:] {
		need += n
	}
	all := rank(s)
	if !s.feasible(all, need, sizes[k]) {
		return false
	}
	for _, i := range all {
		if s.idle[i] < sizes[k] || !s.canUse(i) {
			continue
		}
		s.take(i, sizes[k])
		if s.items(sizes, k+1, rank) {
			return true
		}
		s.undo(i, sizes[k])
		if s.b.spent {
			return false
		}
	}
	return false
}

// fill is the FCM split: walk order from pos, giving each cluster taken a
// component as large as its idle nodes until need is met (the last one may
// be smaller). A cluster is skipped only when taking it leads nowhere.
func (s *search) fill(order []int, pos, need int) bool {
	if need == 0 {
		return true
	}
	if !s.b.step() {
		return false
	}
	if pos == len(order) || !s.feasible(order[pos:], need, 1) {
		return false
	}
	i := order[pos]
	if s.idle[i] > 0 && s.canUse(i) {
		n := min(s.idle[i], need)
		s.take(i, n)
		if s.fill(order, pos+1, need-n) {
			return true
		}
		s.undo(i, n)
		if s.b.spent {
			return false
		}
	}
	return s.fill(order, pos+1, need)
}

// deepen runs try with a cap of 1, 2, ... clusters (never above lim's own
// cap or upTo) and stops at the first success: the fewest clusters.
func deepen(lim limits, upTo int, b *budget, try func(limits) bool) bool {
	if lim.maxClusters > 0 {
		upTo = min(upTo, lim.maxClusters)
	}
	for k := 1; k <= upTo; k++ {
		l := lim
		l.maxClusters = k
		if try(l) {
			return true
		}
		if b.spent {
			return false
		}
	}
	return false
}

// byIdleDesc orders clusters by decreasing idle nodes, ties by snapshot order.
func byIdleDesc(idle []int) []int {
	idx := identity(len(idle))
	stableBy(idx, func(a, b int) bool { return idle[a] > idle[b] })
	return idx
}

// byScore orders clusters by increasing score, unknown scores (ok false)
// last, ties by snapshot order.
func byScore(score []float64, known []bool) []int {
	idx := identity(len(score))
	stableBy(idx, func(x, y int) bool {
		if known[x] != known[y] {
			return known[x]
		}
		return known[x] && score[x] < score[y]
	})
	return idx
}

func identity(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// stableBy sorts the cluster positions idx stably by less. It is the
// sort.SliceStable of before (slices' stable sort is the same insertion and
// merge steps, so even an inconsistent less orders alike) without its
// reflection and allocation, which were a good part of a placement's cost.
func stableBy(idx []int, less func(a, b int) bool) {
	slices.SortStableFunc(idx, func(a, b int) int {
		if less(a, b) {
			return -1
		}
		if less(b, a) {
			return 1
		}
		return 0
	})
}

// largestFirst orders sizes from the largest down.
func largestFirst(a, b int) int { return b - a }

func static(order []int) func(*search) []int {
	return func(*search) []int { return order }
}

// pieces is the list of components a non-fixed or flexible job is placed
// as by the component-wise policies: a flexible job is one piece.
func pieces(j *job) []int {
	if j.typ == Flexible {
		return []int{j.total}
	}
	return j.sizes
}
