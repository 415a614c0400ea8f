package scenarios

// This file validates the policy block (placement, periods, tries).

import (
	"slices"
	"strings"
)

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
	} else {
		v.atMost("policy.max_clusters", ps.MaxClusters, MaxClusters)
	}
	if p.CAMetric == "" {
		p.CAMetric = DefaultCAMetric
	} else if !slices.Contains(caMetrics, p.CAMetric) {
		v.add("policy.ca_metric", "unknown metric %q (known: %s)", p.CAMetric, strings.Join(caMetrics, ", "))
	}
	if ps.ScanPeriodS != nil {
		p.ScanPeriod = v.seconds(r, "policy.scan_period_s", *ps.ScanPeriodS, true)
	}
	if ps.PlacementTries != nil {
		if *ps.PlacementTries < 1 {
			v.add("policy.placement_tries", "must be at least 1, got %d", *ps.PlacementTries)
		} else {
			v.atMost("policy.placement_tries", *ps.PlacementTries, MaxCount)
		}
		p.PlacementTries = *ps.PlacementTries
	}
	if ps.StartupDelayS != nil {
		p.StartupDelay = v.seconds(r, "policy.startup_delay_s", *ps.StartupDelayS, false)
	}
	if ps.ProbePeriodS != nil {
		p.ProbePeriod = v.seconds(r, "policy.probe_period_s", *ps.ProbePeriodS, true)
	}
	p.Resubmits = v.onFailure(ps.OnFailure)
	p.Malleability = v.malleability(s, env, r)
	p.Migration = v.migration(s, env)
	r.policy = p
	r.topo.cap = max(ps.MaxClusters, 0)
}
