package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Options of Write.
type Options struct {
	// Title heads the page (default "koala-emu report").
	Title string
	// SaturationFactor is k of the saturation rule (default 2).
	SaturationFactor float64
	// UnplacedPct is the share of unplaced jobs, in percent, above which a
	// level is saturated (0 or less: the default, 1).
	UnplacedPct float64
}

func (o Options) withDefaults() Options {
	if o.Title == "" {
		o.Title = "koala-emu report"
	}
	if o.SaturationFactor <= 0 {
		o.SaturationFactor = DefaultSaturationFactor
	}
	if o.UnplacedPct <= 0 {
		o.UnplacedPct = DefaultUnplacedPct
	}
	return o
}

// Files Write creates besides the figures.
const (
	PageHTML      = "report.html"
	SaturationCSV = "saturation.csv"
)

// SaturationRow is one line of the saturation table: where saturation sets
// in for an application and a policy of a sweep.
type SaturationRow struct {
	Source, App, Policy string
	Point               SaturationPoint
}

// page is everything the HTML shows.
type page struct {
	Title      string
	Inputs     []string
	Rule       string
	Runs       []*run
	Sweeps     []sweepSection
	Exec       *figRef
	ExecNote   string
	CDFs       []*figRef
	Malleable  []*figRef
	Saturation []SaturationRow
	// Migrations are the migration sweeps' sections.
	Migrations []migrationSection
	// Divergence is the sim run beside the emulated one when the inputs
	// are exactly those two runs; DivergenceErr says why it could not be
	// computed (runs of different plans).
	Divergence    *Divergence
	DivergenceTop []JobDiff
	DivergenceErr string
	Figures       []string // every file written, for the test and the page's index
}

// divergenceTop is how many jobs the page's divergence table names.
const divergenceTop = 10

// Faulted are the runs with a faults section (a faults timeline or a
// resubmission policy).
func (p *page) Faulted() []*run {
	var out []*run
	for _, r := range p.Runs {
		if r.Summary.Faults != nil {
			out = append(out, r)
		}
	}
	return out
}

// figRef is a figure as the page shows it.
type figRef struct {
	Title, Caption, PNG, SVG string
}

// sweepSection is one sweep (or the set of run directories that cover
// several utilisation levels) with its AJRT figures.
type sweepSection struct {
	Label    string
	Figures  []*figRef
	Rows     []SaturationRow
	Policies []string
	Apps     []string
	Cells    []sweepCell
	Axes     []string
	NotDone  int
}

