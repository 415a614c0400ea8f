package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/report"
)

func newReportCmd(a *app) *cobra.Command {
	var (
		out  string
		opts report.Options
	)
	cmd := &cobra.Command{
		Use:   "report DIR...",
		Short: "write an HTML page with figures (PNG and SVG) from run, sweep and study directories",
		Long: `report reads the results directories of runs (results.json, jobs.csv), sweeps (sweep.json
and a directory per cell) and studies (study.json) and writes report.html with its figures:
AJRT against net utilisation per policy with the saturation point marked, execution time against
the number of clusters, CDFs of wait and response times, utilisation and resizes over time for
malleable runs, and a comparison table with each run's fidelity verdict. Given exactly two run
directories, one of the sim backend and one of an emulated backend, it adds their divergence
(the aggregates and the jobs that differ most, as 'koala-emu diverge' prints them). A sweep of
migrating runs (policy.migration, e.g. scenarios/sweeps/migration.yaml) gets the table of the
rescheduler's decisions instead of AJRT figures: per order, load time and cost model, the
decision and its gain, the execution with it and with the opposite forced, whether it was right,
the predicted and measured cost, the checksum and the degraded runs, also in migration.csv and
migration.md; the costs by order; execution time against load time.`,
		Example: `  koala-emu report runs/coalloc-fcm runs/coalloc-wf --out runs/report
  koala-emu report runs/sweep --out runs/sweep-report
  koala-emu report runs/migration-sweep --out runs/migration-report`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := report.Write(out, args, opts); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "report in %s\n", filepath.Join(out, "report.html"))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&out, "out", "report", "directory to write report.html and its figures to")
	fs.StringVar(&opts.Title, "title", "", "the page's title (default \"koala-emu report\")")
	fs.Float64Var(&opts.SaturationFactor, "saturation-factor", 0, "a policy saturates where its AJRT exceeds this many times its AJRT at the lowest utilisation (default 2)")
	fs.Float64Var(&opts.UnplacedPct, "unplaced-pct", 0, "or where more than this percentage of jobs could not be placed (default 1)")
	return cmd
}
