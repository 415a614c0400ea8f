package placement

import (
	"fmt"
	"slices"
)

// view is a validated snapshot, indexed by cluster position.
type view struct {
	names []string
	idle  []int
	capa  []int
	// pairs[i*len(names)+j] says whether one job may span clusters i and j:
	// pairUnknown until pair first asks. A scheduler's scan places every
	// waiting job on one snapshot and most placements look at a pair or two
	// (a flexible job on one cluster at none), so the Net is asked only for
	// those.
	pairs []pairState
	net   Net
}

type pairState uint8

const (
	pairUnknown pairState = iota
	pairAvailable
	pairUnavailable
)

// newView validates a snapshot: names non-empty and unique, 0 <= Idle <=
// Capacity. A pair i != j is available when the Net reports both latency and
// bandwidth, in both directions; a nil Net makes every pair available.
func newView(s Snapshot) (*view, error) {
	n := len(s.Clusters)
	counts := make([]int, 2*n)
	v := &view{
		names: make([]string, n),
		idle:  counts[:n:n],
		capa:  counts[n:],
		pairs: make([]pairState, n*n),
		net:   s.Net,
	}
	for i, c := range s.Clusters {
		if c.Name == "" {
			return nil, fmt.Errorf("cluster %d has no name", i)
		}
		// A grid has a handful of clusters: a scan of the names before
		// beats a map made for every placement.
		if _, dup := v.index(c.Name); dup {
			return nil, fmt.Errorf("cluster %q listed twice", c.Name)
		}
		if c.Capacity < 0 || c.Idle < 0 || c.Idle > c.Capacity {
			return nil, fmt.Errorf("cluster %q: idle %d, capacity %d: want 0 <= idle <= capacity", c.Name, c.Idle, c.Capacity)
		}
		v.names[i], v.idle[i], v.capa[i] = c.Name, c.Idle, c.Capacity
	}
	return v, nil
}

// index is the position of the named cluster.
func (v *view) index(name string) (int, bool) {
	for i, c := range v.names {
		if c == name {
			return i, true
		}
	}
	return -1, false
}

// available says whether one job may span clusters i and j.
func (v *view) available(i, j int) bool {
	if i == j || v.net == nil {
		return true
	}
	n := len(v.names)
	p := &v.pairs[i*n+j]
	if *p == pairUnknown {
		*p = pairUnavailable
		if pairOK(v.net, v.names[i], v.names[j]) {
			*p = pairAvailable
		}
		v.pairs[j*n+i] = *p
	}
	return *p == pairAvailable
}

func pairOK(net Net, a, b string) bool {
	for _, p := range [2][2]string{{a, b}, {b, a}} {
		if _, ok := net.Latency(p[0], p[1]); !ok {
			return false
		}
		if _, ok := net.Bandwidth(p[0], p[1]); !ok {
			return false
		}
	}
	return true
}

// allIdle is the same grid with every node idle.
func (v *view) allIdle() *view {
	w := *v
	w.idle = append([]int(nil), v.capa...)
	return &w
}

// job is a validated, normalised request.
type job struct {
	typ   RequestType
	total int
	// sizes of a non-fixed request's components, largest first.
	sizes []int
	// fixed holds a fixed request's components merged per cluster, in order
	// of first appearance.
	fixed []Assignment
	files []File
}

// normalize validates req against v. A non-empty reason makes the job
// NeverFits.
func normalize(req Request, v *view) (j *job, reason, detail string) {
	bad := func(format string, args ...any) (*job, string, string) {
		return nil, ReasonInvalidRequest, fmt.Sprintf(format, args...)
	}
	j = &job{typ: req.Type, files: req.Files}
	for _, f := range req.Files {
		if f.Size < 0 {
			return bad("file %q has negative size %d", f.Name, f.Size)
		}
		if len(f.Replicas) == 0 {
			return bad("file %q has no replica", f.Name)
		}
	}
	switch req.Type {
	case Flexible:
		if req.Total < 1 {
			return bad("flexible request with total %d", req.Total)
		}
		j.total = req.Total
		return j, "", ""
	case Fixed, NonFixed:
	default:
		return bad("request type %v", req.Type)
	}
	if len(req.Components) == 0 {
		return bad("%v request without components", req.Type)
	}
	at := map[string]int{}
	for k, c := range req.Components {
		if c.Size < 1 {
			return bad("component %d has size %d", k, c.Size)
		}
		j.total += c.Size
		if req.Type == NonFixed {
			j.sizes = append(j.sizes, c.Size)
			continue
		}
		if c.Cluster == "" {
			return bad("fixed component %d names no cluster", k)
		}
		if _, ok := v.index(c.Cluster); !ok {
			return nil, ReasonUnknownCluster, fmt.Sprintf("component %d: cluster %q", k, c.Cluster)
		}
		if p, seen := at[c.Cluster]; seen {
			j.fixed[p].Size += c.Size
		} else {
			at[c.Cluster] = len(j.fixed)
			j.fixed = append(j.fixed, Assignment{Cluster: c.Cluster, Size: c.Size})
		}
	}
	if req.Total != 0 && req.Total != j.total {
		return bad("total %d but components sum to %d", req.Total, j.total)
	}
	slices.SortFunc(j.sizes, largestFirst)
	return j, "", ""
}

