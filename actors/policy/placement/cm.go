package placement

// ClusterMin is KOALA's Cluster Minimization (cm): a job spans as few
// clusters as possible, to keep its messages inside clusters.
//
// Rule for non-fixed requests: clusters are ordered by decreasing idle nodes
// (ties by snapshot order) once, at the start; components are packed first
// fit decreasing: largest first, each on the first cluster in that order
// that still holds it. The packing is tried with at most 1, 2, ... clusters
// and the first count that works is kept, so the result uses the fewest
// clusters any packing can (within the search budget); when first fit
// decreasing already reaches that minimum, its packing is the one returned.
//
// Rule for flexible requests: as FlexibleClusterMin.
//
// Choices where SPEC §3 is silent:
//   - Components share clusters freely (that is how CM saves clusters) and
//     are merged into one Assignment per cluster.
//   - Fixed requests are placed as the user says (placeFixed).
type ClusterMin struct{}

// Name is "cm".
func (ClusterMin) Name() string { return "cm" }

// Place places req by Cluster Minimization.
func (ClusterMin) Place(req Request, snap Snapshot, opts Options) Outcome {
	return place(req, snap, opts, clusterMin, false)
}

// FlexibleClusterMin is KOALA's Flexible Cluster Minimization (fcm), the
// policy for flexible requests.
//
// Rule: clusters are ordered by decreasing idle nodes (ties by snapshot
// order); each in turn gets a component as large as its idle nodes until the
// job's total is met, the last component taking only what is still needed.
// If the idle nodes run out the job does not fit now (NoFitNow); if the total
// exceeds what the clusters (or the MaxClusters largest of them, or the
// largest set of mutually available clusters) hold when fully idle, it never
// fits (NeverFits). SPEC example: total 24 on three clusters of 16 idle gives
// 16 + 8 on the first two.
//
// Choices where SPEC §3 is silent:
//   - Constraints (cap, unavailable pairs): the fill is tried with at most 1,
//     2, ... clusters; a cluster is skipped only when taking it makes the rest
//     impossible (depth-first search in the same order). Without constraints
//     this is exactly the greedy fill, which already uses the fewest clusters.
//   - Non-fixed requests are packed as ClusterMin packs them (first fit
//     decreasing on the fewest clusters): the non-fixed counterpart of
//     "fill the largest clusters first".
//   - Fixed requests are placed as the user says (placeFixed).
type FlexibleClusterMin struct{}

// Name is "fcm".
func (FlexibleClusterMin) Name() string { return "fcm" }

// Place places req by Flexible Cluster Minimization.
func (FlexibleClusterMin) Place(req Request, snap Snapshot, opts Options) Outcome {
	return place(req, snap, opts, clusterMin, false)
}

// clusterMin is the shared core of cm and fcm.
func clusterMin(j *job, v *view, lim limits, b *budget) ([]Assignment, bool) {
	order := byIdleDesc(v.idle)
	var out []Assignment
	upTo := len(v.names)
	if j.typ != Flexible {
		upTo = min(upTo, len(j.sizes))
	}
	s := newSearch(v, lim, b)
	ok := deepen(lim, upTo, b, func(l limits) bool {
		s.reset(l)
		var done bool
		if j.typ == Flexible {
			done = s.fill(order, 0, j.total)
		} else {
			done = s.items(j.sizes, 0, static(order))
		}
		if done {
			out = s.result()
		}
		return done
	})
	return out, ok
}
