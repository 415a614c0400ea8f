package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
)

// cleanFunc carries out a clean: launch.Clean in the binary, a recorder in
// the tests. skipped lists the backends that could not be looked at (no
// Docker daemon, not root), with the reason.
type cleanFunc func(ctx context.Context, opts launch.CleanOptions) (rep *launch.CleanReport, skipped []string, err error)

// cleanOutput is clean --json.
type cleanOutput struct {
	*launch.CleanReport
	// Skipped lists the backends that could not be looked at, with why.
	Skipped []string `json:"skipped"`
	Error   string   `json:"error,omitempty"`
}

func newCleanCmd(a *app) *cobra.Command {
	var (
		opts   launch.CleanOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "remove what crashed runs left: containers, networks, namespaces",
		Long: `Remove what runs left on this machine (containers and networks labelled
koala-emu.run, network namespaces named koala-*) whose owner is gone: every
docker and netns run records its launcher (process id, start time, host), and a
run whose launcher still lives is kept and listed. --run ID removes that run
whatever its owner; --all removes every run, also of runs still going (another
terminal's run or calibration). --dry-run lists and removes nothing.
Namespaces need root; an unreachable Docker daemon is skipped.`,
		Example: `  koala-emu clean --dry-run        # what would be removed
  koala-emu clean                  # remove runs whose launcher is gone
  koala-emu clean --run 1a2b3c4d   # remove one run, live or not`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.All && opts.RunID != "" {
				return usagef("clean: give --run ID or --all, not both")
			}
			rep, skipped, err := a.clean(cmd.Context(), opts)
			if asJSON {
				out := newCleanOutput(rep, skipped, opts.DryRun)
				if err != nil {
					out.Error = err.Error()
				}
				if jerr := writeJSON(a.stdout, out); jerr != nil {
					return jerr
				}
			} else {
				printClean(a.stdout, rep, skipped)
			}
			if err != nil {
				return fmt.Errorf("clean: %w", err)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.RunID, "run", "", "remove the run with this ID, whatever its owner (default: only runs whose owner is gone)")
	fs.BoolVar(&opts.All, "all", false, "remove every run, including runs still going")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "list what would be removed and remove nothing")
	addJSONFlag(cmd, &asJSON, "the report")
	return cmd
}

// printClean lists the runs removed (or that would be) and kept, one a
// line, then the backends skipped.
func printClean(w io.Writer, rep *launch.CleanReport, skipped []string) {
	if rep != nil {
		verb := "removed"
		if rep.DryRun {
			verb = "would remove"
		}
		for _, r := range rep.Removed {
			fmt.Fprintf(w, "%s %s run %s (%s): %s\n", verb, r.Backend, r.RunID, r.Why, countItems(r.Items))
		}
		for _, r := range rep.Kept {
			fmt.Fprintf(w, "kept %s run %s (%s)\n", r.Backend, r.RunID, r.Why)
		}
		if len(rep.Extra) > 0 {
			fmt.Fprintf(w, "%s outside any run: %s\n", verb, strings.Join(rep.Extra, ", "))
		}
		if len(rep.Removed)+len(rep.Kept)+len(rep.Extra) == 0 {
			fmt.Fprintln(w, "no runs found")
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
}

// newCleanOutput is the report with empty lists rather than nulls.
func newCleanOutput(rep *launch.CleanReport, skipped []string, dryRun bool) cleanOutput {
	r := launch.CleanReport{DryRun: dryRun}
	if rep != nil {
		r = *rep
	}
	r.Removed = nonNil(r.Removed)
	r.Kept = nonNil(r.Kept)
	return cleanOutput{CleanReport: &r, Skipped: nonNil(skipped)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// countItems summarises a run's items by kind (their first word): "214
// namespaces, 1 record".
func countItems(items []string) string {
	var kinds []string
	n := map[string]int{}
	for _, it := range items {
		k, _, _ := strings.Cut(it, " ")
		if n[k] == 0 {
			kinds = append(kinds, k)
		}
		n[k]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
		if n[k] > 1 {
			parts[i] += "s"
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
