package placement

import "math"

// CloseToFiles is KOALA's Close-to-Files (cf): components go where their
// input files are, or can be brought fastest.
//
// Rule: each cluster gets an estimated transfer time: the sum, over the
// job's files the cluster holds no replica of, of size / b, b being the best
// bandwidth (Net.Bandwidth(replica, cluster), bytes/s) from any cluster that
// holds a replica. A cluster holding every file has time 0 and is preferred.
// Components of a non-fixed request are taken in decreasing size; each goes
// to the cluster with the least transfer time that can still hold it, ties
// broken by the most idle nodes left, then by snapshot order.
//
// Choices where SPEC §3 is silent:
//   - Every component needs every input file on its own cluster (its
//     processes read them there).
//   - A cluster to which some file cannot be staged (no replica holder with a
//     known, positive bandwidth to it) is not used; if that leaves no
//     placement the reason is ReasonFilesUnreachable. With a nil Net only
//     clusters holding every file qualify. Replica holders need not be
//     clusters of the snapshot (storage sites).
//   - Without input files CF degenerates to Worst Fit.
//   - A flexible request is one component of its total (no split); fixed
//     requests are placed as the user says, files unchecked (placeFixed).
//   - Components may share a cluster and are merged, as under WF; the
//     constraint search is the same depth-first search.
type CloseToFiles struct{}

// Name is "cf".
func (CloseToFiles) Name() string { return "cf" }

// Place places req by Close-to-Files.
func (CloseToFiles) Place(req Request, snap Snapshot, opts Options) Outcome {
	return place(req, snap, opts, closeToFiles, true)
}

func closeToFiles(j *job, v *view, lim limits, b *budget) ([]Assignment, bool) {
	cost := make([]float64, len(v.names))
	stageable := make([]bool, len(v.names))
	for i, c := range v.names {
		cost[i], stageable[i] = transferTime(j.files, c, v.net)
	}
	s := newSearch(v, lim, b)
	if lim.files {
		s.eligible = stageable
	}
	rank := func(s *search) []int {
		idx := byIdleDesc(s.idle)
		stableBy(idx, func(a, b int) bool { return cost[a] < cost[b] })
		return idx
	}
	if s.items(pieces(j), 0, rank) {
		return s.result(), true
	}
	return nil, false
}

// transferTime estimates, in seconds, how long staging files to cluster
// takes; ok is false (and the time +Inf) when some file cannot get there.
func transferTime(files []File, cluster string, net Net) (float64, bool) {
	total := 0.0
	for _, f := range files {
		best := 0.0
		held := false
		for _, r := range f.Replicas {
			if r == cluster {
				held = true
				break
			}
			if net == nil {
				continue
			}
			if bw, ok := net.Bandwidth(r, cluster); ok && bw > best {
				best = bw
			}
		}
		switch {
		case held:
		case best > 0:
			total += float64(f.Size) / best
		default:
			return math.Inf(1), false
		}
	}
	return total, true
}
