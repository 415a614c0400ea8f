package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/internal/pool"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// clusterSets of the cluster-count study (SPEC §7): Myri-10G is DAS-3 with
// Delft excluded, every combination of its four clusters; GbE is DAS-3 with
// Delft included (Leiden excluded, the Delft-Leiden pair is unavailable), the
// combinations that contain Delft, so every job crosses a GbE link.
var clusterSets = map[string]struct {
	clusters []string
	must     string
}{
	"myri10g": {clusters: []string{netem.Vrije, netem.Amsterdam, netem.MultimediaN, netem.Leiden}},
	"gbe":     {clusters: []string{netem.Delft, netem.Vrije, netem.Amsterdam, netem.MultimediaN}, must: netem.Delft},
}

// combinations returns every subset of k clusters, keeping only those with must.
func combinations(cs []string, k int, must string) [][]string {
	var out [][]string
	var rec func(start int, cur []string)
	rec = func(start int, cur []string) {
		if len(cur) == k {
			if must == "" || contains(cur, must) {
				out = append(out, append([]string(nil), cur...))
			}
			return
		}
		for i := start; i < len(cs); i++ {
			rec(i+1, append(cur, cs[i]))
		}
	}
	rec(0, nil)
	return out
}

func contains(cs []string, c string) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// split divides total into n near-equal parts, larger first.
func split(total, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = total / n
		if i < total%n {
			out[i]++
		}
	}
	return out
}

// StudyRow is one run of the cluster-count study.
type StudyRow struct {
	Interconnect string   `json:"interconnect"`
	App          string   `json:"app"`
	Clusters     []string `json:"clusters"`
	ExecS        float64  `json:"exec_s"`
	WallS        float64  `json:"wall_s"`
	Status       string   `json:"status"`
	Reason       string   `json:"reason,omitempty"`
	// Dilation and TimeScale the run used, and its fidelity verdict with
	// the reasons for a degraded one.
	Dilation  float64  `json:"dilation"`
	TimeScale float64  `json:"time_scale"`
	Verdict   string   `json:"fidelity"`
	Why       []string `json:"fidelity_reasons,omitempty"`
}

// studyOutput is study cluster-count --json.
type studyOutput struct {
	Study   string `json:"study"`
	Backend string `json:"backend"`
	// Rows are the runs, one per interconnect, application and cluster
	// combination, in the order they ran (the same rows as study.json).
	Rows []StudyRow `json:"rows"`
	// Error is set when the study stopped; rows holds the runs done.
	Error string `json:"error,omitempty"`
}

func (o *studyOutput) setError(err error) { o.Error = errorText(err) }

func newStudyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study STUDY",
		Short: "run a study: a series of runs and a table of their results",
		Long: `Run a study: a series of runs and a table of their results. The one study is
cluster-count (SPEC section 7): one job per application on 1 to 4 clusters, over
Myri-10G and over GbE.`,
		Args:                       exactArgs(0),
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			if err := cmd.Usage(); err != nil {
				return err
			}
			return usagef("study: name a study (the one study is cluster-count)")
		},
	}
	cmd.AddCommand(newClusterCountCmd(a))
	return cmd
}

// clusterCountHelp is the long help of study cluster-count.
const clusterCountHelp = `Run one job of --size nodes, split evenly over 1 to 4 clusters, per application:
over Myri-10G (DAS-3 without Delft: Vrije, then Amsterdam, MultimediaN and Leiden)
and over GbE (Delft, then Vrije, Amsterdam and MultimediaN, so every job crosses a
GbE link). By default k clusters are the first k of that order, as the paper's
runs were (--all-combinations runs every combination). Each run chooses its
dilation (auto unless --dilation says otherwise) and the time scale that fits
--cell-wall, and reports its fidelity verdict. The table of mean execution times
and verdicts goes to stdout, one line per run to stderr; --out writes study.json.`

func newClusterCountCmd(a *app) *cobra.Command {
	f := &studyFlags{}
	cmd := &cobra.Command{
		Use:   "cluster-count",
		Short: "execution time of one job over 1 to 4 clusters, per application and interconnect",
		Long:  clusterCountHelp + a.backendsSection(),
		Example: `  koala-emu study cluster-count --apps wave --interconnect myri10g
  koala-emu study cluster-count --backend netns --out runs/cluster-count`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := &studyOutput{Study: "cluster-count", Backend: f.backend, Rows: []StudyRow{}}
			return finishJSON(a, f.asJSON, out, clusterCount(cmd, a, f, out))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.apps, "apps", "allgather,wave,poisson,prime", "applications, comma-separated")
	fs.StringVar(&f.ic, "interconnect", "both", "myri10g, gbe or both")
	fs.IntVar(&f.size, "size", 32, "job size in nodes, split evenly over the clusters")
	fs.StringVar(&f.scenario, "scenario", "cluster-count", "scenario giving the platform (its workload is replaced)")
	fs.StringVar(&f.out, "out", "", "write study.json to this directory (default: none)")
	fs.BoolVar(&f.all, "all-combinations", false, "run every combination of k clusters, not only the first k")
	fs.DurationVar(&f.cellWall, "cell-wall", 40*time.Second, "wall time each run should take: its time scale follows from it and the dilation the host needs (a run that needs more time to stay faithful takes it; --time-scale overrides)")
	fs.IntVar(&f.parallel, "parallel", 0, "cells run at once, each dilated for its share of the host (default: 2 on inproc, 1 elsewhere)")
	f.register(fs, a)
	addJSONFlag(cmd, &f.asJSON, "the rows")
	f.o.register(fs)
	return cmd
}

