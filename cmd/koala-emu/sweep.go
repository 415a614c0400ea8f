package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
	"github.com/koala-emu/koala-emu/sweep"
)

// sweepOutput is sweep --json.
type sweepOutput struct {
	Sweep   string `json:"sweep"`
	Backend string `json:"backend"`
	Dir     string `json:"dir"`
	Cells   int    `json:"cells"`
	Done    int    `json:"done"`
	Resumed int    `json:"resumed"`
	Failed  int    `json:"failed"`
	Error   string `json:"error,omitempty"`
}

func (o *sweepOutput) setError(err error) { o.Error = errorText(err) }

// sweepFlags are the flags of sweep.
type sweepFlags struct {
	out, backend, model string
	parallel            int
	asJSON              bool
}

func newSweepCmd(a *app) *cobra.Command {
	f := &sweepFlags{}
	cmd := &cobra.Command{
		Use:   "sweep SWEEP.yaml",
		Short: "run a grid of scenario variants, resuming after an interruption, and write one table",
		Long: `sweep runs a base scenario once per cell of a grid of overrides (any scenario field by
its path, e.g. workload.arrivals.net_utilization, policy.placement, workload.application,
topology.links.pairs[0].latency_ms, seeds) on a backend, keeps every cell's full results in
its own directory, resumes after an interruption without redoing finished cells, and writes
sweep.csv and sweep.json with a row per cell (AJRT, wait, execution, co-allocated share,
utilisation, dilation and fidelity verdict). See sweep/testdata for examples.`,
		Example: `  koala-emu sweep my-sweep.yaml --out runs/my-sweep
  koala-emu sweep my-sweep.yaml --backend sim --model shipped --out runs/my-sweep-shipped
  koala-emu report runs/my-sweep --out runs/my-sweep/report`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := &sweepOutput{Sweep: args[0], Dir: f.out}
			return finishJSON(a, f.asJSON, o, runSweep(cmd.Context(), a, args[0], f, o))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.out, "out", "sweep", "directory of the sweep: a directory per cell, sweep.csv and sweep.json")
	fs.StringVar(&f.backend, "backend", "", "replace the sweep file's backend: "+a.backendHelp()+" (default: the file's, else "+defaultBackend+")")
	fs.IntVar(&f.parallel, "parallel", 0, "cells run at once (default: the file's, else 1); on an emulated backend each cell's auto dilation is chosen for its share of the host")
	addModelFlag(fs, &f.model)
	addJSONFlag(cmd, &f.asJSON, "the counts of cells")
	return cmd
}

// runSweep runs the sweep file's cells on the backend. The options every
// cell runs with (--model) are checked against the backend before the
// first cell runs.
func runSweep(ctx context.Context, a *app, file string, f *sweepFlags, o *sweepOutput) error {
	sw, err := sweep.Load(file)
	if err != nil {
		return err
	}
	backend := cmp.Or(f.backend, sw.Backend, defaultBackend)
	o.Backend = backend
	b, err := a.lookupBackend(backend)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", file, err)
	}
	opts := launch.Options{SimModel: f.model}
	if err := launch.Check(b, nil, opts); err != nil {
		return fmt.Errorf("sweep %s: %w", file, err)
	}
	parallel := f.parallel
	if parallel <= 0 {
		parallel = sw.Parallel
	}
	if opts, err = launch.ShareHost(ctx, b, parallel, opts); err != nil {
		return fmt.Errorf("sweep %s: %w", file, err)
	}
	env := launch.ScenarioEnv()
	progress := io.Writer(a.stderr)
	run := func(ctx context.Context, c sweep.Cell, dir string) (sweep.Row, error) {
		s, err := scenarios.Parse(c.Scenario, filepath.Join(dir, sweep.ScenarioYML))
		if err != nil {
			return nil, err
		}
		plan, err := s.Expand(env, scenarios.Overrides{})
		if err != nil {
			return nil, err
		}
		cell := opts
		cell.Out = dir
		res, err := b.Run(ctx, plan, cell)
		if res == nil {
			return nil, err
		}
		return sweepRow(res), err
	}
	r, err := sweep.Run(ctx, sw, run, sweep.Options{Dir: f.out, Parallel: parallel, Progress: progress, Env: &env})
	if r != nil {
		o.Cells, o.Done, o.Resumed, o.Failed = len(r.Cells), r.Done, r.Resumed, r.Failed
		if !f.asJSON {
			fmt.Fprintf(a.stdout, "%d cells: %d done (%d from an earlier run), %d failed; table in %s\n",
				len(r.Cells), r.Done, r.Resumed, r.Failed, filepath.Join(f.out, sweep.TableCSV))
		}
	}
	return err
}

// sweepRow is a cell's row of the table.
func sweepRow(res *launch.Result) sweep.Row {
	s := res.Summary
	row := sweep.Row{"ajrt_s": s.AJRTS, "avg_wait_s": s.AvgWaitS, "avg_exec_s": s.AvgExecS,
		"coallocated_pct": s.CoallocatedPct, "net_utilization_pct": s.NetUtilizationPct,
		"observed_utilization_pct": s.ObservedUtilizationPct, "completed": s.Jobs.Completed, "failed": s.Jobs.Failed,
		"dilation": s.Dilation, "time_scale": s.TimeScale}
	if s.Fidelity != nil {
		row["fidelity"] = s.Fidelity.Verdict
	}
	return row
}
