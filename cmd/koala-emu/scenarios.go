package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
)

// scenariosOutput is scenarios --json.
type scenariosOutput struct {
	// Scenarios are the built-in scenarios' names, sorted; each can be
	// given wherever a command takes SCENARIO.
	Scenarios []string `json:"scenarios"`
	// Support (with --backends) says, per scenario and backend, whether
	// the backend runs the scenario or refuses it, and why.
	Support []scenarioSupport `json:"support,omitempty"`
}

// scenarioSupport is one scenario on one backend.
type scenarioSupport struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"`
	// Runs is true when the backend accepts the scenario (launch.Check);
	// the machine must still give what the backend needs (root, Docker).
	Runs bool `json:"runs"`
	// Refused is launch.Check's error when it does not.
	Refused string `json:"refused,omitempty"`
}

func newScenariosCmd(a *app) *cobra.Command {
	var asJSON, backends bool
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "list the built-in scenarios (with --backends: which backend runs which)",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			out := scenariosOutput{Scenarios: scenarios.Builtins()}
			if backends {
				sup, err := builtinSupport(a.backends, out.Scenarios)
				if err != nil {
					return err
				}
				out.Support = sup
			}
			switch {
			case asJSON:
				return writeJSON(a.stdout, out)
			case backends:
				return printSupport(a, out.Support)
			}
			for _, n := range out.Scenarios {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	addJSONFlag(cmd, &asJSON, "the names (and with --backends the support matrix)")
	cmd.Flags().BoolVar(&backends, "backends", false, "show, per scenario and backend, whether the backend runs the scenario or refuses it, and why")
	return cmd
}

// builtinSupport checks every named built-in scenario against every
// backend, as run does before it starts (launch.Check, default options).
func builtinSupport(backends []launch.Backend, names []string) ([]scenarioSupport, error) {
	var sup []scenarioSupport
	for _, n := range names {
		plan, err := loadPlan(n, scenarios.Overrides{})
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", n, err)
		}
		for _, b := range backends {
			s := scenarioSupport{Scenario: n, Backend: b.Name(), Runs: true}
			if err := launch.Check(b, plan, launch.Options{}); err != nil {
				s.Runs, s.Refused = false, err.Error()
			}
			sup = append(sup, s)
		}
	}
	return sup, nil
}

// printSupport prints the matrix (runs, or a footnote number), one row per
// scenario and a column per backend, and the footnotes with each distinct
// refusal's reason.
func printSupport(a *app, sup []scenarioSupport) error {
	var names []string
	for _, b := range a.backends {
		names = append(names, b.Name())
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "SCENARIO\t%s\n", strings.ToUpper(strings.Join(names, "\t")))
	var notes []string
	index := map[string]int{} // reason -> footnote number
	for i, s := range sup {
		if i%len(names) == 0 {
			fmt.Fprint(tw, s.Scenario)
		}
		cell := "runs"
		if !s.Runs {
			if index[s.Refused] == 0 {
				notes = append(notes, s.Refused)
				index[s.Refused] = len(notes)
			}
			cell = fmt.Sprintf("refused [%d]", index[s.Refused])
		}
		fmt.Fprint(tw, "\t"+cell)
		if i%len(names) == len(names)-1 {
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, n := range notes {
		fmt.Fprintf(a.stdout, "[%d] %s\n", i+1, n)
	}
	return nil
}
