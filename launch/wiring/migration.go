package wiring

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/actors/rescheduler"
	"github.com/koala-emu/koala-emu/actors/runner"
)

// ActorRescheduler is the rescheduler's name (a plan with
// policy.migration).
const ActorRescheduler = "rescheduler"

// Rescheduler builds the rescheduler role of a plan with policy.migration
// (nil props without): the clusters, the link matrix, the cost model (for
// the plan's grid: its runners' start-up delay and its scheduler's scan
// period) and the threshold of the plan.
func (s *Spec) Rescheduler(env actors.Env) (*actor.Props, error) {
	m := s.Policy.Migration
	if m == nil {
		return nil, nil
	}
	cost, err := migrate.NewCostModel(m.CostModel, migrate.Grid{StartupDelay: s.Policy.StartupDelay, ScanPeriod: s.Policy.ScanPeriod})
	if err != nil {
		return nil, fmt.Errorf("policy.migration.cost_model: %w", err)
	}
	cfg := rescheduler.Config{Links: s.Links, Cost: cost, Threshold: m.Threshold, Invert: m.Invert, Env: env}
	for _, c := range s.Clusters {
		cfg.Clusters = append(cfg.Clusters, rescheduler.Cluster{Name: c.Name, Nodes: c.Nodes, Speed: c.Speed})
	}
	return rescheduler.Props(cfg), nil
}

// runnerMigration is what a rigid runner needs to migrate its job (nil
// without policy.migration or a rescheduler to ask).
func (s *Spec) runnerMigration(p Peers) *runner.Migration {
	m := s.Policy.Migration
	if m == nil || p.Rescheduler == nil {
		return nil
	}
	speeds := map[string]float64{}
	for _, c := range s.Clusters {
		speeds[c.Name] = c.Speed
	}
	links := s.Links
	return &runner.Migration{Rescheduler: p.Rescheduler, Speeds: speeds, Upper: m.Upper, Lower: m.Lower,
		Links: func(a, b string) (time.Duration, float64) {
			l, err := links.Link(a, b)
			if err != nil {
				return 0, 0
			}
			return l.Latency, l.Bandwidth
		}}
}
