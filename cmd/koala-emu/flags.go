package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
)

// overrideFlags are the flags that replace a field of the scenario: run and
// study take them. A flag that is not given leaves the scenario's value.
type overrideFlags struct {
	seed         int64
	timeScale    float64
	wallBudget   time.Duration
	dilation     dilationValue
	policy       string
	application  string
	mallPolicy   string
	approach     string
	mallFraction float64
	reallocMode  string
	heuristic    string
}

func (o *overrideFlags) register(fs *pflag.FlagSet) {
	env := launch.ScenarioEnv()
	fs.Int64Var(&o.seed, "seed", 0, "replace the scenario's seed (default: the scenario's)")
	fs.Float64Var(&o.timeScale, "time-scale", 0, "replace the scenario's time scale K: the run is K times shorter (default: the scenario's)")
	fs.DurationVar(&o.wallBudget, "wall-budget", 0, "replace the scenario's time scale or wall budget with a wall budget (for example 10m): the time scale follows from the dilation (default: the scenario's)")
	fs.Var(&o.dilation, "dilation", "replace the scenario's time dilation: a number >= 1 (latency x d, bandwidth / d, compute x d) or auto, the smallest the host carries (default: the scenario's)")
	fs.StringVar(&o.policy, "policy", "", "replace the placement policy: "+names(env.Policies)+" (default: the scenario's)")
	fs.StringVar(&o.application, "app", "", "replace the application of the generated arrivals: "+names(env.Apps)+" (default: the scenario's)")
	fs.StringVar(&o.mallPolicy, "malleability-policy", "", "replace the malleability policy: "+names(env.MalleabilityPolicies)+" (default: the scenario's; needs policy.malleability)")
	fs.StringVar(&o.approach, "approach", "", "replace the job-management approach of malleability: "+names(env.Approaches)+" (default: the scenario's; needs policy.malleability)")
	fs.Float64Var(&o.mallFraction, "malleable-fraction", 0, "replace the share of malleable jobs: 1 is W_m, 0.5 W_mr (default: the scenario's)")
	fs.StringVar(&o.reallocMode, "realloc-mode", "", "replace a batch grid's reallocation: "+names(scenarios.ReallocModes)+" (default: the scenario's; needs batch)")
	fs.StringVar(&o.heuristic, "realloc-heuristic", "", "replace a batch grid's reallocation heuristic: "+names(scenarios.ReallocHeurists)+" (default: the scenario's; needs batch)")
}

// overrides returns the flags that were given.
func (o *overrideFlags) overrides(fs *pflag.FlagSet) scenarios.Overrides {
	var ov scenarios.Overrides
	for _, f := range []struct {
		flag string
		set  func()
	}{
		{"seed", func() { ov.Seed = &o.seed }},
		{"time-scale", func() { ov.TimeScale = &o.timeScale }},
		{"wall-budget", func() { ov.WallBudget = &scenarios.WallBudget{Seconds: o.wallBudget.Seconds()} }},
		{"dilation", func() { o.dilation.d.Override(&ov) }},
		{"policy", func() { ov.Placement = &o.policy }},
		{"app", func() { ov.Application = &o.application }},
		{"malleability-policy", func() { ov.MalleabilityPolicy = &o.mallPolicy }},
		{"approach", func() { ov.Approach = &o.approach }},
		{"malleable-fraction", func() { ov.MalleableFraction = &o.mallFraction }},
		{"realloc-mode", func() { ov.ReallocMode = &o.reallocMode }},
		{"realloc-heuristic", func() { ov.ReallocHeuristic = &o.heuristic }},
	} {
		if fs.Changed(f.flag) {
			f.set()
		}
	}
	return ov
}

// names lists names sorted, comma-separated.
func names(ns []string) string {
	s := slices.Clone(ns)
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// dilationValue is --dilation: auto or a factor >= 1, read by the same
// parser as the scenario's dilation field.
type dilationValue struct{ d scenarios.Dilation }

func (v *dilationValue) Set(s string) error {
	d, err := scenarios.ParseDilation(s)
	if err != nil {
		return err
	}
	if !d.Auto && !(d.Factor >= scenarios.MinDilation && d.Factor <= scenarios.MaxDilation) {
		return fmt.Errorf("%q is neither auto nor a number in [%g, %g]", s, scenarios.MinDilation, scenarios.MaxDilation)
	}
	v.d = d
	return nil
}

func (v *dilationValue) String() string {
	if !v.d.Auto && v.d.Factor == 0 {
		return ""
	}
	return v.d.String()
}

func (v *dilationValue) Type() string { return "auto|N" }

// runFlags are the flags run and study share: the backend, the launch
// options and the scenario overrides.
type runFlags struct {
	o               overrideFlags
	out             string
	backend         string
	requireFaithful bool
	model           string
	asJSON          bool
}

// register adds the backend, faithfulness and model flags; the overrides
// are added last (registerOverrides) so that help lists them together.
func (r *runFlags) register(fs *pflag.FlagSet, a *app) {
	fs.StringVar(&r.backend, "backend", defaultBackend, "where the actors run: "+a.backendHelp())
	fs.BoolVar(&r.requireFaithful, "require-faithful", false, "fail the run (after writing its results) when the host did not keep up with the emulation")
	addModelFlag(fs, &r.model)
}

// addModelFlag registers --model, the sim backend's performance model
// (launch.Options.SimModel): run, study and sweep take it. launch.Check
// refuses it on other backends and names a model file that does not load.
func addModelFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "model", "", "the sim backend's model: typed (the applications' typed traffic), shipped (the file learnt on inproc, launch/sim/models/inproc.json) or a model file (koala-emu model learn) (default: typed)")
}

// addJSONFlag registers --json.
func addJSONFlag(cmd *cobra.Command, p *bool, what string) {
	cmd.Flags().BoolVar(p, "json", false, "print "+what+" as one JSON object on stdout, nothing else there (fields in docs/cli.md)")
}

// jsonOut is a command's --json object; it carries the command's error.
type jsonOut interface{ setError(err error) }

// finishJSON prints obj on stdout when asJSON, with err in it, so that
// stdout holds one object whatever happened after the command line was
// read; a usage error prints none. It returns err, joined with an error of
// printing.
func finishJSON(a *app, asJSON bool, obj jsonOut, err error) error {
	var ue usageError
	if !asJSON || errors.As(err, &ue) {
		return err
	}
	obj.setError(err)
	if jerr := writeJSON(a.stdout, obj); jerr != nil {
		return errors.Join(err, jerr)
	}
	return err
}

// errorText is err's message, or "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// writeJSON prints v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("json output: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// loadPlan opens and expands a scenario.
func loadPlan(ref string, ov scenarios.Overrides) (*scenarios.Plan, error) {
	s, err := scenarios.Open(ref)
	if err != nil {
		return nil, err
	}
	plan, err := s.Expand(launch.ScenarioEnv(), ov)
	if err != nil {
		return nil, fmt.Errorf("scenario %s:\n%w", ref, err)
	}
	return plan, nil
}
