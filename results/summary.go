package results

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/koala-emu/koala-emu/fidelity"
)

// Meta describes the run a summary belongs to.
type Meta struct {
	Scenario  string  `json:"scenario"`
	Backend   string  `json:"backend"`
	Policy    string  `json:"policy"`
	Shaper    string  `json:"shaper"`
	Seed      int64   `json:"seed"`
	TimeScale float64 `json:"time_scale"`
	Dilation  float64 `json:"dilation"`
	WallS     float64 `json:"wall_s"`
	// TotalNodes is the number of nodes of the included clusters.
	TotalNodes int `json:"total_nodes"`
	// Duration is the workload duration in scenario seconds.
	DurationS float64 `json:"workload_duration_s"`
	// TargetNetUtilizationPct is the net utilisation the arrivals aimed at.
	TargetNetUtilizationPct float64 `json:"target_net_utilization_pct"`
}

// Counts of jobs by outcome.
type Counts struct {
	Submitted int `json:"submitted"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Stat is a count and a mean.
type Stat struct {
	N     int     `json:"n"`
	MeanS float64 `json:"mean_s"`
}

// Summary is results.json.
type Summary struct {
	Meta
	Jobs                   Counts          `json:"jobs"`
	FailReasons            map[string]int  `json:"fail_reasons,omitempty"`
	ScenarioS              float64         `json:"scenario_s"` // last job end
	AJRTS                  float64         `json:"ajrt_s"`
	AvgWaitS               float64         `json:"avg_wait_s"`
	AvgQueueS              float64         `json:"avg_queue_s"`
	AvgStartupS            float64         `json:"avg_startup_s"`
	AvgExecS               float64         `json:"avg_exec_s"`
	CoallocatedPct         float64         `json:"coallocated_pct"`
	NetUtilizationPct      float64         `json:"net_utilization_pct"`
	ObservedUtilizationPct float64         `json:"observed_utilization_pct"`
	ExecByApp              map[string]Stat `json:"exec_by_app"`
	ExecByClusters         map[string]Stat `json:"exec_by_clusters"`
	Malleability           *Malleability   `json:"malleability,omitempty"`
	// Faults are the faults the scenario applied and what they cost; nil
	// for a scenario without faults.
	Faults *Faults `json:"faults,omitempty"`
	// Migrations are the jobs moved by the rescheduler; nil for a scenario
	// without policy.migration.
	Migrations *Migrations `json:"migrations,omitempty"`
	// Books are the run's job accounts (see Books); nil until the run closes them.
	Books *Books `json:"books,omitempty"`
	// Fidelity says whether the host kept up (see package fidelity).
	Fidelity *fidelity.Report `json:"fidelity,omitempty"`
	Extra    map[string]any   `json:"extra,omitempty"`
}

// Summarize computes the summary of a run from its job records. Averages are
// over completed jobs. Utilisation divides node-seconds by the nodes of the
// included clusters times the run's span (the later of the workload duration
// and the last job end): net uses each job's single-cluster execution time,
// observed its measured execution time.
func Summarize(meta Meta, jobs []Job) Summary {
	s := Summary{Meta: meta, ExecByApp: map[string]Stat{}, ExecByClusters: map[string]Stat{}}
	var sumResp, sumWait, sumQueue, sumStart, sumExec, netNS, obsNS float64
	coalloc := 0
	for i := range jobs {
		j := &jobs[i]
		if j.Submit < 0 {
			continue
		}
		s.Jobs.Submitted++
		if j.End > s.ScenarioS {
			s.ScenarioS = j.End
		}
		if j.Status != "completed" {
			s.Jobs.Failed++
			if s.FailReasons == nil {
				s.FailReasons = map[string]int{}
			}
			s.FailReasons[j.Reason]++
			continue
		}
		s.Jobs.Completed++
		sumResp += j.Response()
		sumWait += j.Wait()
		sumQueue += j.Queue()
		sumStart += j.Startup()
		sumExec += j.Exec()
		if j.Clusters > 1 {
			coalloc++
		}
		netNS += float64(j.Size) * j.Nominal
		obsNS += float64(j.Size) * j.Exec()
		addStat(s.ExecByApp, j.App, j.Exec())
		addStat(s.ExecByClusters, strconv.Itoa(j.Clusters), j.Exec())
	}
	if n := float64(s.Jobs.Completed); n > 0 {
		s.AJRTS, s.AvgWaitS, s.AvgQueueS = sumResp/n, sumWait/n, sumQueue/n
		s.AvgStartupS, s.AvgExecS = sumStart/n, sumExec/n
		s.CoallocatedPct = 100 * float64(coalloc) / n
	}
	spanS := s.ScenarioS
	if meta.DurationS > spanS {
		spanS = meta.DurationS
	}
	if meta.TotalNodes > 0 && spanS > 0 {
		s.NetUtilizationPct = 100 * netNS / (float64(meta.TotalNodes) * spanS)
		s.ObservedUtilizationPct = 100 * obsNS / (float64(meta.TotalNodes) * spanS)
	}
	for k, v := range s.ExecByApp {
		v.MeanS /= float64(v.N)
		s.ExecByApp[k] = v
	}
	for k, v := range s.ExecByClusters {
		v.MeanS /= float64(v.N)
		s.ExecByClusters[k] = v
	}
	return s
}

func addStat(m map[string]Stat, k string, v float64) {
	st := m[k]
	st.N++
	st.MeanS += v // divided at the end
	m[k] = st
}

// WriteJSON writes the summary as results.json in dir.
func (s Summary) WriteJSON(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	return nil
}

// WriteJobsCSV writes jobs.csv in dir, one row per job.
func WriteJobsCSV(dir string, jobs []Job) error {
	l := csvLines{b: make([]byte, 0, 512+256*len(jobs))}
	l.strs("id", "application", "size", "request", "components", "clusters", "submit_s", "placement_s",
		"start_s", "end_s", "wait_s", "queue_s", "startup_s", "exec_s", "response_s", "tries", "status", "reason",
		"malleable", "avg_procs", "max_procs", "grows", "shrinks", "resize_s",
		"fidelity", "compute_late_p99", "link_late_p99", "backlog_late_p99", "compute_stretch", "cause", "resubmissions")
	l.end()
	for i := range jobs {
		j := &jobs[i]
		l.strs(j.ID, j.App)
		l.int(j.Size)
		l.strs(j.Request, j.Components)
		l.int(j.Clusters)
		for _, v := range [...]float64{j.Submit, j.Placement, j.Start, j.End, j.Wait(), j.Queue(), j.Startup(), j.Exec(), j.Response()} {
			l.fixed(v, 3)
		}
		l.int(j.Tries)
		l.strs(j.Status, j.Reason, strconv.FormatBool(j.Malleable))
		l.fixed(j.AvgProcs, 3)
		l.fixed(j.MaxProcs, 3)
		l.int(j.Grows)
		l.int(j.Shrinks)
		l.fixed(j.ResizeS, 3)
		appendFidelityColumns(&l, j.Figures)
		l.str(j.Cause)
		l.int(j.Resubmissions)
		l.end()
	}
	if err := os.WriteFile(filepath.Join(dir, "jobs.csv"), l.b, 0o666); err != nil {
		return fmt.Errorf("jobs.csv: %w", err)
	}
	return nil
}

// Print writes the summary table.
func (s Summary) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s (backend %s, policy %s, shaper %s, seed %d, time scale %g, dilation %g)\n",
		s.Scenario, s.Backend, s.Policy, s.Shaper, s.Seed, s.TimeScale, s.Dilation)
	fmt.Fprintf(tw, "wall time\t%.1f s for %.0f scenario s\n", s.WallS, s.ScenarioS)
	fmt.Fprintf(tw, "jobs\t%d submitted, %d completed, %d failed\n", s.Jobs.Submitted, s.Jobs.Completed, s.Jobs.Failed)
	reasons := make([]string, 0, len(s.FailReasons))
	for r := range s.FailReasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(tw, "  failed\t%d x %s\n", s.FailReasons[r], r)
	}
	fmt.Fprintf(tw, "AJRT\t%.1f s\n", s.AJRTS)
	fmt.Fprintf(tw, "wait (queue + startup)\t%.1f s (%.1f + %.1f)\n", s.AvgWaitS, s.AvgQueueS, s.AvgStartupS)
	fmt.Fprintf(tw, "execution\t%.1f s\n", s.AvgExecS)
	fmt.Fprintf(tw, "co-allocated\t%.1f %%\n", s.CoallocatedPct)
	fmt.Fprintf(tw, "utilisation\tnet %.1f %% (target %.1f %%), observed %.1f %%\n", s.NetUtilizationPct, s.TargetNetUtilizationPct, s.ObservedUtilizationPct)
	for _, k := range sortedKeys(s.ExecByApp) {
		fmt.Fprintf(tw, "exec %s\t%.1f s (n=%d)\n", k, s.ExecByApp[k].MeanS, s.ExecByApp[k].N)
	}
	for _, k := range sortedKeys(s.ExecByClusters) {
		fmt.Fprintf(tw, "exec on %s cluster(s)\t%.1f s (n=%d)\n", k, s.ExecByClusters[k].MeanS, s.ExecByClusters[k].N)
	}
	if m := s.Malleability; m != nil {
		fmt.Fprintf(tw, "malleable jobs\t%d; processors per job: mean avg %.1f, mean max %.1f\n", m.Jobs, m.MeanAvgProcs, m.MeanMaxProcs)
		fmt.Fprintf(tw, "grows / shrinks\t%d / %d (%d mandatory), resizing %.1f s in all; %.1f s of computation credited for late resizes\n",
			m.Grows, m.Shrinks, m.MandatoryShrinks, m.ResizeTimeS, m.LateCreditS)
		fmt.Fprintf(tw, "utilisation (KOALA / with local)\t%.1f %% / %.1f %%\n", m.MeanUtilizationPct, m.MeanTotalUtilizationPct)
		verdict := "hold"
		if !m.InvariantsHold {
			verdict = fmt.Sprintf("VIOLATED %v", m.Violations)
		}
		fmt.Fprintf(tw, "invariants\t%s (%d checks)\n", verdict, sumInts(m.Checks))
	}
	if b := s.Books; b != nil {
		state := "balanced"
		if err := b.Err(); err != nil {
			state = "UNBALANCED: " + err.Error()
		}
		fmt.Fprintf(tw, "books\t%d planned = %d submitted + %d never submitted; %d submissions = %d completed + %d failed + %d resubmitted + %d interrupted; %s\n",
			b.Planned, b.Submitted-b.Resubmitted, b.NeverSubmitted, b.Submitted, b.Completed, b.Failed, b.Resubmitted, b.Interrupted, state)
	}
	printFaults(tw, s.Faults)
	printFidelity(tw, s.Fidelity)
	tw.Flush()
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sortedKeys(m map[string]Stat) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
