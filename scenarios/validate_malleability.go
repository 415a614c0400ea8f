package scenarios

// This file validates policy.malleability, workload.malleable and the
// malleability fields of explicit jobs: thresholds, caps and size bounds.

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

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
		m.PollPeriod = v.seconds(r, p+".poll_period_s", *ms.PollPeriodS, true)
	}
	if ms.OpTimeoutS != nil {
		m.OpTimeout = v.seconds(r, p+".op_timeout_s", *ms.OpTimeoutS, true)
	}
	if ms.MaxTries != nil {
		if *ms.MaxTries < 0 {
			v.add(p+".max_tries", "must not be negative (0 means never), got %d", *ms.MaxTries)
		} else {
			v.atMost(p+".max_tries", *ms.MaxTries, MaxCount)
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
			} else if !v.atMost(path+"."+e.field, *e.given, MaxNodes) {
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
