package report

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"strings"
	"sync"
)

const css = `
body { font-family: "Liberation Sans", Arial, sans-serif; margin: 0 auto; max-width: 1250px; padding: 0 24px 48px; color: #222; }
h1 { font-size: 1.6em; border-bottom: 2px solid #444; padding-bottom: 6px; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #bbb; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #eee; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
.rule { background: #f4f6fb; border-left: 4px solid #5070b0; padding: 8px 12px; font-size: 0.92em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.88em; color: #444; margin-top: 4px; }
.degraded { color: #b00; font-weight: bold; }
.faithful { color: #070; }
code { font-size: 0.95em; }
nav ul { columns: 2; }
details { margin: 0.8em 0; }
`

var funcs = template.FuncMap{
	"f1": func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"verdict": func(r *run) string {
		if f := r.Summary.Fidelity; f != nil {
			return f.Verdict
		}
		return "not measured"
	},
	"reasons": func(r *run) string {
		if f := r.Summary.Fidelity; f != nil {
			return strings.Join(f.Reasons, "; ")
		}
		return ""
	},
	"interval": func(rows []SaturationRow, app, pol string) SaturationRow {
		for _, r := range rows {
			if r.App == app && r.Policy == pol {
				return r
			}
		}
		return SaturationRow{}
	},
	"cellValue": func(c sweepCell, axis string) string {
		for _, v := range c.Values {
			if v.Axis == axis {
				return v.Value
			}
		}
		return ""
	},
	"unplaced": func(c sweepCell) int { return unplacedOf(c.Summary.FailReasons) },
	"anchor":   slug,
	"fs":       fmtS,
	"mb":       func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/1e6) },
	"ratio": func(c MigrationCost) string {
		if c.PredictedS > 0 {
			return fmtS(c.MeasuredS/c.PredictedS, 2)
		}
		return NotApplicable
	},
	"relpct": func(r *float64) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%+.1f", 100**r)
	},
	"detected": func(d *float64) string {
		if d == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *d)
	},
}

// pageTmpl is parsed when a page is first written, not while the process
// starts.
var pageTmpl = sync.OnceValue(func() *template.Template { return template.Must(template.New("page").Funcs(funcs).Parse(pageText)) })

const pageText = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>Inputs: {{range $i, $d := .Inputs}}{{if $i}}, {{end}}<code>{{$d}}</code>{{end}}.
Every figure is also available as SVG (link under it).</p>
<nav><ul>
{{if .Runs}}<li><a href="#runs">Runs compared</a></li>{{end}}
{{if or .Divergence .DivergenceErr}}<li><a href="#divergence">Divergence of the emulated run from the simulated one</a></li>{{end}}
{{range .Sweeps}}<li><a href="#sweep-{{anchor .Label}}">AJRT against net utilisation: {{.Label}}</a></li>{{end}}
{{range .Migrations}}<li><a href="#migration-{{anchor .Label}}">Migration decisions: {{.Label}}</a></li>{{end}}
{{if .Exec}}<li><a href="#exec">Execution time against the number of clusters</a></li>{{end}}
{{if .CDFs}}<li><a href="#cdf">Wait and response times</a></li>{{end}}
{{if .Malleable}}<li><a href="#malleable">Malleable runs</a></li>{{end}}
{{if .Faulted}}<li><a href="#faults">Faults</a></li>{{end}}
</ul></nav>

{{if .Runs}}
<h2 id="runs">Runs compared</h2>
<table>
<tr><th>run</th><th>scenario</th><th>backend</th><th>policy</th><th>seed</th><th>jobs done / submitted</th>
<th>AJRT (s)</th><th>wait (s)</th><th>execution (s)</th><th>co-allocated (%)</th>
<th>net util. (%)</th><th>observed util. (%)</th><th>dilation</th><th>fidelity</th></tr>
{{range .Runs}}<tr><td><code>{{.Label}}</code></td><td>{{.Summary.Scenario}}</td><td>{{.Summary.Backend}}</td><td>{{.Summary.Policy}}</td>
<td class="n">{{.Summary.Seed}}</td><td class="n">{{.Summary.Jobs.Completed}} / {{.Summary.Jobs.Submitted}}</td>
<td class="n">{{f1 .Summary.AJRTS}}</td><td class="n">{{f1 .Summary.AvgWaitS}}</td><td class="n">{{f1 .Summary.AvgExecS}}</td>
<td class="n">{{f1 .Summary.CoallocatedPct}}</td><td class="n">{{f1 .Summary.NetUtilizationPct}}</td>
<td class="n">{{f1 .Summary.ObservedUtilizationPct}}</td><td class="n">{{.Summary.Dilation}}</td>
<td class="{{verdict .}}" title="{{reasons .}}">{{verdict .}}</td></tr>
{{end}}</table>
<p>AJRT, wait and execution are means over the completed jobs (wait: submission to start; AJRT: submission to end).
Net utilisation counts each job's single-cluster execution time, observed its measured one, over the nodes of the
included clusters and the run's span.</p>
{{end}}

