package scenarios

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// Defaults applied when a field is absent.
const (
	DefaultSeed           = 1
	DefaultTimeScale      = 1.0
	DefaultDilation       = 1.0
	DefaultProcessors     = 2
	DefaultSpeed          = 1.0
	DefaultScanPeriod     = 30 * time.Second
	DefaultPlacementTries = 30
	DefaultStartupDelay   = 10 * time.Second
	DefaultProbePeriod    = 300 * time.Second
	DefaultCAMetric       = "latency"
	DefaultBackgroundJob  = 900 * time.Second
	DefaultBackgroundMax  = 8 // nodes per local job

	// Malleability (policy.malleability, workload.malleable).
	DefaultThreshold         = 1.0
	DefaultPollPeriod        = 30 * time.Second
	DefaultOpTimeout         = time.Hour
	DefaultMalleableFraction = 1.0
)

// MalleabilityPlacement is the only placement policy the malleability
// manager uses: Worst Fit on one cluster.
const MalleabilityPlacement = "wf"

// maxGenerated bounds the number of generated jobs of one scenario, so that
// a mistyped rate fails instead of exhausting memory.
const maxGenerated = 1_000_000

var (
	scenarioName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	clusterName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	das3Names    = []string{netem.Vrije, netem.Amsterdam, netem.Delft, netem.MultimediaN, netem.Leiden}
	requestKinds = []string{Fixed, NonFixed, Flexible}
	caMetrics    = []string{"latency", "bandwidth"}
)

// resolved is a scenario after validation: defaults filled in, names turned
// into indices, the link matrix built. Expand turns it into a Plan.
type resolved struct {
	seed                int64
	timeScale, dilation float64
	topo                topo
	clusters            []Cluster
	links               netem.Matrix
	policy              Policy
	background          []Background

	app        string
	apps       []string // workload.applications, or nil
	args       map[string]float64
	files      []File
	request    string
	components int
	fixed      []int // cluster index per component, or nil
	sizes      []int
	generate   bool
	netUtil    float64
	meanGap    time.Duration
	duration   time.Duration
	maxJobs    int
	explicit   []Job // IDs not yet assigned

	malleable bool    // workload.malleable given
	fraction  float64 // malleable share of generated jobs
	// bounds of malleable jobs per application: workload.malleable.bounds
	// and, for generated applications, the profiles' bounds.
	bounds map[string]ProfileBounds
}

// topo is the included platform as the feasibility checks see it.
type topo struct {
	names   []string
	nodes   []int
	unavail [][]bool
	cap     int // max clusters per job, 0: none
}

func (t *topo) index(name string) int { return slices.Index(t.names, name) }

func (t *topo) total() int {
	n := 0
	for _, v := range t.nodes {
		n += v
	}
	return n
}

// assign places parts (one per cluster, distinct clusters, no unavailable
// pair, each within its cluster's nodes) trying clusters in the given order;
// it returns the cluster index of every part, or nil when none exists.
func (t *topo) assign(parts []int, order []int) []int {
	if len(parts) == 0 || (t.cap > 0 && len(parts) > t.cap) || len(parts) > len(t.names) {
		return nil
	}
	out := make([]int, len(parts))
	used := make([]bool, len(t.names))
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(parts) {
			return true
		}
	next:
		for _, j := range order {
			if used[j] || t.nodes[j] < parts[k] {
				continue
			}
			for _, u := range out[:k] {
				if t.unavail[u][j] {
					continue next
				}
			}
			used[j], out[k] = true, j
			if rec(k + 1) {
				return true
			}
			used[j] = false
		}
		return false
	}
	if !rec(0) {
		return nil
	}
	return out
}

func (t *topo) inOrder() []int {
	o := make([]int, len(t.names))
	for i := range o {
		o[i] = i
	}
	return o
}

// largest returns the largest number of nodes one job can get: the best set
// of clusters with no unavailable pair and at most cap clusters.
func (t *topo) largest() (int, []string) {
	n := len(t.names)
	limit := t.cap
	if limit <= 0 || limit > n {
		limit = n
	}
	if n > 20 { // too many subsets: take the largest clusters, ignoring pairs
		o := t.inOrder()
		sort.SliceStable(o, func(a, b int) bool { return t.nodes[o[a]] > t.nodes[o[b]] })
		sum, names := 0, []string{}
		for _, j := range o[:limit] {
			sum += t.nodes[j]
			names = append(names, t.names[j])
		}
		return sum, names
	}
	best, bestSet := 0, 0
	for set := 1; set < 1<<n; set++ {
		count, sum, ok := 0, 0, true
		for i := 0; i < n && ok; i++ {
			if set&(1<<i) == 0 {
				continue
			}
			count++
			sum += t.nodes[i]
			for j := 0; j < i; j++ {
				if set&(1<<j) != 0 && t.unavail[i][j] {
					ok = false
					break
				}
			}
		}
		if ok && count <= limit && sum > best {
			best, bestSet = sum, set
		}
	}
	var names []string
	for i := range n {
		if bestSet&(1<<i) != 0 {
			names = append(names, t.names[i])
		}
	}
	return best, names
}

// Split divides total nodes into parts near-equal components, the larger
// ones first: Split(32, 3) = [11 11 10]. It returns nil when parts < 1 or
// total < parts.
func Split(total, parts int) []int {
	if parts < 1 || total < parts {
		return nil
	}
	out := make([]int, parts)
	for i := range out {
		out[i] = total / parts
		if i < total%parts {
			out[i]++
		}
	}
	return out
}