// studyFlags are the flags of study cluster-count.
type studyFlags struct {
	runFlags
	apps     string
	ic       string
	size     int
	scenario string
	all      bool
	cellWall time.Duration
	parallel int
}

// clusterCount runs the study, appending each run's row to out.Rows, and
// prints the table (to stderr with --json) and study.json.
func clusterCount(cmd *cobra.Command, a *app, f *studyFlags, out *studyOutput) error {
	var ics []string
	switch f.ic {
	case "both":
		ics = []string{"myri10g", "gbe"}
	case "myri10g", "gbe":
		ics = []string{f.ic}
	default:
		return usagef("--interconnect %q (known: myri10g, gbe, both)", f.ic)
	}
	b, err := a.lookupBackend(f.backend)
	if err != nil {
		return err
	}
	base, err := scenarios.Open(f.scenario)
	if err != nil {
		return err
	}
	ov := f.o.overrides(cmd.Flags())
	if !cmd.Flags().Changed("dilation") {
		ov.Dilation, ov.DilationAuto = nil, true
	}
	if ov.TimeScale == nil && f.cellWall > 0 {
		base.TimeScale, base.WallBudget = nil, &scenarios.WallBudget{Seconds: f.cellWall.Seconds()}
	}
	opts := launch.Options{RequireFaithful: f.requireFaithful, Progress: io.Discard, KeepDilation: true, SimModel: f.model}
	parallel, err := studyParallel(cmd, b.Name(), f.parallel)
	if err != nil {
		return err
	}
	if opts, err = launch.ShareHost(cmd.Context(), b, parallel, opts); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	appList := strings.Split(f.apps, ",")
	var cells []studyCell
	for _, name := range ics {
		cs := clusterSets[name]
		for _, app := range appList {
			for k := 1; k <= len(cs.clusters); k++ {
				combos := combinations(cs.clusters, k, cs.must)
				if !f.all {
					combos = [][]string{cs.clusters[:k]}
				}
				for _, combo := range combos {
					cells = append(cells, studyCell{ic: name, app: app, combo: combo})
				}
			}
		}
	}
	var printing sync.Mutex // cells side by side share stderr
	rows, failures, err := runCells(cmd.Context(), cells, parallel, func(ctx context.Context, c studyCell) (StudyRow, error) {
		row, err := studyRun(ctx, b, opts, base, ov, c.ic, c.app, c.combo, f.size)
		if err == nil || errors.As(err, new(*cellFailed)) {
			printing.Lock()
			defer printing.Unlock()
			fmt.Fprintf(a.stderr, "%-8s %-10s %-40s exec %8.1f s  (wall %5.1f s, dilation %g, time scale %g) %s %s %s %s\n", c.ic, c.app,
				strings.Join(c.combo, "+"), row.ExecS, row.WallS, row.Dilation, row.TimeScale, row.Status, row.Reason, row.Verdict, strings.Join(row.Why, "; "))
		}
		return row, err
	})
	out.Rows = append(out.Rows, rows...)
	if err != nil {
		return err
	}
	w := a.stdout
	if f.asJSON {
		w = a.stderr
	}
	printStudy(w, out.Rows, ics, appList)
	if f.out != "" {
		err = writeStudy(f.out, out.Rows)
	}
	if len(failures) > 0 {
		err = errors.Join(err, fmt.Errorf("study: %d of %d runs failed (their rows say so): %s", len(failures), len(out.Rows), strings.Join(failures, "; ")))
	}
	return err
}

// studyCell is one run of a study: an interconnect, an application and
// the clusters its job is split over.
type studyCell struct {
	ic, app string
	combo   []string
}

// studyParallel is how many cells run at once: the flag's value, or by
// default 2 on inproc (where the host's capacity is shared out by auto
// dilation, fidelity.Capacity.Shared) and 1 on the other backends (a
// kernel backend's grid of processes or containers takes the host's CPU
// to start).
func studyParallel(cmd *cobra.Command, backend string, n int) (int, error) {
	if cmd.Flags().Changed("parallel") {
		if n < 1 {
			return 0, usagef("--parallel %d: at least 1", n)
		}
		return n, nil
	}
	if backend == "inproc" {
		return 2, nil
	}
	return 1, nil
}