{{if .DivergenceErr}}
<h2 id="divergence">Divergence of the emulated run from the simulated one</h2>
<p>Not computed: {{.DivergenceErr}}</p>
{{end}}
{{with .Divergence}}
<h2 id="divergence">Divergence of the emulated run from the simulated one</h2>
<p>{{.Scenario}}, seed {{.Seed}}, policy {{.Policy}}: <code>{{.Sim}}</code> (sim) against <code>{{.Emu}}</code> ({{.EmuBackend}}, fidelity {{.EmuFidelity}}).
Differences are emulated minus simulated; relative ones are over the simulated figure. Largest: {{.Largest}}.</p>
<table>
<tr><th>aggregate</th><th>sim</th><th>{{.EmuBackend}}</th><th>difference</th><th>relative (%)</th></tr>
{{range .Aggregates}}<tr><td>{{.Name}} ({{.Unit}})</td><td class="n">{{f1 .Sim}}</td><td class="n">{{f1 .Emu}}</td><td class="n">{{f1 .Diff}}</td><td class="n">{{relpct .Rel}}</td></tr>
{{end}}</table>
<p>{{.Both}} jobs completed on both; mean |response difference| {{f1 .MeanAbsResponseS}} s. The jobs with the largest |response difference| (s):</p>
<table>
<tr><th>job</th><th>application</th><th>size</th><th>wait sim</th><th>wait {{.EmuBackend}}</th><th>execution sim</th><th>execution {{.EmuBackend}}</th><th>response sim</th><th>response {{.EmuBackend}}</th><th>response difference</th></tr>
{{range $.DivergenceTop}}<tr><td><code>{{.ID}}</code></td><td>{{.App}}</td><td class="n">{{.Size}}</td><td class="n">{{f1 .Sim.WaitS}}</td><td class="n">{{f1 .Emu.WaitS}}</td>
<td class="n">{{f1 .Sim.ExecS}}</td><td class="n">{{f1 .Emu.ExecS}}</td><td class="n">{{f1 .Sim.ResponseS}}</td><td class="n">{{f1 .Emu.ResponseS}}</td><td class="n">{{f1 .Diff.ResponseS}}</td></tr>
{{end}}</table>
{{end}}

{{range .Sweeps}}{{$sec := .}}
<h2 id="sweep-{{anchor .Label}}">AJRT against net utilisation: {{.Label}}</h2>
<p class="rule"><b>Saturation rule.</b> {{$.Rule}}</p>
<h3>Net-utilisation interval where saturation sets in</h3>
<table>
<tr><th>application \ policy</th>{{range .Policies}}<th>{{.}}</th>{{end}}</tr>
{{range $app := .Apps}}<tr><th>{{$app}}</th>{{range $pol := $sec.Policies}}{{$r := interval $sec.Rows $app $pol}}<td class="n" title="{{$r.Point.Why}}">{{if $r.App}}{{$r.Point.Interval}}{{else}}-{{end}}</td>{{end}}</tr>
{{end}}</table>
<p>Hover a cell for the criterion that fired; the same table is in <code>saturation.csv</code>.{{if .NotDone}} {{.NotDone}} cells of the sweep did not finish and are left out.{{end}}</p>
{{range .Figures}}<figure><img src="{{.PNG}}" alt="{{.Title}}"><figcaption>{{.Caption}} <a href="{{.SVG}}">SVG</a></figcaption></figure>
{{end}}
{{if .Cells}}<details><summary>{{len .Cells}} cells</summary>
<table>
<tr><th>cell</th>{{range .Axes}}<th>{{.}}</th>{{end}}<th>jobs done / submitted</th><th>not placed</th><th>AJRT (s)</th><th>net util. (%)</th><th>observed util. (%)</th><th>co-allocated (%)</th></tr>
{{range $c := .Cells}}<tr><td><code>{{$c.ID}}</code></td>{{range $sec.Axes}}<td>{{cellValue $c .}}</td>{{end}}
<td class="n">{{$c.Summary.Jobs.Completed}} / {{$c.Summary.Jobs.Submitted}}</td><td class="n">{{unplaced $c}}</td>
<td class="n">{{f1 $c.Summary.AJRTS}}</td><td class="n">{{f1 $c.Summary.NetUtilizationPct}}</td>
<td class="n">{{f1 $c.Summary.ObservedUtilizationPct}}</td><td class="n">{{f1 $c.Summary.CoallocatedPct}}</td></tr>
{{end}}</table></details>{{end}}
{{end}}