// validator collects errors.
type validator struct{ errs Errors }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func secs(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

func known(list []string, name string) bool { return list == nil || slices.Contains(list, name) }

func sortedList(list []string) string {
	l := slices.Clone(list)
	sort.Strings(l)
	return strings.Join(l, ", ")
}

// Validate checks the scenario against env and returns every problem as
// Errors (nil when the scenario is valid).
func (s *Scenario) Validate(env Env) error {
	_, errs := s.resolve(env)
	return errs.err()
}

func (s *Scenario) resolve(env Env) (*resolved, Errors) {
	v := &validator{}
	r := &resolved{seed: DefaultSeed, timeScale: DefaultTimeScale, dilation: DefaultDilation}

	if s.Name == "" {
		v.add("name", "is required")
	} else if !scenarioName.MatchString(s.Name) {
		v.add("name", "%q: use letters, digits, '.', '_' and '-' (starting with a letter or digit)", s.Name)
	}
	if s.Seed != nil {
		r.seed = *s.Seed
	}
	if s.TimeScale != nil {
		r.timeScale = *s.TimeScale
		if !finite(r.timeScale) || r.timeScale <= 0 {
			v.add("time_scale", "must be greater than 0, got %g", r.timeScale)
		}
	}
	if s.Dilation != nil {
		r.dilation = *s.Dilation
		if !finite(r.dilation) || r.dilation < 1 {
			v.add("dilation", "must be at least 1, got %g", r.dilation)
		}
	}

	topoOK := v.topology(s, r)
	// The policy is checked before the workload (which needs max_clusters)
	// but reported after it, in document order.
	pv := &validator{}
	pv.policy(s, env, r)
	v.workload(s, env, r, topoOK)
	return r, append(v.errs, pv.errs...)
}

// topology validates clusters, include/exclude and links, and fills
// r.clusters, r.topo and r.links. It reports whether the included platform is
// sound enough for the workload's feasibility checks.
func (v *validator) topology(s *Scenario, r *resolved) bool {
	t := &s.Topology
	ok := true
	listed := map[string]int{}
	if len(t.Clusters) == 0 {
		v.add("topology.clusters", "at least one cluster is required")
		ok = false
	}
	preset := t.Links.Preset
	for i, c := range t.Clusters {
		p := fmt.Sprintf("topology.clusters[%d]", i)
		switch {
		case c.Name == "":
			v.add(p+".name", "is required")
			ok = false
		case !clusterName.MatchString(c.Name):
			v.add(p+".name", "%q: use lower-case letters, digits and '-' (starting with a letter or digit)", c.Name)
			ok = false
		default:
			if first, dup := listed[c.Name]; dup {
				v.add(p+".name", "duplicate cluster name %q (also topology.clusters[%d])", c.Name, first)
				ok = false
			} else {
				listed[c.Name] = i
			}
			if preset == "das3" && !slices.Contains(das3Names, c.Name) {
				v.add(p+".name", "%q is not a DAS-3 cluster, which the das3 link preset needs (DAS-3 clusters: %s)",
					c.Name, strings.Join(das3Names, ", "))
				ok = false
			}
		}
		if c.Nodes < 1 {
			v.add(p+".nodes", "must be at least 1, got %d", c.Nodes)
			ok = false
		}
		if c.Processors != nil && *c.Processors < 1 {
			v.add(p+".processors", "must be at least 1, got %d", *c.Processors)
		}
		if !finite(c.CPUGHz) || c.CPUGHz < 0 {
			v.add(p+".cpu_ghz", "must not be negative, got %g", c.CPUGHz)
		}
		if c.Speed != nil && (!finite(*c.Speed) || *c.Speed <= 0) {
			v.add(p+".speed", "must be greater than 0, got %g", *c.Speed)
		}
		if c.Interconnect != "" && c.Interconnect != Myri10G && c.Interconnect != GbE {
			v.add(p+".interconnect", "unknown interconnect %q (known: %s, %s)", c.Interconnect, GbE, Myri10G)
		}
	}

	// Which clusters take part.
	included := map[string]bool{}
	for n := range listed {
		included[n] = true
	}
	checkNames := func(field string, names []string) {
		seen := map[string]bool{}
		for i, n := range names {
			p := fmt.Sprintf("topology.%s[%d]", field, i)
			if _, isListed := listed[n]; !isListed {
				v.add(p, "unknown cluster %q", n)
				ok = false
			}
			if seen[n] {
				v.add(p, "cluster %q named twice", n)
			}
			seen[n] = true
		}
	}
	switch {
	case t.Include != nil && t.Exclude != nil:
		v.add("topology.exclude", "give include or exclude, not both")
		ok = false
	case t.Include != nil:
		if len(t.Include) == 0 {
			v.add("topology.include", "must name at least one cluster (leave it out to include all)")
			ok = false
		}
		checkNames("include", t.Include)
		included = map[string]bool{}
		for _, n := range t.Include {
			included[n] = true
		}
	case t.Exclude != nil:
		checkNames("exclude", t.Exclude)
		for _, n := range t.Exclude {
			delete(included, n)
		}
		if len(included) == 0 && len(listed) > 0 {
			v.add("topology.exclude", "excludes every cluster")
			ok = false
		}
	}

	// Included clusters, in file order, with defaults.
	seen := map[string]bool{}
	for _, c := range t.Clusters {
		if !included[c.Name] || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		cl := Cluster{Name: c.Name, Nodes: c.Nodes, Processors: DefaultProcessors, Speed: DefaultSpeed,
			CPUGHz: c.CPUGHz, Interconnect: c.Interconnect}
		if c.Processors != nil {
			cl.Processors = *c.Processors
		}
		if c.Speed != nil {
			cl.Speed = *c.Speed
		}
		if cl.Interconnect == "" {
			cl.Interconnect = Myri10G
			if preset == GbE || (preset == "das3" && c.Name == netem.Delft) {
				cl.Interconnect = GbE
			}
		}
		r.clusters = append(r.clusters, cl)
		r.topo.names = append(r.topo.names, cl.Name)
		r.topo.nodes = append(r.topo.nodes, cl.Nodes)
	}

	// Links.
	presetOK := true
	if preset == "" {
		v.add("topology.links.preset", "is required (known: %s)", strings.Join(netem.PresetNames(), ", "))
		presetOK = false
	} else if !slices.Contains(netem.PresetNames(), preset) {
		v.add("topology.links.preset", "unknown preset %q (known: %s)", preset, strings.Join(netem.PresetNames(), ", "))
		presetOK = false
	}
	type pairKey [2]string
	pairSeen := map[pairKey]int{}
	for i, pr := range t.Links.Pairs {
		p := fmt.Sprintf("topology.links.pairs[%d]", i)
		pairOK := true
		for _, e := range []struct{ field, name string }{{"a", pr.A}, {"b", pr.B}} {
			if e.name == "" {
				v.add(p+"."+e.field, "is required")
				pairOK = false
			} else if _, isListed := listed[e.name]; !isListed {
				v.add(p+"."+e.field, "unknown cluster %q", e.name)
				pairOK = false
			}
		}
		if pairOK && pr.A == pr.B {
			v.add(p+".b", "names cluster %q twice; a pair override links two different clusters", pr.A)
			pairOK = false
		}
		if pairOK {
			k := pairKey{min(pr.A, pr.B), max(pr.A, pr.B)}
			if first, dup := pairSeen[k]; dup {
				v.add(p, "pair %s-%s already overridden by topology.links.pairs[%d]", pr.A, pr.B, first)
			}
			pairSeen[k] = i
		}
		if pr.LatencyMS != nil && (!finite(*pr.LatencyMS) || *pr.LatencyMS < 0) {
			v.add(p+".latency_ms", "must not be negative, got %g", *pr.LatencyMS)
		}
		if pr.BandwidthMBps != nil && (!finite(*pr.BandwidthMBps) || *pr.BandwidthMBps <= 0) {
			v.add(p+".bandwidth_mbps", "must be greater than 0, got %g", *pr.BandwidthMBps)
		}
		if pr.Unavailable && (pr.LatencyMS != nil || pr.BandwidthMBps != nil) {
			v.add(p+".unavailable", "an unavailable pair takes no latency_ms or bandwidth_mbps")
		}
		if !pr.Unavailable && pr.LatencyMS == nil && pr.BandwidthMBps == nil {
			v.add(p, "overrides nothing: give latency_ms, bandwidth_mbps or unavailable")
		}
	}

	n := len(r.topo.names)
	r.topo.unavail = make([][]bool, n)
	for i := range r.topo.unavail {
		r.topo.unavail[i] = make([]bool, n)
	}
	if !ok || !presetOK || n == 0 {
		return ok && n > 0
	}
	m, err := netem.Preset(preset, r.topo.names)
	if err != nil {
		v.add("topology.links.preset", "%v", err)
		return ok
	}
	for i, pr := range t.Links.Pairs {
		a, b := m.Index(pr.A), m.Index(pr.B)
		if a < 0 || b < 0 || a == b {
			continue // pair of an excluded cluster, or already reported
		}
		l := m.Links[a][b]
		switch {
		case pr.Unavailable:
			l = netem.Link{Unavailable: true}
		case l.Unavailable && (pr.LatencyMS == nil || pr.BandwidthMBps == nil):
			v.add(fmt.Sprintf("topology.links.pairs[%d]", i),
				"%s-%s is unavailable in preset %s; give both latency_ms and bandwidth_mbps to make it available", pr.A, pr.B, preset)
			continue
		default:
			l.Unavailable = false
			if pr.LatencyMS != nil {
				l.Latency = time.Duration(math.Round(*pr.LatencyMS * float64(time.Millisecond)))
			}
			if pr.BandwidthMBps != nil {
				l.Bandwidth = *pr.BandwidthMBps * 1e6
			}
		}
		m.Links[a][b], m.Links[b][a] = l, l
	}
	for i := range n {
		for j := range n {
			r.topo.unavail[i][j] = i != j && m.Links[i][j].Unavailable
		}
	}
	r.links = m
	return ok
}

func (v *validator) policy(s *Scenario, env Env, r *resolved) {
	ps := &s.Policy
	p := Policy{
		Placement: ps.Placement, MaxClusters: ps.MaxClusters, CAMetric: ps.CAMetric,
		ScanPeriod: DefaultScanPeriod, StartupDelay: DefaultStartupDelay, ProbePeriod: DefaultProbePeriod,
		PlacementTries: DefaultPlacementTries,
	}
	switch {
	case ps.Placement == "":
		v.add("policy.placement", "is required")
	case !known(env.Policies, ps.Placement):
		v.add("policy.placement", "unknown policy %q (known: %s)", ps.Placement, sortedList(env.Policies))
	}
	if ps.MaxClusters < 0 {
		v.add("policy.max_clusters", "must not be negative (0 means no cap), got %d", ps.MaxClusters)
	}
	if p.CAMetric == "" {
		p.CAMetric = DefaultCAMetric
	} else if !slices.Contains(caMetrics, p.CAMetric) {
		v.add("policy.ca_metric", "unknown metric %q (known: %s)", p.CAMetric, strings.Join(caMetrics, ", "))
	}
	if ps.ScanPeriodS != nil {
		if !finite(*ps.ScanPeriodS) || *ps.ScanPeriodS <= 0 {
			v.add("policy.scan_period_s", "must be greater than 0, got %g", *ps.ScanPeriodS)
		}
		p.ScanPeriod = secs(*ps.ScanPeriodS)
	}
	if ps.PlacementTries != nil {
		if *ps.PlacementTries < 1 {
			v.add("policy.placement_tries", "must be at least 1, got %d", *ps.PlacementTries)
		}
		p.PlacementTries = *ps.PlacementTries
	}
	if ps.StartupDelayS != nil {
		if !finite(*ps.StartupDelayS) || *ps.StartupDelayS < 0 {
			v.add("policy.startup_delay_s", "must not be negative, got %g", *ps.StartupDelayS)
		}
		p.StartupDelay = secs(*ps.StartupDelayS)
	}
	if ps.ProbePeriodS != nil {
		if !finite(*ps.ProbePeriodS) || *ps.ProbePeriodS <= 0 {
			v.add("policy.probe_period_s", "must be greater than 0, got %g", *ps.ProbePeriodS)
		}
		p.ProbePeriod = secs(*ps.ProbePeriodS)
	}
	p.Malleability = v.malleability(s, env, r)
	r.policy = p
	r.topo.cap = max(ps.MaxClusters, 0)
}

// malleability validates policy.malleability and what it requires of the
// rest of the policy and of the topology; nil when the block is absent.
func (v *validator) malleability(s *Scenario, env Env, r *resolved) *Malleability {
	ms := s.Policy.Malleability
	if ms == nil {
		return nil
	}
	const p = "policy.malleability"
	m := &Malleability{Approach: ms.Approach, Policy: ms.Policy, Threshold: DefaultThreshold,
		PollPeriod: DefaultPollPeriod, OpTimeout: DefaultOpTimeout}
	switch {
	case ms.Approach == "":
		v.add(p+".approach", "is required%s", knownSuffix(env.Approaches))
	case !known(env.Approaches, ms.Approach):
		v.add(p+".approach", "unknown approach %q (known: %s)", ms.Approach, sortedList(env.Approaches))
	}
	switch {
	case ms.Policy == "":
		v.add(p+".policy", "is required%s", knownSuffix(env.MalleabilityPolicies))
	case !known(env.MalleabilityPolicies, ms.Policy):
		v.add(p+".policy", "unknown malleability policy %q (known: %s)", ms.Policy, sortedList(env.MalleabilityPolicies))
	}
	if ms.Threshold != nil {
		if t := *ms.Threshold; !finite(t) || t <= 0 || t > 1 {
			v.add(p+".threshold", "must be in (0, 1], got %g", t)
		} else {
			m.Threshold = t // an invalid one would make every size look too large
		}
	}
	for _, k := range sortedKeys(ms.Thresholds) {
		tp := p + ".thresholds." + k
		t := ms.Thresholds[k]
		good := v.clusterRef(tp, k, s, r) >= 0
		if !finite(t) || t <= 0 || t > 1 {
			v.add(tp, "must be in (0, 1], got %g", t)
			good = false
		}
		if good {
			if m.Thresholds == nil {
				m.Thresholds = map[string]float64{}
			}
			m.Thresholds[k] = t
		}
	}
	if ms.PollPeriodS != nil {
		if x := *ms.PollPeriodS; !finite(x) || x <= 0 {
			v.add(p+".poll_period_s", "must be greater than 0, got %g", x)
		}
		m.PollPeriod = secs(*ms.PollPeriodS)
	}
	if ms.OpTimeoutS != nil {
		if x := *ms.OpTimeoutS; !finite(x) || x <= 0 {
			v.add(p+".op_timeout_s", "must be greater than 0, got %g", x)
		}
		m.OpTimeout = secs(*ms.OpTimeoutS)
	}
	if ms.MaxTries != nil {
		if *ms.MaxTries < 0 {
			v.add(p+".max_tries", "must not be negative (0 means never), got %d", *ms.MaxTries)
		}
		m.MaxTries = *ms.MaxTries
	}
	if pl := s.Policy.Placement; pl != "" && pl != MalleabilityPlacement {
		v.add("policy.placement", "%q: the malleability manager places every job by Worst Fit on one cluster; use %s with policy.malleability",
			pl, MalleabilityPlacement)
	}
	// One rank per processor: the runner manages a malleable job as a set of
	// single-processor allocations, so every node is one processor.
	for i, c := range s.Topology.Clusters {
		if r.topo.index(c.Name) < 0 {
			continue
		}
		if n := DefaultProcessors; c.Processors == nil || *c.Processors != 1 {
			if c.Processors != nil {
				n = *c.Processors
			}
			v.add(fmt.Sprintf("topology.clusters[%d].processors", i),
				"must be 1 with policy.malleability (every processor is a single-processor node; sizes count processors), got %d", n)
		}
	}
	return m
}

func knownSuffix(list []string) string {
	if list == nil {
		return ""
	}
	return " (known: " + sortedList(list) + ")"
}

// capOf is the number of processors KOALA may hold on included cluster i:
// floor(threshold x processors), with processors = nodes (processors: 1).
func (r *resolved) capOf(i int) int {
	t := DefaultThreshold
	if m := r.policy.Malleability; m != nil {
		t = m.ThresholdOf(r.topo.names[i])
	}
	// The epsilon keeps 0.8 x 100 from flooring to 79.
	return int(math.Floor(t*float64(r.topo.nodes[i]) + 1e-9))
}

// capFits checks that a job of size processors fits what KOALA may hold on
// one cluster: cluster at, or any included cluster when at < 0.
func (r *resolved) capFits(size, at int) string {
	if at >= 0 {
		if c := r.capOf(at); size > c {
			return fmt.Sprintf("%d exceeds the %d processors KOALA may hold on %s (threshold x %d processors)", size, c, r.topo.names[at], r.topo.nodes[at])
		}
		return ""
	}
	caps := make([]string, len(r.topo.names))
	for i, n := range r.topo.names {
		if size <= r.capOf(i) {
			return ""
		}
		caps[i] = fmt.Sprintf("%s %d", n, r.capOf(i))
	}
	return fmt.Sprintf("%d exceeds what KOALA may hold on every included cluster (floor(threshold x processors): %s); the malleability manager does not co-allocate",
		size, strings.Join(caps, ", "))
}

// String renders the sizes: "2..46" or "2..32, powers of two".
func (b ProfileBounds) String() string {
	if b.PowerOfTwo {
		return fmt.Sprintf("%d..%d, powers of two", b.Min, b.Max)
	}
	return fmt.Sprintf("%d..%d", b.Min, b.Max)
}

// Valid reports whether a job may run on n processors.
func (b ProfileBounds) Valid(n int) bool {
	return n >= b.Min && n <= b.Max && (!b.PowerOfTwo || isPow2(n))
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// floorPow2 is the largest power of two <= n (0 for n < 1).
func floorPow2(n int) int {
	if n < 1 {
		return 0
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// ceilPow2 is the smallest power of two >= n (1 for n < 1).
func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// resizable checks that app can run as a malleable job: it resizes and has
// a profile (each check skipped when env does not list them).
func (v *validator) resizable(path, app string, env Env) bool {
	if !known(env.MalleableApps, app) {
		v.add(path, "application %q cannot resize (malleable applications: %s)", app, sortedList(env.MalleableApps))
		return false
	}
	if env.Profiles != nil {
		if _, ok := env.Profiles[app]; !ok {
			v.add(path, "application %q has no malleability profile (profiles: %s)", app, strings.Join(sortedKeys(env.Profiles), ", "))
			return false
		}
	}
	return true
}

// sizeBounds resolves the bounds of a malleable job of app: min and max
// (each absent one taken from def, else from the profile), intersected with
// the profile's bounds and rounded inwards to powers of two for a
// power-of-two application. Errors go to path.min, path.max and path.
func (v *validator) sizeBounds(path, app string, lo, hi *int, def *ProfileBounds, env Env) (ProfileBounds, bool) {
	prof, hasProf := env.Profiles[app]
	var b ProfileBounds
	switch {
	case def != nil:
		b = *def
	case hasProf:
		b = prof
	}
	ok := true
	for _, e := range []struct {
		field string
		given *int
		dst   *int
	}{{"min", lo, &b.Min}, {"max", hi, &b.Max}} {
		switch {
		case e.given != nil:
			*e.dst = *e.given
			if *e.given < 1 {
				v.add(path+"."+e.field, "must be at least 1, got %d", *e.given)
				ok = false
			}
		case def == nil && !hasProf:
			v.add(path+"."+e.field, "is required: no malleability profile of %s gives a default", app)
			ok = false
		}
	}
	if !ok {
		return b, false
	}
	if b.Max < b.Min {
		v.add(path+".max", "must not be below min (%d), got %d", b.Min, b.Max)
		return b, false
	}
	if hasProf {
		want := b
		b = ProfileBounds{Min: max(b.Min, prof.Min), Max: min(b.Max, prof.Max), PowerOfTwo: prof.PowerOfTwo}
		if b.PowerOfTwo {
			b.Min, b.Max = ceilPow2(b.Min), floorPow2(b.Max)
		}
		if b.Min > b.Max {
			v.add(path, "[%d, %d] leaves no size %s can run on (its profile: %s)", want.Min, want.Max, app, prof)
			return b, false
		}
	}
	return b, true
}

func (v *validator) app(path, name string, env Env) {
	switch {
	case name == "":
		v.add(path, "is required")
	case !known(env.Apps, name):
		v.add(path, "unknown application %q (known: %s)", name, sortedList(env.Apps))
	}
}

func (v *validator) args(path string, args map[string]float64) {
	for _, k := range sortedKeys(args) {
		if k == "" {
			v.add(path, "argument names must not be empty")
		} else if !finite(args[k]) {
			v.add(path+"."+k, "must be a finite number")
		}
	}
}

// clusterRef checks a cluster name used by the workload: it must be listed
// and included. It returns the included index or -1.
func (v *validator) clusterRef(path, name string, s *Scenario, r *resolved) int {
	if name == "" {
		v.add(path, "is required")
		return -1
	}
	if i := r.topo.index(name); i >= 0 {
		return i
	}
	for _, c := range s.Topology.Clusters {
		if c.Name == name {
			v.add(path, "cluster %q is not included in this scenario", name)
			return -1
		}
	}
	v.add(path, "unknown cluster %q", name)
	return -1
}

func (v *validator) files(path string, fs []FileSpec, s *Scenario, r *resolved) []File {
	var out []File
	names := map[string]int{}
	for i, f := range fs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if f.Name == "" {
			v.add(p+".name", "is required")
		} else if first, dup := names[f.Name]; dup {
			v.add(p+".name", "duplicate file name %q (also %s[%d])", f.Name, path, first)
		} else {
			names[f.Name] = i
		}
		if !finite(f.SizeMB) || f.SizeMB <= 0 {
			v.add(p+".size_mb", "must be greater than 0, got %g", f.SizeMB)
		}
		if len(f.Replicas) == 0 {
			v.add(p+".replicas", "must name at least one cluster holding the file")
		}
		seen := map[string]bool{}
		for j, c := range f.Replicas {
			rp := fmt.Sprintf("%s.replicas[%d]", p, j)
			v.clusterRef(rp, c, s, r)
			if seen[c] {
				v.add(rp, "cluster %q named twice", c)
			}
			seen[c] = true
		}
		out = append(out, File{Name: f.Name, Size: int64(math.Round(f.SizeMB * 1e6)), Replicas: slices.Clone(f.Replicas)})
	}
	return out
}

// unavailablePair returns the first unavailable pair among the clusters, or
// "" when there is none.
func (r *resolved) unavailablePair(idx []int) string {
	for a := range idx {
		for b := range a {
			if idx[a] >= 0 && idx[b] >= 0 && r.topo.unavail[idx[a]][idx[b]] {
				return fmt.Sprintf("%s and %s form an unavailable pair (no measured link); a job must not span them",
					r.topo.names[idx[b]], r.topo.names[idx[a]])
			}
		}
	}
	return ""
}

// fits checks that a job of the given size and request type can ever be
// placed on the included platform and returns the reason when not.
func (r *resolved) fits(size int, request string, components int) string {
	switch request {
	case Flexible:
		if most, on := r.topo.largest(); size > most {
			return fmt.Sprintf("%d exceeds the largest possible allocation (%d nodes on %s)", size, most, strings.Join(on, ", "))
		}
	default:
		parts := Split(size, components)
		if parts == nil {
			return fmt.Sprintf("%d nodes cannot be split into %d components", size, components)
		}
		if r.topo.assign(parts, r.topo.inOrder()) == nil {
			return fmt.Sprintf("%d exceeds the largest possible allocation: %d components of %s nodes fit no set of %d distinct clusters without an unavailable pair",
				size, components, joinInts(parts), components)
		}
	}
	return ""
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "+")
}

func (v *validator) workload(s *Scenario, env Env, r *resolved, topoOK bool) {
	w := &s.Workload
	mall := r.policy.Malleability != nil
	// The applications of generated jobs: application or applications.
	var genApps []string // known names only
	var genPaths []string
	switch {
	case w.Application != "" && w.Applications != nil:
		v.add("workload.applications", "give application or applications, not both")
	case w.Applications != nil:
		if len(w.Applications) == 0 {
			v.add("workload.applications", "must name at least one application (leave it out to use application)")
		}
		if w.Arrivals == nil {
			v.add("workload.applications", "applies to generated jobs (give arrivals); explicit jobs name their application")
		}
		seen := map[string]int{}
		for i, a := range w.Applications {
			ap := fmt.Sprintf("workload.applications[%d]", i)
			if first, dup := seen[a]; dup {
				v.add(ap, "application %q named twice (also workload.applications[%d]); the mix is uniform", a, first)
				continue
			}
			seen[a] = i
			n0 := len(v.errs)
			if v.app(ap, a, env); len(v.errs) == n0 {
				genApps, genPaths = append(genApps, a), append(genPaths, ap)
			}
		}
		r.apps = w.Applications
	case w.Application != "":
		n0 := len(v.errs)
		v.app("workload.application", w.Application, env)
		if len(v.errs) == n0 {
			genApps, genPaths = []string{w.Application}, []string{"workload.application"}
		}
	case w.Arrivals != nil:
		v.add("workload.application", "is required for generated jobs (or give applications)")
	}
	r.app = w.Application
	v.args("workload.args", w.Args)
	r.args = w.Args
	r.files = v.files("workload.input_files", w.InputFiles, s, r)

	r.request = w.Request
	if r.request == "" {
		r.request = Flexible
	} else if !slices.Contains(requestKinds, r.request) {
		v.add("workload.request", "unknown request type %q (known: %s)", r.request, strings.Join(requestKinds, ", "))
	}
	r.components = 1
	if w.Components != nil {
		r.components = *w.Components
		switch {
		case r.request == Flexible:
			v.add("workload.components", "applies to fixed and non-fixed requests only; a flexible request gives its total size")
		case r.components < 1:
			v.add("workload.components", "must be at least 1, got %d", r.components)
		case topoOK && r.components > len(r.topo.names):
			v.add("workload.components", "%d components need %d distinct clusters; %d included", r.components, r.components, len(r.topo.names))
		case r.topo.cap > 0 && r.components > r.topo.cap:
			v.add("workload.components", "%d components exceed policy.max_clusters %d", r.components, r.topo.cap)
		}
	}
	if mall && r.components > 1 && r.request != Flexible {
		v.add("workload.components", "must be 1 with policy.malleability: the malleability manager does not co-allocate, got %d", r.components)
	}
	componentsOK := r.components >= 1 && (!topoOK || r.components <= len(r.topo.names)) &&
		(r.topo.cap == 0 || r.components <= r.topo.cap) && (!mall || r.components == 1)

	fixedOK := true
	if w.FixedClusters != nil {
		if r.request != Fixed {
			v.add("workload.fixed_clusters", "applies to fixed requests only (workload.request is %s)", r.request)
			fixedOK = false
		} else if len(w.FixedClusters) != r.components {
			v.add("workload.fixed_clusters", "names %d clusters for %d components (workload.components)", len(w.FixedClusters), r.components)
			fixedOK = false
		}
		seen := map[string]bool{}
		for i, c := range w.FixedClusters {
			p := fmt.Sprintf("workload.fixed_clusters[%d]", i)
			j := v.clusterRef(p, c, s, r)
			if j < 0 {
				fixedOK = false
			}
			if seen[c] {
				v.add(p, "cluster %q named twice; components go to distinct clusters", c)
				fixedOK = false
			}
			seen[c] = true
			r.fixed = append(r.fixed, j)
		}
		if fixedOK && topoOK {
			if msg := r.unavailablePair(r.fixed); msg != "" {
				v.add("workload.fixed_clusters", "%s", msg)
				fixedOK = false
			}
		}
		if !fixedOK || r.request != Fixed {
			r.fixed = nil
		}
	}

	// Generated arrivals.
	if w.Arrivals == nil && len(w.Jobs) == 0 {
		v.add("workload", "give arrivals (generated jobs), jobs (an explicit list), or both")
	}
	if !finite(w.DurationS) || w.DurationS < 0 {
		v.add("workload.duration_s", "must not be negative, got %g", w.DurationS)
	}
	r.duration = secs(w.DurationS)
	if w.MaxJobs < 0 {
		v.add("workload.max_jobs", "must not be negative (0 means no cap), got %d", w.MaxJobs)
	}
	r.maxJobs = w.MaxJobs
	sizesOK := true
	for i, size := range w.Sizes {
		p := fmt.Sprintf("workload.sizes[%d]", i)
		if size < 1 {
			v.add(p, "must be at least 1, got %d", size)
			sizesOK = false
			continue
		}
		if !topoOK || !componentsOK || !slices.Contains(requestKinds, r.request) {
			continue
		}
		if mall {
			at := -1
			if r.fixed != nil {
				at = r.fixed[0]
			}
			if msg := r.capFits(size, at); msg != "" {
				v.add(p, "%s", msg)
				sizesOK = false
			}
		} else if r.fixed != nil {
			for k, part := range Split(size, r.components) {
				if part > r.topo.nodes[r.fixed[k]] {
					v.add(p, "%d exceeds the largest possible allocation: component %d (%d nodes) does not fit %s (%d nodes)",
						size, k, part, r.topo.names[r.fixed[k]], r.topo.nodes[r.fixed[k]])
					sizesOK = false
					break
				}
			}
		} else if msg := r.fits(size, r.request, r.components); msg != "" {
			v.add(p, "%s", msg)
			sizesOK = false
		}
	}
	r.sizes = w.Sizes
	v.malleableWorkload(s, env, r, genApps, genPaths)
	if a := w.Arrivals; a != nil {
		r.generate = true
		if len(w.Sizes) == 0 {
			v.add("workload.sizes", "generated arrivals need at least one job size")
			sizesOK = false
		}
		if w.DurationS <= 0 {
			v.add("workload.duration_s", "generated arrivals need a duration greater than 0")
		}
		switch {
		case (a.NetUtilization == nil) == (a.MeanInterarrivalS == nil):
			v.add("workload.arrivals", "give exactly one of net_utilization or mean_interarrival_s")
		case a.MeanInterarrivalS != nil:
			if m := *a.MeanInterarrivalS; !finite(m) || m <= 0 {
				v.add("workload.arrivals.mean_interarrival_s", "must be greater than 0, got %g", m)
			} else {
				r.meanGap = secs(m)
			}
		default:
			rho := *a.NetUtilization
			if !finite(rho) || rho <= 0 || rho > 1 {
				v.add("workload.arrivals.net_utilization", "must be in (0, 1], got %g", rho)
				break
			}
			r.netUtil = rho
			if env.Nominal == nil {
				v.add("workload.arrivals.net_utilization", "needs the applications' nominal execution times, which this environment does not provide")
				break
			}
			if !sizesOK || !topoOK || len(genApps) == 0 || len(genApps) != max(len(w.Applications), 1) {
				break // reported elsewhere
			}
			// M = E[size x T(app, size)] / (rho x total nodes), E over the
			// uniform application and size sets (malleable jobs at their
			// initial size).
			var work float64 // node-seconds
			good := true
			for _, app := range genApps {
				for i, size := range w.Sizes {
					d, err := env.Nominal(app, size)
					if err != nil {
						v.add(fmt.Sprintf("workload.sizes[%d]", i), "nominal time of %s on %d nodes: %v", app, size, err)
						good = false
						continue
					}
					if d <= 0 {
						v.add(fmt.Sprintf("workload.sizes[%d]", i), "nominal time of %s on %d nodes is %v; it must be positive", app, size, d)
						good = false
						continue
					}
					work += float64(size) * d.Seconds()
				}
			}
			if good {
				work /= float64(len(w.Sizes) * len(genApps))
				r.meanGap = secs(work / (rho * float64(r.topo.total())))
				if r.meanGap <= 0 {
					v.add("workload.arrivals.net_utilization", "gives a mean inter-arrival time of 0")
				}
			}
		}
		if r.meanGap > 0 && w.DurationS > 0 && w.MaxJobs == 0 {
			if expect := r.duration.Seconds() / r.meanGap.Seconds(); expect > maxGenerated/2 {
				v.add("workload.arrivals", "would generate about %.0f jobs (at most %d): lengthen the inter-arrival time or set max_jobs", expect, maxGenerated/2)
			}
		}
	}

	// Background load.
	r.background = make([]Background, len(r.clusters))
	if b := w.Background; b != nil {
		bg := Background{Min: b.Min, Max: b.Max, MeanJob: DefaultBackgroundJob, MaxJobNodes: DefaultBackgroundMax}
		if !finite(b.Min) || b.Min < 0 {
			v.add("workload.background.min", "must not be negative, got %g", b.Min)
		}
		if !finite(b.Max) || b.Max >= 1 {
			v.add("workload.background.max", "must be below 1, got %g", b.Max)
		} else if b.Max < b.Min {
			v.add("workload.background.max", "must not be below min (%g), got %g", b.Min, b.Max)
		}
		if b.MeanJobS != nil {
			if !finite(*b.MeanJobS) || *b.MeanJobS <= 0 {
				v.add("workload.background.mean_job_s", "must be greater than 0, got %g", *b.MeanJobS)
			}
			bg.MeanJob = secs(*b.MeanJobS)
		}
		if b.MaxJobNodes != nil {
			if *b.MaxJobNodes < 1 {
				v.add("workload.background.max_job_nodes", "must be at least 1, got %d", *b.MaxJobNodes)
			}
			bg.MaxJobNodes = *b.MaxJobNodes
		}
		for i := range r.background {
			r.background[i] = bg
		}
	}

	// Explicit jobs.
	for i, js := range w.Jobs {
		if j, ok := v.job(fmt.Sprintf("workload.jobs[%d]", i), js, s, env, r, topoOK); ok {
			r.explicit = append(r.explicit, j)
		}
	}
}

// malleableWorkload validates workload.malleable: the fraction, the bounds
// per application, and that the generated applications (genApps, located by
// genPaths) can run malleable at every size of workload.sizes. It fills
// r.malleable, r.fraction and r.bounds.
func (v *validator) malleableWorkload(s *Scenario, env Env, r *resolved, genApps, genPaths []string) {
	w := &s.Workload
	r.bounds = map[string]ProfileBounds{}
	mb := w.Malleable
	if mb == nil {
		return
	}
	r.malleable, r.fraction = true, DefaultMalleableFraction
	if mb.Fraction != nil {
		r.fraction = *mb.Fraction
		if !finite(r.fraction) || r.fraction < 0 || r.fraction > 1 {
			v.add("workload.malleable.fraction", "must be in [0, 1], got %g", r.fraction)
			r.fraction = 0 // no further checks of the generated applications
		}
	}
	for _, app := range sortedKeys(mb.Bounds) {
		bp := "workload.malleable.bounds." + app
		n0 := len(v.errs)
		if v.app(bp, app, env); len(v.errs) > n0 || !v.resizable(bp, app, env) {
			continue
		}
		b := mb.Bounds[app]
		if eb, ok := v.sizeBounds(bp, app, b.Min, b.Max, nil, env); ok {
			r.bounds[app] = eb
		}
	}
	if r.fraction == 0 || w.Arrivals == nil {
		return
	}
	if r.policy.Malleability == nil {
		v.add("workload.malleable", "malleable jobs need policy.malleability (the malleability manager runs them)")
	}
	for k, app := range genApps {
		if !v.resizable(genPaths[k], app, env) {
			continue
		}
		if _, given := mb.Bounds[app]; given {
			if _, ok := r.bounds[app]; !ok {
				continue // reported above
			}
		} else {
			eb, ok := v.sizeBounds("workload.malleable.bounds."+app, app, nil, nil, nil, env)
			if !ok {
				continue
			}
			r.bounds[app] = eb
		}
		b := r.bounds[app]
		for i, size := range w.Sizes {
			if size >= 1 && !b.Valid(size) {
				v.add(fmt.Sprintf("workload.sizes[%d]", i), "%d is not a valid initial size of malleable %s (sizes %s; workload.malleable.fraction is %g)",
					size, app, b, r.fraction)
			}
		}
	}
}

func (v *validator) job(p string, js JobSpec, s *Scenario, env Env, r *resolved, topoOK bool) (Job, bool) {
	w := &s.Workload
	n0 := len(v.errs)
	j := Job{Submit: secs(js.AtS), App: js.Application, Request: js.Request, Size: js.Size}
	if !finite(js.AtS) || js.AtS < 0 {
		v.add(p+".at_s", "must not be negative, got %g", js.AtS)
	} else if w.DurationS > 0 && js.AtS >= w.DurationS {
		v.add(p+".at_s", "%g is outside the submission window [0, %g) of workload.duration_s", js.AtS, w.DurationS)
	}
	if j.App == "" {
		j.App = w.Application
	}
	if js.Application != "" {
		v.app(p+".application", js.Application, env)
	} else if j.App == "" {
		v.add(p+".application", "is required (workload.application gives no default)")
	}
	v.args(p+".args", js.Args)
	// Args: the workload's (only for one of the workload's applications)
	// overlaid by the job's.
	workloadApp := j.App != "" && (j.App == w.Application || slices.Contains(w.Applications, j.App))
	if workloadApp && len(w.Args) > 0 || len(js.Args) > 0 {
		j.Args = map[string]float64{}
		if workloadApp {
			for k, x := range w.Args {
				j.Args[k] = x
			}
		}
		for k, x := range js.Args {
			j.Args[k] = x
		}
	}
	if js.InputFiles != nil {
		j.Files = v.files(p+".input_files", js.InputFiles, s, r)
	} else {
		j.Files = cloneFiles(r.files)
	}
	if j.Request == "" {
		j.Request = r.request
	} else if !slices.Contains(requestKinds, j.Request) {
		v.add(p+".request", "unknown request type %q (known: %s)", j.Request, strings.Join(requestKinds, ", "))
		return j, false
	}

	sum := 0
	for k, c := range js.Components {
		cp := fmt.Sprintf("%s.components[%d]", p, k)
		if c.Size < 1 {
			v.add(cp+".size", "must be at least 1, got %d", c.Size)
		}
		sum += c.Size
	}
	if js.Size < 0 {
		v.add(p+".size", "must be at least 1, got %d", js.Size)
	}
	if j.Size == 0 {
		j.Size = sum
	}
	if j.Size < 1 && js.Size >= 0 {
		v.add(p+".size", "is required (or give components with sizes)")
	}
	if len(js.Components) > 0 && js.Size > 0 && sum != js.Size {
		v.add(p+".components", "sizes add up to %d, but size is %d", sum, js.Size)
	}
	if r.topo.cap > 0 && len(js.Components) > r.topo.cap {
		v.add(p+".components", "%d components exceed policy.max_clusters %d", len(js.Components), r.topo.cap)
	}

	v.malleableJob(p, js, &j, s, env, r)
	mall := r.policy.Malleability != nil
	if mall && len(js.Components) > 1 {
		v.add(p+".components", "the malleability manager places every job on one cluster (no co-allocation); give at most one component")
	}

	switch j.Request {
	case Flexible:
		if len(js.Components) > 0 {
			v.add(p+".components", "a flexible request gives only its total size; the scheduler chooses the components")
		}
		if mall {
			if topoOK && j.Size >= 1 {
				if msg := r.capFits(j.Size, -1); msg != "" {
					v.add(p+".size", "%s", msg)
				}
			}
		} else if topoOK && j.Size >= 1 {
			if msg := r.fits(j.Size, Flexible, 1); msg != "" {
				v.add(p+".size", "%s", msg)
			}
		}
	case NonFixed:
		for k, c := range js.Components {
			if c.Cluster != "" {
				v.add(fmt.Sprintf("%s.components[%d].cluster", p, k), "a non-fixed request leaves the clusters to the scheduler; use request: fixed to name them")
			}
			j.Components = append(j.Components, Component{Size: c.Size})
		}
		if len(js.Components) == 0 && j.Size >= 1 {
			j.Components = []Component{{Size: j.Size}}
		}
		parts := make([]int, len(j.Components))
		for k, c := range j.Components {
			parts[k] = c.Size
		}
		slices.SortFunc(parts, func(a, b int) int { return b - a })
		if mall {
			if topoOK && len(v.errs) == n0 {
				if msg := r.capFits(j.Size, -1); msg != "" {
					v.add(p+".size", "%s", msg)
				}
			}
		} else if topoOK && len(v.errs) == n0 && r.topo.assign(parts, r.topo.inOrder()) == nil {
			v.add(p+".size", "%d exceeds the largest possible allocation: components of %s nodes fit no set of %d distinct clusters without an unavailable pair",
				j.Size, joinInts(parts), len(parts))
		}
	case Fixed:
		if len(js.Components) == 0 {
			v.add(p+".components", "a fixed request names the cluster and size of every component")
		}
		idx := make([]int, len(js.Components))
		seen := map[string]bool{}
		for k, c := range js.Components {
			cp := fmt.Sprintf("%s.components[%d]", p, k)
			idx[k] = v.clusterRef(cp+".cluster", c.Cluster, s, r)
			if c.Cluster != "" && seen[c.Cluster] {
				v.add(cp+".cluster", "cluster %q named twice; components go to distinct clusters", c.Cluster)
			}
			seen[c.Cluster] = true
			if idx[k] >= 0 && c.Size > r.topo.nodes[idx[k]] {
				v.add(cp+".size", "%d exceeds the %d nodes of %s", c.Size, r.topo.nodes[idx[k]], c.Cluster)
			} else if idx[k] >= 0 && mall && len(js.Components) == 1 {
				if msg := r.capFits(c.Size, idx[k]); msg != "" {
					v.add(cp+".size", "%s", msg)
				}
			}
			j.Components = append(j.Components, Component{Cluster: c.Cluster, Size: c.Size})
		}
		if topoOK {
			if msg := r.unavailablePair(idx); msg != "" {
				v.add(p+".components", "%s", msg)
			}
		}
	}
	return j, len(v.errs) == n0
}

// malleableJob validates the malleability fields of an explicit job and
// sets j.Malleable, j.Min and j.Max.
func (v *validator) malleableJob(p string, js JobSpec, j *Job, s *Scenario, env Env, r *resolved) {
	if !js.Malleable {
		if js.Min != nil {
			v.add(p+".min", "applies to malleable jobs only (set malleable: true)")
		}
		if js.Max != nil {
			v.add(p+".max", "applies to malleable jobs only (set malleable: true)")
		}
		return
	}
	if r.policy.Malleability == nil {
		v.add(p+".malleable", "malleable jobs need policy.malleability (the malleability manager runs them)")
	}
	if j.App == "" || !known(env.Apps, j.App) || !v.resizable(p+".malleable", j.App, env) {
		return
	}
	var def *ProfileBounds
	if b, ok := r.bounds[j.App]; ok {
		def = &b
	} else if mb := s.Workload.Malleable; mb != nil {
		if _, given := mb.Bounds[j.App]; given {
			return // workload.malleable.bounds of this application is invalid, reported there
		}
	}
	b, ok := v.sizeBounds(p, j.App, js.Min, js.Max, def, env)
	if !ok {
		return
	}
	if j.Size >= 1 && !b.Valid(j.Size) {
		v.add(p+".size", "%d is not a valid initial size of malleable %s (sizes %s)", j.Size, j.App, b)
	}
	j.Malleable, j.Min, j.Max = true, b.Min, b.Max
}

func cloneFiles(fs []File) []File {
	if fs == nil {
		return nil
	}
	out := make([]File, len(fs))
	for i, f := range fs {
		out[i] = File{Name: f.Name, Size: f.Size, Replicas: slices.Clone(f.Replicas)}
	}
	return out
}
