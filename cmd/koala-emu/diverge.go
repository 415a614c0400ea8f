package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/report"
)

func newDivergeCmd(a *app) *cobra.Command {
	var (
		asJSON bool
		top    int
		out    string
	)
	cmd := &cobra.Command{
		Use:   "diverge SIM_RUN EMU_RUN",
		Short: "a simulated run beside an emulated run of the same plan: per job and in aggregate, with the differences",
		Long: `diverge reads two run directories of the same scenario, seed and plan, the first run on
the sim backend, the second on an emulated one (inproc, netns, docker), and sets them side by
side: AJRT, average wait and execution, net and observed utilisation, co-allocated share,
completed and failed jobs on each, with the absolute and relative difference (emulated minus
simulated, over simulated); the aggregate that diverges most; and the jobs, matched by ID, with
the largest |response time difference| and their wait and execution differences. The per-job
table (every job) goes to DIR/` + report.DivergenceCSV + ` with --out, or to stdout.

Two runs of different plans are refused, naming the field of results.json or the job of
jobs.csv that differs.`,
		Example: `  koala-emu run das3-coalloc --backend sim --seed 42 --out runs/div-sim
  koala-emu run das3-coalloc --backend inproc --seed 42 --out runs/div-inproc
  koala-emu diverge runs/div-sim runs/div-inproc --top 5 --out runs/div`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if top < 0 {
				return usagef("--top must not be negative, got %d", top)
			}
			d, csvPath, err := divergeRuns(args[0], args[1], out)
			if asJSON {
				obj := &divergeOutput{Divergence: d, CSV: csvPath}
				if d != nil {
					obj.Top = d.Top(top)
				}
				return finishJSON(a, true, obj, err)
			}
			if err != nil {
				return err
			}
			printDivergence(a.stdout, d, top)
			if csvPath != "" {
				fmt.Fprintf(a.stdout, "\nper-job table in %s\n", csvPath)
				return nil
			}
			fmt.Fprintln(a.stdout, "\nevery job (emulated - simulated):")
			return printJobTable(a.stdout, d.Jobs)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&top, "top", 5, "how many jobs with the largest |response time difference| to name (0: all)")
	fs.StringVar(&out, "out", "", "directory to write the per-job table to ("+report.DivergenceCSV+"); without it the table goes to stdout")
	addJSONFlag(cmd, &asJSON, "the divergence")
	return cmd
}

// divergeOutput is diverge --json.
type divergeOutput struct {
	*report.Divergence
	Top   []report.JobDiff `json:"top"`
	CSV   string           `json:"csv,omitempty"`
	Error string           `json:"error,omitempty"`
}

func (o *divergeOutput) setError(err error) { o.Error = errorText(err) }

// divergeRuns computes the divergence and, when out is given, writes the
// per-job table there and returns its path.
func divergeRuns(sim, emu, out string) (*report.Divergence, string, error) {
	d, err := report.Diverge(sim, emu)
	if err != nil || out == "" {
		return d, "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return d, "", err
	}
	p := filepath.Join(out, report.DivergenceCSV)
	return d, p, writeDivergenceCSV(p, d)
}

func writeDivergenceCSV(path string, d *report.Divergence) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := d.WriteCSV(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// printDivergence prints the header, the aggregates and the top jobs.
func printDivergence(w io.Writer, d *report.Divergence, top int) {
	fid := d.EmuFidelity
	if fid == "" {
		fid = "not recorded"
	}
	fmt.Fprintf(w, "scenario %s, seed %d, policy %s: sim %s against %s %s (fidelity %s)\n\n",
		d.Scenario, d.Seed, d.Policy, d.Sim, d.EmuBackend, d.Emu, fid)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "aggregate\tsim\t%s\tdiff\trel\t\n", d.EmuBackend)
	for _, ag := range d.Aggregates {
		fmt.Fprintf(tw, "%s (%s)\t%.1f\t%.1f\t%+.1f\t%s\t\n", ag.Name, ag.Unit, ag.Sim, ag.Emu, ag.Diff, relText(ag.Rel))
	}
	tw.Flush()
	if d.Largest != "" {
		fmt.Fprintf(w, "largest divergence: %s (%s)\n", d.Largest, relText(d.Aggregate(d.Largest).Rel))
	}
	fmt.Fprintf(w, "%d jobs completed on both; mean |response difference| %.1f s\n", d.Both, d.MeanAbsResponseS)
	jobs := d.Top(top)
	fmt.Fprintf(w, "\n%d jobs with the largest |response difference| (emulated - simulated):\n", len(jobs))
	_ = printJobTable(w, jobs)
}

// printJobTable prints jobs as an aligned table of the per-job columns.
func printJobTable(w io.Writer, jobs []report.JobDiff) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(report.DivergenceColumns, "\t"))
	for _, j := range jobs {
		fmt.Fprintln(tw, strings.Join(j.Row(), "\t"))
	}
	return tw.Flush()
}

// relText is a relative difference in percent, "-" when there is none.
func relText(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f %%", 100**r)
}
