package scenarios

// This file validates topology.clusters, include and exclude, and holds the
// feasibility model of the included platform (topo).

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/koala-emu/koala-emu/netem"
)

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
	} else if !v.atMost("topology.clusters", len(t.Clusters), MaxClusters) {
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
		} else if !v.atMost(p+".nodes", c.Nodes, MaxNodes) {
			ok = false
		}
		if c.Processors != nil {
			if *c.Processors < 1 {
				v.add(p+".processors", "must be at least 1, got %d", *c.Processors)
			} else {
				v.atMost(p+".processors", *c.Processors, MaxProcessors)
			}
		}
		if !finite(c.CPUGHz) || c.CPUGHz < 0 {
			v.add(p+".cpu_ghz", "must not be negative, got %g", c.CPUGHz)
		}
		if c.Speed != nil {
			switch x := *c.Speed; {
			case !finite(x) || x <= 0:
				v.add(p+".speed", "must be greater than 0, got %g", x)
			case x < MinSpeed || x > MaxSpeed:
				v.add(p+".speed", "must be in [%g, %g], got %g", MinSpeed, MaxSpeed, x)
			}
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

	return v.links(s, r, listed, ok)
}