{{range .Migrations}}
<h2 id="migration-{{anchor .Label}}">Migration decisions: {{.Label}}</h2>
<p>{{.Runs}} runs{{if .Degraded}}, <span class="degraded">{{.Degraded}} of them degraded</span> (the host did not keep up; last column){{end}}.{{if .NotDone}} {{.NotDone}} cells did not finish and are left out.{{end}}
Each row pairs the run with the rescheduler's decision (its first answer to the job's contract monitor, with its gain) and the run
with the opposite forced; the decision is right when the job's execution with it is not above its execution with the opposite.
The predicted cost is the decision's, the measured one the move's (from every rank stopped to the last restarted rank's first phase)
in whichever run moved; the checksum compares the matrix of the run that moved with the one that did not. Scenario seconds.
The same tables are in <code>migration.csv</code> and <code>migration.md</code>.</p>
<table>
<tr><th>order</th><th>load at (s)</th><th>cost model</th><th>decision (gain)</th><th>execution with it</th><th>execution, opposite forced</th>
<th>right?</th><th>predicted cost</th><th>measured cost</th><th>checksum</th><th>degraded runs</th></tr>
{{range .Rows}}<tr><td class="n">{{.Order}}</td><td class="n">{{fs .LoadS 0}}</td><td>{{.CostModel}}</td>
<td title="{{.Cell}}">{{.DecisionText}}{{if .Mismatch}} *{{end}}</td><td class="n">{{fs .ExecS 0}}</td>
<td class="n" title="{{.OppositeCell}}">{{fs .OppositeS 0}}</td><td>{{.Right}}</td><td class="n">{{fs .PredictedCostS 1}}</td>
<td class="n">{{fs .MeasuredCostS 1}}</td><td>{{.Checksum}}</td><td{{if .Degraded}} class="degraded"{{end}}>{{or .Degraded "-"}}</td></tr>
{{end}}</table>
{{if .Mismatched}}<p>* the run with the opposite forced was answered otherwise (it asked at another time, or not at all).</p>{{end}}
<h3>Predicted against measured cost by order</h3>
<table>
<tr><th>order</th><th>checkpoint (MB)</th><th>predicted cost (predicted model)</th><th>measured cost, mean</th><th>min</th><th>max</th><th>moves</th><th>measured / predicted</th></tr>
{{range .Costs}}<tr><td class="n">{{.Order}}</td><td class="n">{{mb .Bytes}}</td><td class="n">{{fs .PredictedS 1}}</td>
<td class="n">{{fs .MeasuredS 1}}</td><td class="n">{{fs .MinS 1}}</td><td class="n">{{fs .MaxS 1}}</td><td class="n">{{.Moves}}</td><td class="n">{{ratio .}}</td></tr>
{{end}}</table>
{{range .Figures}}<figure><img src="{{.PNG}}" alt="{{.Title}}"><figcaption>{{.Caption}} <a href="{{.SVG}}">SVG</a></figcaption></figure>
{{end}}{{end}}

{{with .Exec}}
<h2 id="exec">Execution time against the number of clusters</h2>
<figure><img src="{{.PNG}}" alt="{{.Title}}"><figcaption>{{.Caption}} <a href="{{.SVG}}">SVG</a></figcaption></figure>
{{end}}

{{if .CDFs}}
<h2 id="cdf">Wait and response times</h2>
{{range .CDFs}}<figure><img src="{{.PNG}}" alt="{{.Title}}"><figcaption>{{.Caption}} <a href="{{.SVG}}">SVG</a></figcaption></figure>
{{end}}{{end}}

{{if .Malleable}}
<h2 id="malleable">Malleable runs</h2>
{{range .Malleable}}<figure><img src="{{.PNG}}" alt="{{.Title}}"><figcaption>{{.Caption}} <a href="{{.SVG}}">SVG</a></figcaption></figure>
{{end}}{{end}}

{{if .Faulted}}
<h2 id="faults">Faults</h2>
{{range .Faulted}}{{$f := .Summary.Faults}}
<h3><code>{{.Label}}</code> ({{.Summary.Scenario}}, {{.Summary.Backend}})</h3>
<p>Failed jobs by cause: {{if $f.FailedByCause}}{{range $c, $n := $f.FailedByCause}}{{$c}} {{$n}}; {{end}}{{else}}none{{end}}
resubmissions: {{$f.Resubmissions}} of {{$f.JobsResubmitted}} jobs.</p>
<table>
<tr><th>time (s)</th><th>kind</th><th>target</th><th>peer</th><th>latency x</th><th>bandwidth x</th><th>job hit</th><th>detected after (s)</th><th>error</th></tr>
{{range $f.Applied}}<tr><td class="n">{{f1 .TS}}</td><td>{{.Kind}}</td><td>{{.Target}}</td><td>{{.Peer}}</td>
<td class="n">{{if .LatencyFactor}}{{.LatencyFactor}}{{end}}</td><td class="n">{{if .BandwidthFactor}}{{.BandwidthFactor}}{{end}}</td>
<td>{{.Job}}</td><td class="n">{{detected .DetectedAfterS}}</td><td>{{.Error}}</td></tr>
{{end}}</table>
{{end}}{{end}}
</body>
</html>
`

// writePage renders the page.
func writePage(path string, pg *page) error {
	var b bytes.Buffer
	data := struct {
		*page
		CSS template.CSS
	}{pg, template.CSS(css)}
	if err := pageTmpl().Execute(&b, data); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
