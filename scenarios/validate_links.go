package scenarios

// This file validates topology.links: the preset and the pair overrides.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// links validates topology.links (the preset and the pair overrides) and
// builds r.links and r.topo.unavail over the included clusters. ok says
// whether the clusters themselves are sound; links returns whether the
// included platform is sound enough for the workload's feasibility checks.
func (v *validator) links(s *Scenario, r *resolved, listed map[string]int, ok bool) bool {
	t := &s.Topology
	preset := t.Links.Preset
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
		if pr.LatencyMS != nil {
			switch x := *pr.LatencyMS; {
			case !finite(x) || x < 0:
				v.add(p+".latency_ms", "must not be negative, got %g", x)
				pairOK = false
			case x > MaxLatencyMS:
				v.add(p+".latency_ms", "must be at most %d (one minute), got %g", MaxLatencyMS, x)
				pairOK = false
			}
		}
		if pr.BandwidthMBps != nil {
			switch x := *pr.BandwidthMBps; {
			case !finite(x) || x <= 0:
				v.add(p+".bandwidth_mbps", "must be greater than 0, got %g", x)
				pairOK = false
			case x < MinBandwidthMBps || x > MaxBandwidthMBps:
				v.add(p+".bandwidth_mbps", "must be in [%g, %g], got %g", MinBandwidthMBps, MaxBandwidthMBps, x)
				pairOK = false
			}
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
