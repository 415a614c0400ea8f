package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

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
}

func cmdStudy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "cluster-count" {
		return usageError{"study: the only study is cluster-count"}
	}
	fs := flag.NewFlagSet("study cluster-count", flag.ContinueOnError)
	appsFlag := fs.String("apps", "allgather,wave,poisson,prime", "applications, comma-separated")
	ic := fs.String("interconnect", "both", "myri10g, gbe or both")
	size := fs.Int("size", 32, "job size in nodes")
	scen := fs.String("scenario", "cluster-count", "scenario giving the platform")
	backend := fs.String("backend", "inproc", "where each run's actors run: inproc, netns (root) or docker")
	out := fs.String("out", "", "write study.json here")
	var o overrideFlags
	o.register(fs)
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{"study cluster-count takes no positional arguments"}
	}
	base, err := scenarios.Open(*scen)
	if err != nil {
		return err
	}
	var ics []string
	switch *ic {
	case "both":
		ics = []string{"myri10g", "gbe"}
	case "myri10g", "gbe":
		ics = []string{*ic}
	default:
		return usageError{fmt.Sprintf("study: --interconnect %q (known: myri10g, gbe, both)", *ic)}
	}
	switch *backend {
	case "inproc", "netns", "docker":
	default:
		return usageError{fmt.Sprintf("study: --backend %q (known: inproc, netns, docker)", *backend)}
	}
	appList := strings.Split(*appsFlag, ",")
	var rows []StudyRow
	for _, name := range ics {
		set := clusterSets[name]
		for _, app := range appList {
			for k := 1; k <= len(set.clusters); k++ {
				for _, combo := range combinations(set.clusters, k, set.must) {
					row, err := studyRun(ctx, *backend, base, o.overrides(fs), name, app, combo, *size)
					if err != nil {
						return err
					}
					fmt.Fprintf(stderr, "%-8s %-10s %-40s exec %8.1f s  (wall %5.1f s) %s %s\n", name, app,
						strings.Join(combo, "+"), row.ExecS, row.WallS, row.Status, row.Reason)
					rows = append(rows, row)
				}
			}
		}
	}
	printStudy(stdout, rows, ics, appList)
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("study: %w", err)
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return fmt.Errorf("study: %w", err)
		}
		if err := os.WriteFile(filepath.Join(*out, "study.json"), b, 0o644); err != nil {
			return fmt.Errorf("study: %w", err)
		}
	}
	return nil
}

func studyRun(ctx context.Context, backend string, base *scenarios.Scenario, ov scenarios.Overrides, ic, app string, combo []string, size int) (StudyRow, error) {
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
	plan, err := s.Expand(env(), ov)
	if err != nil {
		return StudyRow{}, fmt.Errorf("study %s on %v: %w", app, combo, err)
	}
	res, err := runOn(ctx, backend, plan, launch.Options{})
	if err != nil {
		return StudyRow{}, fmt.Errorf("study %s on %v: %w", app, combo, err)
	}
	row := StudyRow{Interconnect: ic, App: app, Clusters: combo, WallS: res.Summary.WallS}
	if len(res.Jobs) == 1 {
		j := res.Jobs[0]
		row.ExecS, row.Status, row.Reason = j.Exec(), j.Status, j.Reason
	}
	return row, nil
}

func printStudy(w io.Writer, rows []StudyRow, ics, appList []string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "interconnect\tapplication\t1 cluster\t2 clusters\t3 clusters\t4 clusters\t")
	for _, ic := range ics {
		for _, app := range appList {
			fmt.Fprintf(tw, "%s\t%s\t", ic, app)
			for k := 1; k <= 4; k++ {
				var sum float64
				n := 0
				for _, r := range rows {
					if r.Interconnect == ic && r.App == app && len(r.Clusters) == k && r.Status == "completed" {
						sum += r.ExecS
						n++
					}
				}
				if n == 0 {
					fmt.Fprint(tw, "-\t")
				} else {
					fmt.Fprintf(tw, "%.1f s (n=%d)\t", sum/float64(n), n)
				}
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
}
