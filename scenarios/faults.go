package scenarios

// This file holds the faults timeline (faults:) and the failure policy
// (policy.on_failure): their schema, validation and plan form.

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// FaultSpec is one entry of the faults timeline: at at_s scenario seconds
// (scaled by the time scale like arrivals), kind acts on target.
//
//	{at_s: 60, kind: kill, target: vrije-n003}                  # a node
//	{at_s: 90, kind: partition, target: leiden, duration_s: 120} # a cluster from the rest
//	{at_s: 90, kind: partition, target: leiden}                  # ... until a later heal
//	{at_s: 300, kind: heal, target: leiden}
//	{at_s: 60, kind: degrade, target: vrije, peer: amsterdam, bandwidth_factor: 0.5, duration_s: 300}
//	{at_s: 300, kind: load, target: vrije, programs: 10, duration_s: 600}  # every node of a cluster
//	{at_s: 300, kind: load, target: vrije-n002, programs: 3}              # one node, until the run ends
type FaultSpec struct {
	AtS    *float64 `yaml:"at_s"`
	Kind   string   `yaml:"kind"`
	Target string   `yaml:"target"`
	// Peer is the other cluster of a degraded pair (degrade only; it may be
	// the target itself: the cluster's own network).
	Peer string `yaml:"peer,omitempty"`
	// DurationS ends a partition (a heal) or a degrade (a restore) that
	// long after it began; absent: a partition lasts until a heal entry,
	// a degrade until the run ends.
	DurationS *float64 `yaml:"duration_s,omitempty"`
	// LatencyFactor multiplies the pair's latency and BandwidthFactor its
	// bandwidth (degrade only; default 1, at least one must differ).
	LatencyFactor   *float64 `yaml:"latency_factor,omitempty"`
	BandwidthFactor *float64 `yaml:"bandwidth_factor,omitempty"`
	// Programs is the number of loading programs (busy loops) a load puts
	// on every target node (load only; 1 to MaxLoadPrograms). They add up
	// with the other loads on the same node; duration_s (or the run's end)
	// takes them off again.
	Programs *int `yaml:"programs,omitempty"`
}

// Fault kinds of the timeline. A plan's timeline also holds the heal and
// restore actions that end a partition or a degrade with a duration.
const (
	FaultKill      = "kill"
	FaultPartition = "partition"
	FaultHeal      = "heal"
	FaultDegrade   = "degrade"
	FaultRestore   = "restore"
	// FaultLoad puts loading programs on a node or on every node of a
	// cluster; FaultUnload (only through a load's duration_s) takes them
	// off.
	FaultLoad   = "load"
	FaultUnload = "unload"
)

// faultKinds are the kinds a scenario may write (restore only through a
// degrade's duration_s).
var faultKinds = []string{FaultKill, FaultPartition, FaultHeal, FaultDegrade, FaultLoad}

// AllFaultKinds are every kind a plan's timeline may hold: the kinds a
// scenario writes, and the restore and unload that end a degrade and a
// load.
func AllFaultKinds() []string {
	return []string{FaultKill, FaultPartition, FaultHeal, FaultDegrade, FaultRestore, FaultLoad, FaultUnload}
}

// MaxLoadPrograms bounds a load's programs per node.
const MaxLoadPrograms = 1000

// Ranges of a degrade's factors.
const (
	MinFaultFactor = 1e-3
	MaxFaultFactor = 1e3
)

// Fault is one action of a plan's faults timeline, in scenario time.
type Fault struct {
	At     time.Duration
	Kind   string // kill | partition | heal | degrade | restore | load | unload
	Target string // a node (kill; load, unload: or a cluster) or a cluster
	Peer   string // degrade, restore: the other cluster of the pair
	// LatencyFactor and BandwidthFactor of a degrade (restore: 1).
	LatencyFactor, BandwidthFactor float64
	// Programs of a load (unload: the same count, taken off again).
	Programs int
	// Entry is the index of the faults entry the action comes from.
	Entry int
}

// NodeName is the name of node i (0-based) of a cluster: vrije-n001. Every
// backend names its nodes so, and a kill's target is such a name.
func NodeName(cluster string, i int) string { return fmt.Sprintf("%s-n%03d", cluster, i+1) }

var nodeSuffix = regexp.MustCompile(`^(.+)-n([0-9]{3,})$`)

// nodeOf returns the included cluster and index of a node name, or why it
// is not one.
func nodeOf(clusters []Cluster, name string) (string, string) {
	m := nodeSuffix.FindStringSubmatch(name)
	if m == nil {
		return "", fmt.Sprintf("%q is not a node name (CLUSTER-nNNN, e.g. %s)", name, NodeName("vrije", 2))
	}
	for _, c := range clusters {
		if c.Name != m[1] {
			continue
		}
		i, err := strconv.Atoi(m[2])
		if err != nil || i < 1 || i > c.Nodes || NodeName(c.Name, i-1) != name {
			return "", fmt.Sprintf("cluster %s has nodes %s to %s, not %s", c.Name, NodeName(c.Name, 0), NodeName(c.Name, c.Nodes-1), name)
		}
		return c.Name, ""
	}
	return "", fmt.Sprintf("node %s is not of an included cluster", name)
}

