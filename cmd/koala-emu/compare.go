package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/report"
)

func newCompareCmd(a *app) *cobra.Command {
	var asJSON bool
	var tolerance float64
	cmd := &cobra.Command{
		Use:   "compare RUN REFERENCE",
		Short: "the reallocation metrics of a batch grid run against the same run without reallocation",
		Long: `compare reads two run directories of a batch grid scenario (batch:, SPEC §5), a run with
reallocation and its reference (the same scenario and seed with batch.realloc.mode none),
and prints the four metrics over the middleware's jobs: the share of jobs whose completion
changed (impacted), reallocations per job, the share of impacted jobs finishing earlier, and
the average response time of the impacted jobs relative to the reference.`,
		Example: `  koala-emu run my-realloc.yaml --backend sim --out runs/regular
  koala-emu run my-realloc-none.yaml --backend sim --out runs/none
  koala-emu compare runs/regular runs/none`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tolerance < 0 {
				return usagef("--tolerance must not be negative, got %g", tolerance)
			}
			c, err := report.CompareRealloc(args[0], args[1], time.Duration(tolerance*float64(time.Second)))
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, c)
			}
			fmt.Fprintf(a.stdout, "run %s against %s (%d middleware jobs, tolerance %gs)\n", c.Run, c.Reference, c.Jobs, c.ToleranceS)
			fmt.Fprintf(a.stdout, "impacted jobs               %.1f %% (%d)\n", 100*c.ImpactedShare, c.Impacted)
			fmt.Fprintf(a.stdout, "reallocations per job       %.1f %% (%d)\n", 100*c.ReallocationsPerJob, c.Reallocations)
			fmt.Fprintf(a.stdout, "impacted, finished earlier  %.1f %% (%d)\n", 100*c.EarlierShare, c.Earlier)
			fmt.Fprintf(a.stdout, "relative response time      %.3f (impacted jobs, run / reference)\n", c.RelativeResponse)
			return nil
		},
	}
	cmd.Flags().Float64Var(&tolerance, "tolerance", 0, "least change of a job's completion, in seconds, counted as an impact (0 on sim; more on inproc, whose timings jitter)")
	addJSONFlag(cmd, &asJSON, "the metrics")
	return cmd
}