// runCells runs every cell on up to parallel workers and returns the rows
// in the cells' order (a cell that did not run has no row) and the
// failures of cells that started and failed. Any other error stops the
// cells not yet started, lets the running ones end with the context, and
// is returned.
func runCells(parent context.Context, cells []studyCell, parallel int, run func(context.Context, studyCell) (StudyRow, error)) ([]StudyRow, []string, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	rows := make([]*StudyRow, len(cells))
	failed := make([]string, len(cells))
	errs := make([]error, len(cells))
	pool.Each(ctx, pool.Upto(len(cells)), parallel, func(i int) {
		row, err := run(ctx, cells[i])
		var cf *cellFailed
		switch {
		case err == nil:
			rows[i] = &row
		case errors.As(err, &cf) && ctx.Err() == nil:
			rows[i], failed[i] = &row, err.Error()
		default:
			errs[i] = err
			cancel()
		}
	})
	var out []StudyRow
	var failures []string
	for i := range cells {
		if rows[i] != nil {
			out = append(out, *rows[i])
		}
		if failed[i] != "" {
			failures = append(failures, failed[i])
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		err = parent.Err()
	}
	return out, failures, err
}

// cellFailed is a run of a study that started and failed: the study
// records it as a row and goes on (a run that cannot start, from bad input,
// ends the study).
type cellFailed struct{ err error }

func (c *cellFailed) Error() string { return c.err.Error() }
func (c *cellFailed) Unwrap() error { return c.err }

// writeStudy writes study.json into dir.
func writeStudy(dir string, rows []StudyRow) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "study.json"), b, 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	return nil
}

func studyRun(ctx context.Context, b launch.Backend, opts launch.Options, base *scenarios.Scenario, ov scenarios.Overrides, ic, app string, combo []string, size int) (StudyRow, error) {
	s := *base
	s.Name = fmt.Sprintf("cluster-count-%s-%s-%d", ic, app, len(combo))
	s.Topology.Include = combo
	s.Topology.Exclude = nil
	w := s.Workload
	w.Application = app
	w.Background = nil
	w.Arrivals = nil
	job := scenarios.JobSpec{AtS: 0, Application: app, Size: size, Request: "fixed"}
	for i, n := range split(size, len(combo)) {
		job.Components = append(job.Components, scenarios.ComponentSpec{Cluster: combo[i], Size: n})
	}
	w.Jobs = []scenarios.JobSpec{job}
	s.Workload = w
	plan, err := s.Expand(launch.ScenarioEnv(), ov)
	if err != nil {
		return StudyRow{}, fmt.Errorf("study %s on %v: %w", app, combo, err)
	}
	if err := launch.Check(b, plan, opts); err != nil {
		return StudyRow{}, fmt.Errorf("study %s on %v: %w", app, combo, err)
	}
	res, err := b.Run(ctx, plan, opts)
	if err != nil {
		err = fmt.Errorf("study %s on %v: %w", app, combo, err)
		return StudyRow{Interconnect: ic, App: app, Clusters: combo, Status: "error", Reason: err.Error()}, &cellFailed{err}
	}
	row := StudyRow{Interconnect: ic, App: app, Clusters: combo, WallS: res.Summary.WallS,
		Dilation: res.Summary.Dilation, TimeScale: res.Summary.TimeScale}
	if fr := res.Summary.Fidelity; fr != nil {
		row.Verdict, row.Why = fr.Verdict, fr.Reasons
	}
	if len(res.Jobs) == 1 {
		j := res.Jobs[0]
		row.ExecS, row.Status, row.Reason = j.Exec(), j.Status, j.Reason
	}
	return row, nil
}

func printStudy(w io.Writer, rows []StudyRow, ics, appList []string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "interconnect\tapplication\t1 cluster\t2 clusters\t3 clusters\t4 clusters\t4 / 1\t")
	for _, ic := range ics {
		for _, app := range appList {
			fmt.Fprintf(tw, "%s\t%s\t", ic, app)
			var mean [5]float64
			for k := 1; k <= 4; k++ {
				var sum float64
				n, degraded := 0, 0
				for _, r := range rows {
					if r.Interconnect == ic && r.App == app && len(r.Clusters) == k && r.Status == "completed" {
						sum += r.ExecS
						n++
						if r.Verdict != "faithful" {
							degraded++
						}
					}
				}
				if n == 0 {
					fmt.Fprint(tw, "-\t")
					continue
				}
				mean[k] = sum / float64(n)
				verdict := "faithful"
				if degraded > 0 {
					verdict = fmt.Sprintf("%d degraded", degraded)
				}
				fmt.Fprintf(tw, "%.1f s (n=%d, %s)\t", mean[k], n, verdict)
			}
			if mean[1] > 0 && mean[4] > 0 {
				fmt.Fprintf(tw, "%.2f\t", mean[4]/mean[1])
			} else {
				fmt.Fprint(tw, "-\t")
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
}