// onFailure reads policy.on_failure: "fail" (or absent) gives 0, and
// "resubmit(n)" n resubmissions per job.
var resubmitForm = regexp.MustCompile(`^resubmit\(\s*(?:max\s+)?([0-9]+)\s*\)$`)

func (v *validator) onFailure(s string) int {
	if s == "" || s == "fail" {
		return 0
	}
	m := resubmitForm.FindStringSubmatch(s)
	if m == nil {
		v.add("policy.on_failure", "must be fail or resubmit(N) (N resubmissions per job), got %q", s)
		return 0
	}
	n, err := strconv.Atoi(m[1])
	switch {
	case err != nil || n > MaxResubmits:
		v.add("policy.on_failure", "resubmit(N): N must be at most %d, got %s", MaxResubmits, m[1])
		return 0
	case n < 1:
		v.add("policy.on_failure", "resubmit(N): N must be at least 1 (fail resubmits nothing), got %d", n)
		return 0
	}
	return n
}

// MaxResubmits bounds policy.on_failure's resubmissions per job.
const MaxResubmits = 100

// faults validates the timeline against the included clusters (topoOK:
// the topology resolved) and returns its actions sorted by time (heals and
// restores of durations included; ties in entry order).
func (v *validator) faults(s *Scenario, r *resolved, topoOK bool) []Fault {
	fc := &faultChecker{v: v, r: r, topoOK: topoOK, killed: map[string]int{}, open: map[string]openCut{}}
	order := make([]int, len(s.Faults))
	for i := range order {
		order[i] = i
	}
	// Partitions and heals pair up in time order, whatever the file order.
	sort.SliceStable(order, func(a, b int) bool { return atOf(s.Faults[order[a]]) < atOf(s.Faults[order[b]]) })
	for _, i := range order {
		fc.entry(i, s.Faults[i])
	}
	sort.SliceStable(fc.out, func(a, b int) bool { return fc.out[a].At < fc.out[b].At })
	return fc.out
}

// faultChecker validates the timeline's entries in time order.
type faultChecker struct {
	v      *validator
	r      *resolved
	topoOK bool
	out    []Fault
	killed map[string]int     // node -> the entry that kills it
	open   map[string]openCut // cluster -> its partition
}

// openCut is a cluster's partition: its entry, and when its duration heals
// it (0: a heal entry must).
type openCut struct {
	entry int
	until time.Duration
}

// entry checks entry i and adds its actions.
func (fc *faultChecker) entry(i int, f FaultSpec) {
	v, path := fc.v, fmt.Sprintf("faults[%d]", i)
	at := time.Duration(0)
	if f.AtS == nil {
		v.add(path+".at_s", "is required")
	} else {
		at = v.seconds(fc.r, path+".at_s", *f.AtS, false)
	}
	var dur time.Duration
	if f.DurationS != nil {
		if f.Kind == FaultKill || f.Kind == FaultHeal {
			v.add(path+".duration_s", "only a partition, a degrade or a load has a duration, not a %s", f.Kind)
		} else {
			dur = v.seconds(fc.r, path+".duration_s", *f.DurationS, true)
		}
	}
	if f.Peer != "" && f.Kind != FaultDegrade {
		v.add(path+".peer", "only a degrade has a peer, not a %s", f.Kind)
	}
	if f.Kind != FaultDegrade && (f.LatencyFactor != nil || f.BandwidthFactor != nil) {
		v.add(path, "latency_factor and bandwidth_factor belong to a degrade, not a %q", f.Kind)
	}
	if f.Programs != nil && f.Kind != FaultLoad {
		v.add(path+".programs", "only a load has programs, not a %s", f.Kind)
	}
	if f.Target == "" {
		v.add(path+".target", "is required")
	}
	act := Fault{At: at, Kind: f.Kind, Target: f.Target, Entry: i}
	switch f.Kind {
	case FaultKill:
		fc.kill(i, path, f.Target)
	case FaultPartition:
		fc.partition(i, path, f.Target, at, dur)
	case FaultHeal:
		fc.heal(path, f.Target, at)
	case FaultDegrade:
		act.Peer = f.Peer
		act.LatencyFactor, act.BandwidthFactor = v.factors(path, f)
		fc.degrade(i, path, f, at, dur)
	case FaultLoad:
		act.Programs = fc.load(i, path, f, at, dur)
	case "":
		v.add(path+".kind", "is required (one of %s)", sortedList(faultKinds))
	default:
		v.add(path+".kind", "unknown kind %q (known: %s)", f.Kind, sortedList(faultKinds))
	}
	fc.out = append(fc.out, act)
}

// kill checks a kill's target: a node of an included cluster, killed once.
func (fc *faultChecker) kill(i int, path, target string) {
	if target == "" || !fc.topoOK {
		return
	}
	if _, why := nodeOf(fc.r.clusters, target); why != "" {
		fc.v.add(path+".target", "%s", why)
	} else if j, dup := fc.killed[target]; dup {
		fc.v.add(path+".target", "node %s is already killed by faults[%d]", target, j)
	} else {
		fc.killed[target] = i
	}
}

