package comm

import "time"

// The ideal cost of a collective: how long it takes over the scenario's
// links (Options.Links, undilated), from every rank entering it at the
// same instant to the last rank leaving it, when each message costs its
// link's latency plus its size over the link's bandwidth and nothing else
// (no host, no queueing). An application uses it for the phase it does
// once (a final gather, broadcast or reduction), which a time scale would
// otherwise make k times longer in scenario time (package apps, Params.Credit).
// Without Options.Links every cost is 0.

// IdealHop is the ideal one-way time of a message of bytes from rank from
// to rank to.
func (c *Comm) IdealHop(from, to, bytes int) time.Duration {
	peers := c.t().peers
	if from == to || from < 0 || to < 0 || from >= len(peers) || to >= len(peers) || len(c.opts.Links.Clusters) == 0 {
		return 0
	}
	l, err := c.opts.Links.Link(peers[from].Cluster, peers[to].Cluster)
	if err != nil {
		return 0
	}
	d := l.Latency
	if l.Bandwidth > 0 {
		d += time.Duration(float64(bytes) / l.Bandwidth * float64(time.Second))
	}
	return d
}

// IdealBcast is the ideal cost of Bcast from root of bytes along its
// binomial tree (a rank's sends to its children leave together: small
// messages do not wait for each other).
func (c *Comm) IdealBcast(root, bytes int) time.Duration {
	n := c.Size()
	at := make([]time.Duration, n) // when each rank holds the data
	var last time.Duration
	// Ranks in the order of the tree: a parent is settled before its
	// children (virtual ranks ascend down the tree).
	for v := 0; v < n; v++ {
		r := (v + root) % n
		_, children := bcastTree(n, r, root)
		t := at[r]
		for _, ch := range children {
			at[ch] = t + c.IdealHop(r, ch, bytes)
		}
		last = max(last, at[r])
	}
	return last
}

// IdealGather is the ideal cost of Gather on root of bytes from every rank:
// each sends straight to the root.
func (c *Comm) IdealGather(root, bytes int) time.Duration {
	var last time.Duration
	for j := range c.Size() {
		last = max(last, c.IdealHop(j, root, bytes))
	}
	return last
}

// IdealAllreduce is the ideal cost of AllreduceFloat64 of a vector of bytes:
// the fold of the extra ranks, the doubling rounds and the results handed
// back.
func (c *Comm) IdealAllreduce(bytes int) time.Duration {
	n := c.Size()
	at := make([]time.Duration, n)
	folds := make([]int, n)
	exch := make([][]int, n)
	rounds := 0
	for r := range n {
		folds[r], exch[r] = allreduceSchedule(n, r)
		rounds = max(rounds, len(exch[r]))
	}
	for r := range n { // the even rank of a pair sends to the odd one
		if f := folds[r]; f > r {
			at[f] = max(at[f], at[r]+c.IdealHop(r, f, bytes))
		}
	}
	next := make([]time.Duration, n)
	for i := range rounds {
		copy(next, at)
		for r := range n {
			if i < len(exch[r]) {
				p := exch[r][i]
				next[r] = max(at[r], at[p]+c.IdealHop(p, r, bytes))
			}
		}
		copy(at, next)
	}
	var last time.Duration
	for r := range n {
		if f := folds[r]; f >= 0 && f < r { // the odd rank hands the result back
			at[f] = at[r] + c.IdealHop(r, f, bytes)
		}
	}
	for _, t := range at {
		last = max(last, t)
	}
	return last
}
