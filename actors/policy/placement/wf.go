package placement

// WorstFit is KOALA's Worst Fit (wf), the load-balancing policy.
//
// Rule: the components of a non-fixed request are taken in decreasing size
// (equal sizes keep the request's order); each goes to the cluster with the
// most idle nodes that can still hold it, idle counts being decremented as
// components are placed. Ties go to the cluster listed first in the snapshot.
//
// Choices where SPEC §3 is silent:
//   - Components of one job may share a cluster (the cluster simply is still
//     the one with the most idle nodes after the previous component); shares
//     on one cluster are merged into one Assignment. This follows KOALA,
//     where WF picks each component's cluster independently. WF therefore
//     co-allocates whenever another cluster has more idle nodes left, even
//     if the job would fit in one cluster (SPEC: "may co-allocate").
//   - A flexible request is one component of its total: WF never splits, so
//     "WF" in the SPEC's experiments means no co-allocation.
//   - Fixed requests: each named cluster must hold its component now (see
//     placeFixed, shared by every policy).
//   - If a component finds no cluster, or the choice breaks the cluster cap
//     or spans an unavailable pair, earlier components are moved to the next
//     cluster in WF order (depth-first search); the greedy placement is
//     returned whenever it is valid.
type WorstFit struct{}

// Name is "wf".
func (WorstFit) Name() string { return "wf" }

// Place places req by Worst Fit.
func (WorstFit) Place(req Request, snap Snapshot, opts Options) Outcome {
	return place(req, snap, opts, worstFit, false)
}

func worstFit(j *job, v *view, lim limits, b *budget) ([]Assignment, bool) {
	s := newSearch(v, lim, b)
	if s.items(pieces(j), 0, func(s *search) []int { return byIdleDesc(s.idle) }) {
		return s.result(), true
	}
	return nil, false
}