// partition checks that the cluster is not partitioned already and adds
// the heal its duration implies.
func (fc *faultChecker) partition(i int, path, target string, at, dur time.Duration) {
	if !fc.v.faultCluster(fc.r, path+".target", target, fc.topoOK) {
		return
	}
	if c, ok := fc.open[target]; ok && (c.until == 0 || c.until > at) {
		fc.v.add(path, "cluster %s is already partitioned by faults[%d]", target, c.entry)
	}
	fc.open[target] = openCut{entry: i}
	if dur > 0 {
		fc.open[target] = openCut{entry: i, until: at + dur}
		fc.out = append(fc.out, Fault{At: at + dur, Kind: FaultHeal, Target: target, Entry: i})
	}
}

// heal checks that the cluster is partitioned without a duration at.
func (fc *faultChecker) heal(path, target string, at time.Duration) {
	if !fc.v.faultCluster(fc.r, path+".target", target, fc.topoOK) {
		return
	}
	c, ok := fc.open[target]
	switch {
	case !ok || (c.until > 0 && c.until <= at):
		fc.v.add(path, "cluster %s is not partitioned at %gs (a heal follows a partition without duration_s)", target, at.Seconds())
	case c.until > 0:
		fc.v.add(path, "cluster %s heals by faults[%d]'s duration_s; drop this heal or that duration", target, c.entry)
	default:
		delete(fc.open, target)
	}
}

// degrade checks the pair (both included, available) and adds the restore
// its duration implies.
func (fc *faultChecker) degrade(i int, path string, f FaultSpec, at, dur time.Duration) {
	v := fc.v
	okA := v.faultCluster(fc.r, path+".target", f.Target, fc.topoOK)
	okB := false
	if f.Peer == "" {
		v.add(path+".peer", "is required: the other cluster of the degraded pair (the target itself for its own network)")
	} else {
		okB = v.faultCluster(fc.r, path+".peer", f.Peer, fc.topoOK)
	}
	if okA && okB {
		if l, err := fc.r.links.Link(f.Target, f.Peer); err == nil && l.Unavailable {
			v.add(path, "the pair %s-%s is unavailable: it carries no traffic to degrade", f.Target, f.Peer)
		}
	}
	if dur > 0 {
		fc.out = append(fc.out, Fault{At: at + dur, Kind: FaultRestore, Target: f.Target, Peer: f.Peer,
			LatencyFactor: 1, BandwidthFactor: 1, Entry: i})
	}
}

// load checks a load's target (an included cluster or one of its nodes)
// and programs, returns the programs and adds the unload its duration
// implies.
func (fc *faultChecker) load(i int, path string, f FaultSpec, at, dur time.Duration) int {
	v, n := fc.v, 0
	switch {
	case f.Programs == nil:
		v.add(path+".programs", "is required: the loading programs on every target node (1 to %d)", MaxLoadPrograms)
	case *f.Programs < 1 || *f.Programs > MaxLoadPrograms:
		v.add(path+".programs", "must be in [1, %d], got %d", MaxLoadPrograms, *f.Programs)
	default:
		n = *f.Programs
	}
	if f.Target != "" && fc.topoOK {
		if nodeSuffix.MatchString(f.Target) {
			if _, why := nodeOf(fc.r.clusters, f.Target); why != "" {
				v.add(path+".target", "%s", why)
			}
		} else if !v.faultCluster(fc.r, path+".target", f.Target, true) {
			return n
		}
	}
	if dur > 0 && n > 0 {
		fc.out = append(fc.out, Fault{At: at + dur, Kind: FaultUnload, Target: f.Target, Programs: n, Entry: i})
	}
	return n
}

func atOf(f FaultSpec) float64 {
	if f.AtS == nil {
		return 0
	}
	return *f.AtS
}

// faultCluster checks that name is an included cluster.
func (v *validator) faultCluster(r *resolved, path, name string, topoOK bool) bool {
	if name == "" || !topoOK {
		return false
	}
	for _, c := range r.clusters {
		if c.Name == name {
			return true
		}
	}
	v.add(path, "%q is not an included cluster", name)
	return false
}

// factors checks a degrade's factors: each in [MinFaultFactor,
// MaxFaultFactor], default 1, not both 1.
func (v *validator) factors(path string, f FaultSpec) (lat, bw float64) {
	ok := true
	check := func(field string, p *float64) float64 {
		if p == nil {
			return 1
		}
		if x := *p; !finite(x) || x < MinFaultFactor || x > MaxFaultFactor {
			v.add(path+"."+field, "must be in [%g, %g], got %g", MinFaultFactor, MaxFaultFactor, x)
			ok = false
			return 1
		}
		return *p
	}
	lat = check("latency_factor", f.LatencyFactor)
	bw = check("bandwidth_factor", f.BandwidthFactor)
	if f.LatencyFactor == nil && f.BandwidthFactor == nil {
		v.add(path, "a degrade needs latency_factor or bandwidth_factor")
	} else if ok && lat == 1 && bw == 1 {
		v.add(path, "a degrade with both factors 1 changes nothing")
	}
	return lat, bw
}