// Write reads the input directories (run, sweep or study directories, told
// apart by their files; see the package comment), and writes into outDir
// report.html, every figure as PNG and SVG, and saturation.csv when there
// are utilisation series. An input that lacks a file it needs is an error
// naming the file.
func Write(outDir string, inputs []string, opts Options) error {
	opts = opts.withDefaults()
	in, err := readInputs(inputs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	pg := &page{Title: opts.Title, Inputs: inputs, Rule: ruleText(opts.SaturationFactor, opts.UnplacedPct), Runs: in.Runs}
	if len(inputs) == 2 && len(in.Runs) == 2 {
		if sim, emu, ok := simAndEmu(in.Runs[0], in.Runs[1]); ok {
			if pg.Divergence, err = diverge(sim, emu); err != nil {
				pg.DivergenceErr = err.Error()
			} else {
				pg.DivergenceTop = pg.Divergence.Top(divergenceTop)
			}
		}
	}
	used := map[string]int{}
	name := func(parts ...string) string {
		var ss []string
		for _, p := range parts {
			ss = append(ss, slug(p))
		}
		n := strings.Join(ss, "-")
		used[n]++
		if used[n] > 1 {
			n += "-" + strconv.Itoa(used[n])
		}
		return n
	}
	save := func(f *figure, caption string) (*figRef, error) {
		files, err := f.save(outDir)
		if err != nil {
			return nil, err
		}
		pg.Figures = append(pg.Figures, files...)
		return &figRef{Title: f.Title, Caption: caption, PNG: files[0], SVG: files[1]}, nil
	}

	// AJRT against utilisation: per sweep, and over the run directories
	// when they cover several levels of one application and policy.
	type source struct {
		label  string
		points []cellPoint
		sw     *sweepInput
	}
	if pg.Migrations, err = migrationSections(outDir, in.Sweeps, name, save); err != nil {
		return err
	}
	var sources []source
	for _, s := range in.Sweeps {
		if !isMigrationSweep(s) { // a migration sweep has its own section
			sources = append(sources, source{s.Label, sweepPoints(s), s})
		}
	}
	if len(in.Runs) > 1 {
		sources = append(sources, source{label: "runs given", points: runPoints(in.Runs)})
	}
	for _, src := range sources {
		ss := groupSeries(src.points)
		if src.sw == nil && !anyMultiLevel(ss) {
			continue
		}
		sec := sweepSection{Label: src.label}
		if src.sw != nil {
			sec.Cells, sec.Axes, sec.NotDone = src.sw.Cells, src.sw.Axes, src.sw.NotDone
		}
		byApp := map[string][]series{}
		for _, s := range ss {
			if _, ok := byApp[s.App]; !ok {
				sec.Apps = append(sec.Apps, s.App)
			}
			byApp[s.App] = append(byApp[s.App], s)
			if !contains(sec.Policies, s.Policy) {
				sec.Policies = append(sec.Policies, s.Policy)
			}
		}
		for _, app := range sec.Apps {
			title := "AJRT against net utilisation: " + app
			if len(sources) > 1 {
				title += " (" + src.label + ")"
			}
			f, pts, err := ajrtFigure(name("ajrt", src.label, app), title, byApp[app], opts.SaturationFactor, opts.UnplacedPct)
			if err != nil {
				return err
			}
			ref, err := save(f, fmt.Sprintf("One line per policy; the red ring marks each policy's saturation point: the first level where AJRT "+
				"exceeds %g x its value at the lowest level or more than %g %% of the jobs were not placed (rule above).", opts.SaturationFactor, opts.UnplacedPct))
			if err != nil {
				return err
			}
			sec.Figures = append(sec.Figures, ref)
			for i, s := range byApp[app] {
				row := SaturationRow{Source: src.label, App: app, Policy: s.Policy, Point: pts[i]}
				sec.Rows = append(sec.Rows, row)
				pg.Saturation = append(pg.Saturation, row)
			}
		}
		pg.Sweeps = append(pg.Sweeps, sec)
	}

	// Execution time against the number of clusters.
	var ex []execPoint
	for _, st := range in.Studies {
		for _, r := range st.Rows {
			if (r.Status == "" || r.Status == statusCompleted) && len(r.Clusters) > 0 {
				ex = append(ex, execPoint{App: r.App, Interconnect: r.Interconnect, Clusters: len(r.Clusters), ExecS: r.ExecS})
			}
		}
	}
	for _, r := range in.Runs {
		for _, j := range r.Jobs {
			if j.completed && j.Clusters > 0 && j.Exec >= 0 {
				ex = append(ex, execPoint{App: j.App, Interconnect: r.Interconnect, Clusters: j.Clusters, ExecS: j.Exec})
			}
		}
	}
	if len(ex) > 0 {
		f, err := execFigure(name("exec-clusters"), ex)
		if err != nil {
			return err
		}
		if pg.Exec, err = save(f, "Mean execution time of the completed jobs (of every size), by the number of clusters they spanned; "+
			"colour: application, dash and marker: interconnect (a run's scenario and the range of its inter-cluster link bandwidths, "+
			"or the study's interconnect)."); err != nil {
			return err
		}
	}

	// CDFs and malleable series, from the run directories.
	if len(in.Runs) > 0 {
		for _, c := range []struct {
			name, title, what string
			get               func(jobRow) float64
		}{
			{"cdf-wait", "CDF of wait times", "wait time: submission to start", func(j jobRow) float64 { return j.Wait }},
			{"cdf-response", "CDF of response times", "response time: submission to end", func(j jobRow) float64 { return j.Response }},
		} {
			f, err := cdfFigure(name(c.name), c.title, c.what, in.Runs, c.get)
			if err != nil {
				return err
			}
			ref, err := save(f, "Completed jobs of each run.")
			if err != nil {
				return err
			}
			pg.CDFs = append(pg.CDFs, ref)
		}
	}
	for _, r := range in.Runs {
		if !r.Malleable {
			continue
		}
		f, err := utilFigure(name("utilisation", r.Label), r)
		if err != nil {
			return err
		}
		ref, err := save(f, "From "+UtilizationCSV+": processors held by KOALA's jobs and by local users, over the capacity of the clusters, at each sample of the malleability manager.")
		if err != nil {
			return err
		}
		pg.Malleable = append(pg.Malleable, ref)
		if f, err = resizeFigure(name("resizes", r.Label), r); err != nil {
			return err
		}
		if ref, err = save(f, "From "+ResizesCSV+": cumulative number of grow and shrink operations (mandatory shrinks are also counted among the shrinks)."); err != nil {
			return err
		}
		pg.Malleable = append(pg.Malleable, ref)
	}

	if len(pg.Saturation) > 0 {
		if err := writeSaturationCSV(filepath.Join(outDir, SaturationCSV), pg.Saturation); err != nil {
			return err
		}
	}
	return writePage(filepath.Join(outDir, PageHTML), pg)
}

func anyMultiLevel(ss []series) bool {
	for _, s := range ss {
		if len(s.Levels) > 1 {
			return true
		}
	}
	return false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func writeSaturationCSV(path string, rows []SaturationRow) error {
	var b strings.Builder
	b.WriteString("source,application,policy,from_pct,to_pct,interval,reason\n")
	f := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return pct(v)
	}
	q := func(s string) string {
		if strings.ContainsAny(s, ",\"\n") {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
		return s
	}
	sorted := append([]SaturationRow(nil), rows...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Source < sorted[j].Source })
	for _, r := range sorted {
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s\n", q(r.Source), q(r.App), q(r.Policy), f(r.Point.Lower), f(r.Point.Upper),
			q(r.Point.Interval()), q(r.Point.Why))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
