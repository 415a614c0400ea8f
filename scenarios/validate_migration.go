package scenarios

// This file holds the rescheduler's configuration (policy.migration, SPEC
// §6): its schema, validation and plan form.

import "slices"

// MigrationSpec configures the rescheduler.
//
//	policy:
//	  migration: {cost_model: predicted, threshold: 0.3, force: opposite}
type MigrationSpec struct {
	// CostModel is the migration cost the rescheduler weighs: predicted
	// (default: from the checkpoint's bytes and the links) or worst-case
	// (SPEC §6's 900 s constant).
	CostModel string `yaml:"cost_model,omitempty"`
	// Threshold is the gain above which a job migrates, in [0, 1); default
	// 0.3.
	Threshold *float64 `yaml:"threshold,omitempty"`
	// Force: "opposite" inverts every decision (the experiments' runs with
	// the opposite decision forced); absent: the rule decides.
	Force string `yaml:"force,omitempty"`
	// Upper and Lower are the contract monitor's tolerance factors
	// (default 2.0 and 0.7; 0 < lower < 1 < upper).
	Upper *float64 `yaml:"upper,omitempty"`
	Lower *float64 `yaml:"lower,omitempty"`
}

// Migration is the rescheduler's plan form.
type Migration struct {
	CostModel    string
	Threshold    float64
	Invert       bool
	Upper, Lower float64
}

// Defaults of policy.migration.
const (
	DefaultCostModel          = "predicted"
	DefaultMigrationThreshold = 0.3
	DefaultMonitorUpper       = 2.0
	DefaultMonitorLower       = 0.7
	ForceOpposite             = "opposite"
)

func (v *validator) migration(s *Scenario, env Env) *Migration {
	ms := s.Policy.Migration
	if ms == nil {
		return nil
	}
	m := &Migration{CostModel: ms.CostModel, Threshold: DefaultMigrationThreshold, Upper: DefaultMonitorUpper, Lower: DefaultMonitorLower}
	models := env.CostModels
	if len(models) == 0 {
		models = []string{"predicted", "worst-case"}
	}
	if m.CostModel == "" {
		m.CostModel = DefaultCostModel
	} else if !slices.Contains(models, m.CostModel) {
		v.add("policy.migration.cost_model", "unknown cost model %q (known: %s)", m.CostModel, sortedList(models))
	}
	if t := ms.Threshold; t != nil {
		if !finite(*t) || *t < 0 || *t >= 1 {
			v.add("policy.migration.threshold", "must be in [0, 1), got %g", *t)
		} else {
			m.Threshold = *t
		}
	}
	switch ms.Force {
	case "":
	case ForceOpposite:
		m.Invert = true
	default:
		v.add("policy.migration.force", "must be %s (or absent: the rule decides), got %q", ForceOpposite, ms.Force)
	}
	if u := ms.Upper; u != nil {
		if !finite(*u) || *u <= 1 || *u > 1000 {
			v.add("policy.migration.upper", "must be in (1, 1000], got %g", *u)
		} else {
			m.Upper = *u
		}
	}
	if l := ms.Lower; l != nil {
		if !finite(*l) || *l <= 0 || *l >= 1 {
			v.add("policy.migration.lower", "must be in (0, 1), got %g", *l)
		} else {
			m.Lower = *l
		}
	}
	return m
}
