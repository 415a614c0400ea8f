package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
)

// validateOutput is validate --json.
type validateOutput struct {
	Scenarios []validated `json:"scenarios"`
	// Invalid counts the scenarios with errors; the exit code is 1 when it
	// is not 0.
	Invalid int `json:"invalid"`
}

// validated is one scenario's verdict.
type validated struct {
	// Ref is the argument as given: a file or a built-in's name.
	Ref string `json:"ref"`
	// Name is the scenario's name; empty when it could not be read.
	Name string `json:"name,omitempty"`
	OK   bool   `json:"ok"`
	// Errors are the problems, each with the field path at fault where
	// there is one (path is empty for a file that cannot be read or
	// parsed).
	Errors []fieldProblem `json:"errors,omitempty"`
}

type fieldProblem struct {
	Path string `json:"path"`
	Msg  string `json:"msg"`
}

func newValidateCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate SCENARIO...",
		Short: "check scenarios and report every problem, each naming its field",
		Example: `  koala-emu validate das3-smoke das3-coalloc
  koala-emu validate my-grid.yaml --json`,
		Args:              minArgs(1),
		ValidArgsFunction: completeScenario(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := validateOutput{Scenarios: make([]validated, 0, len(args))}
			var failed []string
			for _, ref := range args {
				v := validateOne(ref)
				out.Scenarios = append(out.Scenarios, v)
				if !v.OK {
					out.Invalid++
					failed = append(failed, ref)
				}
				if !asJSON {
					printValidated(a, v)
				}
			}
			if asJSON {
				if err := writeJSON(a.stdout, out); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d scenarios are invalid: %s", len(failed), len(args), strings.Join(failed, ", "))
			}
			return nil
		},
	}
	addJSONFlag(cmd, &asJSON, "the verdicts")
	return cmd
}

// validateOne opens and expands one scenario.
func validateOne(ref string) validated {
	v := validated{Ref: ref}
	s, err := scenarios.Open(ref)
	if err == nil {
		v.Name = s.Name
		_, err = s.Expand(launch.ScenarioEnv(), scenarios.Overrides{})
	}
	if err == nil {
		v.OK = true
		return v
	}
	var fes scenarios.Errors
	var fe scenarios.FieldError
	switch {
	case errors.As(err, &fes):
		for _, e := range fes {
			v.Errors = append(v.Errors, fieldProblem{Path: e.Path, Msg: e.Msg})
		}
	case errors.As(err, &fe):
		v.Errors = []fieldProblem{{Path: fe.Path, Msg: fe.Msg}}
	default:
		v.Errors = []fieldProblem{{Msg: err.Error()}}
	}
	return v
}

// printValidated is the human form: "REF: ok", or the problems one a line.
func printValidated(a *app, v validated) {
	if v.OK {
		fmt.Fprintf(a.stdout, "%s: ok\n", v.Ref)
		return
	}
	fmt.Fprintf(a.stdout, "scenario %s:\n", v.Ref)
	for _, e := range v.Errors {
		if e.Path == "" {
			fmt.Fprintf(a.stdout, "  %s\n", e.Msg)
			continue
		}
		fmt.Fprintf(a.stdout, "  %s: %s\n", e.Path, e.Msg)
	}
}
