package launch

import (
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Options control a run (see wiring.Options).
type Options = wiring.Options

// Result is what a run produced.
type Result = wiring.Result

// ReasonDeadline is the failure reason of jobs still unfinished when the
// run's drain time ran out.
const ReasonDeadline = wiring.ReasonDeadline

// Nominal is a job's single-cluster execution time in scenario seconds.
func Nominal(app string, size int) float64 { return wiring.Nominal(app, size) }

// ScenarioEnv tells the scenarios package which applications and placement
// policies exist and how long an application takes on one cluster.
func ScenarioEnv() scenarios.Env { return wiring.ScenarioEnv() }
