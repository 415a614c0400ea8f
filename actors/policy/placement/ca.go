package placement

// CommAware is KOALA's Communication-Aware policy (ca), with a latency option
// (default) and a bandwidth option of the same shape (Options.CAMetric).
//
// Rule, latency option: order clusters by increasing intra-cluster latency
// (Net.Latency(c, c)) and place the whole job on the first that has enough
// idle nodes. If none has, give each cluster c the average of Net.Latency(c,
// d) over every cluster d of the snapshot (c itself included), order the
// clusters by increasing average, and split the job as FCM does but in that
// order: each cluster in turn gets a component as large as its idle nodes
// until the total is met. The bandwidth option orders by decreasing
// intra-cluster bandwidth, then by decreasing average bandwidth.
//
// Choices where SPEC §3 is silent:
//   - Values come only from the snapshot's Net (the information service's
//     measurements); a nil Net is an Internal outcome (ReasonNoNetwork).
//   - Pairs the Net reports as unknown/unavailable are left out of a
//     cluster's average; a cluster with no known value (intra or average)
//     is ordered after every cluster with one. Remaining ties go to
//     snapshot order. Averages run over all clusters, busy or not.
//   - The split never spans an unavailable pair nor exceeds the cluster cap:
//     a cluster is skipped only when taking it makes the rest impossible
//     (depth-first search in the same order). No cluster-count minimisation
//     is attempted: the order is CA's criterion.
//   - Non-fixed requests: the whole job (all components merged) goes to the
//     first cluster, in intra order, that holds it; otherwise components in
//     decreasing size go, first fit, onto clusters in average order.
//   - Fixed requests are placed as the user says (placeFixed).
type CommAware struct{}

// Name is "ca".
func (CommAware) Name() string { return "ca" }

// Place places req by Communication-Aware placement.
func (CommAware) Place(req Request, snap Snapshot, opts Options) Outcome {
	if err := checkOptions(opts); err == nil && snap.Net == nil {
		return Outcome{Code: Internal, Reason: ReasonNoNetwork, Detail: "ca needs the network view of the information service"}
	}
	bw := opts.CAMetric == MetricBandwidth
	return place(req, snap, opts, func(j *job, v *view, lim limits, b *budget) ([]Assignment, bool) {
		return commAware(j, v, lim, b, bw)
	}, false)
}

func commAware(j *job, v *view, lim limits, b *budget, bandwidth bool) ([]Assignment, bool) {
	n := len(v.names)
	// score(a, b) is lower-is-better: latency in seconds, or minus bandwidth.
	score := func(a, b string) (float64, bool) {
		if bandwidth {
			x, ok := v.net.Bandwidth(a, b)
			return -x, ok
		}
		d, ok := v.net.Latency(a, b)
		return d.Seconds(), ok
	}
	intra, intraOK := make([]float64, n), make([]bool, n)
	avg, avgOK := make([]float64, n), make([]bool, n)
	for i, c := range v.names {
		intra[i], intraOK[i] = score(c, c)
		sum, k := 0.0, 0
		for _, d := range v.names {
			if x, ok := score(c, d); ok {
				sum += x
				k++
			}
		}
		if k > 0 {
			avg[i], avgOK[i] = sum/float64(k), true
		}
	}
	if !b.step() {
		return nil, false
	}
	for _, i := range byScore(intra, intraOK) {
		if v.idle[i] >= j.total {
			return []Assignment{{Cluster: v.names[i], Size: j.total}}, true
		}
	}
	order := byScore(avg, avgOK)
	s := newSearch(v, lim, b)
	var done bool
	if j.typ == Flexible {
		done = s.fill(order, 0, j.total)
	} else {
		done = s.items(j.sizes, 0, static(order))
	}
	if done {
		return s.result(), true
	}
	return nil, false
}
