package main

import (
	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
)

// The completion command itself is cobra's (koala-emu completion
// bash|zsh|fish|powershell); these functions give it the values of
// SCENARIO and of the flags that take a name.

// completeScenario offers the built-in scenarios for a command's one
// SCENARIO (validate: any number), and files after them.
func completeScenario(max int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return scenarios.Builtins(), cobra.ShellCompDirectiveDefault
	}
}

// completeWords offers a fixed list for a flag.
func completeWords(words ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp)
}

// registerCompletions adds the completions of the flags cmd has among
// backend, shaper, interconnect and the policy overrides.
func registerCompletions(cmd *cobra.Command, a *app) {
	env := launch.ScenarioEnv()
	words := map[string][]string{
		"backend":             a.backendNames(),
		"shaper":              {"auto", "netem", "htb", "userspace"},
		"interconnect":        {"both", "myri10g", "gbe"},
		"policy":              env.Policies,
		"malleability-policy": env.MalleabilityPolicies,
		"approach":            env.Approaches,
		"dilation":            {"auto", "1", "2", "4"},
	}
	for name, ws := range words {
		if cmd.Flags().Lookup(name) != nil {
			if err := cmd.RegisterFlagCompletionFunc(name, completeWords(ws...)); err != nil {
				panic(err) // only for an unknown or twice-registered flag: a mistake in this file
			}
		}
	}
}