func checkOptions(o Options) error {
	if o.MaxClusters < 0 {
		return fmt.Errorf("MaxClusters %d < 0", o.MaxClusters)
	}
	switch o.CAMetric {
	case "", MetricLatency, MetricBandwidth:
		return nil
	}
	return fmt.Errorf("CAMetric %q (known: %s, %s)", o.CAMetric, MetricLatency, MetricBandwidth)
}

// limits are the constraints a search honours. Relaxing them one at a time
// tells which one blocked a placement.
type limits struct {
	maxClusters int  // 0 = no cap
	pairs       bool // never span an unavailable pair
	files       bool // CF: only clusters the input files can reach
}

// searchBudget bounds the steps of one policy run. DAS-3 sized problems take
// a few dozen; the bound only protects against pathological requests (many
// components on many clusters that cannot be placed).
const searchBudget = 1 << 17

type budget struct {
	left  int
	spent bool
}

func (b *budget) step() bool {
	if b.left <= 0 {
		b.spent = true
		return false
	}
	b.left--
	return true
}

// coreFunc places a validated non-fixed or flexible job on v under lim, or
// reports that it cannot.
type coreFunc func(j *job, v *view, lim limits, b *budget) ([]Assignment, bool)

// place is the frame every policy runs in: validate, use core (or the fixed
// placement) on the snapshot, and on failure decide NoFitNow versus
// NeverFits by running it again with every node idle. usesFiles says whether
// the policy honours file staging (CF).
func place(req Request, snap Snapshot, opts Options, core coreFunc, usesFiles bool) Outcome {
	if err := checkOptions(opts); err != nil {
		return Outcome{Code: Internal, Reason: ReasonBadOptions, Detail: err.Error()}
	}
	v, err := newView(snap)
	if err != nil {
		return Outcome{Code: Internal, Reason: ReasonBadSnapshot, Detail: err.Error()}
	}
	j, reason, detail := normalize(req, v)
	if reason != "" {
		return Outcome{Code: NeverFits, Reason: reason, Detail: detail}
	}
	if j.typ == Fixed {
		core, usesFiles = placeFixed, false
	}
	base := limits{maxClusters: opts.MaxClusters, pairs: true, files: usesFiles}
	spent := false
	run := func(v *view, lim limits) ([]Assignment, bool) {
		b := &budget{left: searchBudget}
		a, ok := core(j, v, lim, b)
		spent = spent || b.spent
		return a, ok
	}
	limited := Outcome{Code: NoFitNow, Reason: ReasonSearchLimit}
	if a, ok := run(v, base); ok {
		return Outcome{Code: Placed, Reason: ReasonPlaced, Assignments: a}
	}
	if spent {
		return limited
	}
	full := v.allIdle()
	if _, ok := run(full, base); ok {
		reason := classify(run, v, base)
		if spent {
			return limited
		}
		return Outcome{Code: NoFitNow, Reason: reason}
	}
	reason = classify(run, full, base)
	if spent {
		return limited
	}
	if reason == ReasonNotEnoughIdle {
		reason = ReasonExceedsCapacity
	}
	return Outcome{Code: NeverFits, Reason: reason}
}

// classify names the constraint that blocks a placement on v: none (not
// enough idle nodes), a single one whose relaxation allows a placement, or
// several together.
func classify(run func(*view, limits) ([]Assignment, bool), v *view, base limits) string {
	if _, ok := run(v, limits{}); !ok {
		return ReasonNotEnoughIdle
	}
	if base.files {
		l := base
		l.files = false
		if _, ok := run(v, l); ok {
			return ReasonFilesUnreachable
		}
	}
	if base.pairs {
		l := base
		l.pairs = false
		if _, ok := run(v, l); ok {
			return ReasonUnavailablePair
		}
	}
	if base.maxClusters > 0 {
		l := base
		l.maxClusters = 0
		if _, ok := run(v, l); ok {
			return ReasonClusterCap
		}
	}
	return ReasonConstraints
}

// placeFixed is the placement of a fixed request, the same under every
// policy: each named cluster must hold its (merged) component now, the named
// clusters must not include an unavailable pair, and their number must not
// exceed the cap. Input files are not checked: the user chose the clusters.
func placeFixed(j *job, v *view, lim limits, _ *budget) ([]Assignment, bool) {
	if lim.maxClusters > 0 && len(j.fixed) > lim.maxClusters {
		return nil, false
	}
	for a, x := range j.fixed {
		xi, _ := v.index(x.Cluster)
		if v.idle[xi] < x.Size {
			return nil, false
		}
		for _, y := range j.fixed[:a] {
			if yi, _ := v.index(y.Cluster); lim.pairs && !v.available(xi, yi) {
				return nil, false
			}
		}
	}
	return append([]Assignment(nil), j.fixed...), true
}
