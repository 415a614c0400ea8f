package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/scenarios"
)

// scenariosOutput is scenarios --json.
type scenariosOutput struct {
	// Scenarios are the built-in scenarios' names, sorted; each can be
	// given wherever a command takes SCENARIO.
	Scenarios []string `json:"scenarios"`
}

func newScenariosCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "list the built-in scenarios",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			names := scenarios.Builtins()
			if asJSON {
				return writeJSON(a.stdout, scenariosOutput{Scenarios: names})
			}
			for _, n := range names {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	addJSONFlag(cmd, &asJSON, "the names")
	return cmd
}
