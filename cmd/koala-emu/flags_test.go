package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// Every override flag given on a command line reaches its field of
// scenarios.Overrides, and a flag not given leaves its field unset.
func TestOverrideFlags(t *testing.T) {
	var o overrideFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.register(fs)
	if ov := o.overrides(fs); ov.Seed != nil || ov.TimeScale != nil || ov.WallBudget != nil || ov.Dilation != nil || ov.DilationAuto ||
		ov.Placement != nil || ov.Application != nil || ov.MalleabilityPolicy != nil || ov.Approach != nil ||
		ov.MalleableFraction != nil || ov.ReallocMode != nil || ov.ReallocHeuristic != nil {
		t.Fatalf("no flag given: %+v, want nothing replaced", ov)
	}
	err := fs.Parse([]string{"--seed", "7", "--time-scale", "60", "--dilation", "300", "--policy", "wf", "--app", "prime",
		"--malleability-policy", "fpsma", "--approach", "precedence", "--malleable-fraction", "0.5",
		"--realloc-mode", "regular", "--realloc-heuristic", "mct"})
	if err != nil {
		t.Fatal(err)
	}
	ov := o.overrides(fs)
	switch {
	case ov.Seed == nil || *ov.Seed != 7:
		t.Errorf("seed: %v", ov.Seed)
	case ov.TimeScale == nil || *ov.TimeScale != 60:
		t.Errorf("time-scale: %v", ov.TimeScale)
	case ov.Dilation == nil || *ov.Dilation != 300 || ov.DilationAuto:
		t.Errorf("dilation: %v auto %v", ov.Dilation, ov.DilationAuto)
	case ov.Placement == nil || *ov.Placement != "wf":
		t.Errorf("policy: %v", ov.Placement)
	case ov.Application == nil || *ov.Application != "prime":
		t.Errorf("app: %v", ov.Application)
	case ov.MalleabilityPolicy == nil || *ov.MalleabilityPolicy != "fpsma":
		t.Errorf("malleability-policy: %v", ov.MalleabilityPolicy)
	case ov.Approach == nil || *ov.Approach != "precedence":
		t.Errorf("approach: %v", ov.Approach)
	case ov.MalleableFraction == nil || *ov.MalleableFraction != 0.5:
		t.Errorf("malleable-fraction: %v", ov.MalleableFraction)
	case ov.ReallocMode == nil || *ov.ReallocMode != "regular":
		t.Errorf("realloc-mode: %v", ov.ReallocMode)
	case ov.ReallocHeuristic == nil || *ov.ReallocHeuristic != "mct":
		t.Errorf("realloc-heuristic: %v", ov.ReallocHeuristic)
	case ov.WallBudget != nil:
		t.Errorf("wall-budget not given: %v", ov.WallBudget)
	}
	var w overrideFlags
	fs = pflag.NewFlagSet("run", pflag.ContinueOnError)
	w.register(fs)
	if err := fs.Parse([]string{"--wall-budget", "10m", "--dilation", "auto"}); err != nil {
		t.Fatal(err)
	}
	if ov := w.overrides(fs); ov.WallBudget == nil || ov.WallBudget.Seconds != 600 || !ov.DilationAuto {
		t.Errorf("--wall-budget 10m --dilation auto: %+v", ov)
	}
}
