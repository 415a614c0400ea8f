package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newRoot builds the command tree; every command file adds one command.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   binaryName,
		Short: "an emulator of multicluster grids (KOALA on DAS-3)",
		Long: `koala-emu emulates a multicluster grid (DAS-3 by default) and runs the KOALA
co-allocating scheduler on it: run a scenario, check one, calibrate its links,
run the cluster-count study, clean up after a crashed run.

SCENARIO is a YAML file or the name of a built-in scenario (see 'koala-emu scenarios').`,
		Args: exactArgs(0),
		// Without a Run, cobra would print the help and exit 0 on an
		// unknown command.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			if err := cmd.Usage(); err != nil {
				return err
			}
			return usagef("no command given")
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		// Suggest commands within two edits of a mistyped one.
		SuggestionsMinimumDistance: 2,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newRunCmd(a),
		newValidateCmd(a),
		newCalibrateCmd(a),
		newStudyCmd(a),
		newCleanCmd(a),
		newScenariosCmd(a),
		newHostCmd(a),
		newReportCmd(a),
		newCompareCmd(a),
		newDivergeCmd(a),
		newSweepCmd(a),
		newModelCmd(a),
	)
	root.AddCommand(hostCommands(a)...)
	for _, c := range allCommands(root) {
		registerCompletions(c, a)
	}
	// Added here rather than on first Execute, so that tests walking the
	// tree see them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// allCommands is every command of the tree under c, c included.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// exactArgs is cobra.ExactArgs that reports a usage error naming the
// arguments it did not expect.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case n == 0 && cmd.HasSubCommands():
			hint := ""
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)
		case n == 0:
			return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
		case len(args) > n:
			return usagef("%s takes %d argument(s) (%s), got %d: unexpected %q", cmd.CommandPath(), n, argNames(cmd), len(args), args[n:])
		}
		return usagef("%s takes %d argument(s) (%s), got %d", cmd.CommandPath(), n, argNames(cmd), len(args))
	}
}

// minArgs is cobra.MinimumNArgs as a usage error.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s takes at least %d argument(s) (%s), got %d", cmd.CommandPath(), n, argNames(cmd), len(args))
		}
		return nil
	}
}

// argNames is the part of a command's Use after its name.
func argNames(cmd *cobra.Command) string {
	use := cmd.Use
	for i := range len(use) {
		if use[i] == ' ' {
			return use[i+1:]
		}
	}
	return "none"
}
