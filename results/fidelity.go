package results

import (
	"fmt"
	"io"
	"strings"

	"github.com/koala-emu/koala-emu/fidelity"
)

// FidelityReport judges a run from its jobs' fidelity figures and what the
// launcher saw of the host (nil when it saw nothing), and records the
// dilation choice (nil when none was made).
func FidelityReport(jobs []Job, host *fidelity.Host, choice *fidelity.Choice) *fidelity.Report {
	byJob := map[string]*fidelity.Stats{}
	for i := range jobs {
		if jobs[i].Fidelity != nil {
			byJob[jobs[i].ID] = jobs[i].Fidelity
		}
	}
	r := fidelity.NewReport(byJob, host, fidelity.DefaultThresholds())
	r.Dilation = choice
	return &r
}

// Faithful reports whether the summary's run was judged faithful.
func (s Summary) Faithful() bool {
	return s.Fidelity != nil && s.Fidelity.Verdict == fidelity.Faithful
}

// appendFidelityColumns appends a job's fidelity columns of jobs.csv to
// l: the verdict, the p99 lateness of computation, idle links and
// backlogged links, and the computation's stretch (empty figures when
// nothing was measured).
func appendFidelityColumns(l *csvLines, f *fidelity.Figures) {
	if f == nil {
		l.strs(fidelity.Unmeasured, "", "", "", "")
		return
	}
	l.str(f.Verdict)
	for _, v := range [...]float64{f.Compute.P99, f.Link.P99, f.Backlog.P99, f.Stretch} {
		l.fixed(v, 4)
	}
}

// printFidelity ends the summary table with the run's verdict and the
// figures behind it.
func printFidelity(w io.Writer, r *fidelity.Report) {
	if r == nil {
		fmt.Fprintf(w, "fidelity\tnot measured\n")
		return
	}
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	fmt.Fprintf(w, "compute (late p50/p99)\t%s / %s of the asked wait over %d calls; stretch %.3f; %.1f s paid back\n",
		pct(r.Run.Compute.P50), pct(r.Run.Compute.P99), r.Run.ComputeCalls, r.Run.Stretch, r.Run.CompensatedS)
	fmt.Fprintf(w, "links (late p50/p99)\t%s / %s of the target delay over %d frames; backlogged %s / %s over %d; early p99 %s\n",
		pct(r.Run.Link.P50), pct(r.Run.Link.P99), r.Run.Link.N, pct(r.Run.Backlog.P50), pct(r.Run.Backlog.P99), r.Run.Backlog.N, pct(r.Run.Early.P99))
	if len(r.WorstLinks) > 0 {
		l := r.WorstLinks[0]
		fmt.Fprintf(w, "worst link\t%s: p99 %s late (backlogged %s, early %s), worst %.3f ms\n", l.Pair, pct(l.Late.P99), pct(l.Backlog.P99), pct(l.Early.P99), l.WorstMs)
	}
	if h := r.Host; h != nil {
		fmt.Fprintf(w, "host\tCPU mean %.0f%%, max %.0f%%, saturated %.0f%% of %d s; Go scheduler latency p99 %.2f ms; GC %.1f%% of the process's CPU, %d cycles, pause p99 %.2f ms\n",
			h.CPUMeanPct, h.CPUMaxPct, h.SaturatedPct, h.Samples, h.SchedP99Ms, h.GCCPUPct, h.GCCycles, h.GCPauseP99Ms)
	}
	if d := r.Dilation; d != nil {
		how := "given"
		if d.Auto {
			how = "auto: " + d.Reason
		}
		fmt.Fprintf(w, "dilation\t%g (%s)\n", d.Dilation, how)
		if d.Coarse != "" {
			fmt.Fprintf(w, "time scale\t%s\n", d.Coarse)
		}
	}
	line := strings.ToUpper(r.Verdict)
	if len(r.Reasons) > 0 {
		line += ": " + strings.Join(r.Reasons, "; ")
	}
	fmt.Fprintf(w, "fidelity\t%s (%d jobs measured, %d degraded)\n", line, r.Jobs, r.Degraded)
}
