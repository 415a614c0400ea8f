package results

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// UtilSample is one cluster's occupation at one moment (the malleability
// manager's cluster_util events, once per poll period).
type UtilSample struct {
	T         float64 `json:"t_s"`
	Cluster   string  `json:"cluster"`
	Capacity  float64 `json:"capacity"`
	Idle      float64 `json:"idle"`
	Local     float64 `json:"local"`
	Koala     float64 `json:"koala"`
	Malleable float64 `json:"malleable"`
	Rigid     float64 `json:"rigid"`
}

// ResizeOp is one grow or shrink of a malleable job.
type ResizeOp struct {
	T         float64 `json:"t_s"`
	Job       string  `json:"job"`
	Op        string  `json:"op"` // grow | shrink
	Cluster   string  `json:"cluster"`
	Initiator string  `json:"initiator"`
	Mandatory bool    `json:"mandatory"`
	From      int     `json:"from"`
	To        int     `json:"to"`
	ResizeS   float64 `json:"resize_s"`
	OpS       float64 `json:"op_s"`
}

// Malleability is the malleability section of results.json.
type Malleability struct {
	Jobs          int     `json:"malleable_jobs"`
	MeanAvgProcs  float64 `json:"mean_avg_procs"`
	MeanMaxProcs  float64 `json:"mean_max_procs"`
	MeanExecS     float64 `json:"mean_exec_s"`
	MeanResponseS float64 `json:"mean_response_s"`
	// MeanUtilizationPct is KOALA's share of the processors (malleable and
	// rigid jobs) averaged over the manager's samples.
	MeanUtilizationPct float64 `json:"mean_utilization_pct"`
	// MeanTotalUtilizationPct adds the local users' load.
	MeanTotalUtilizationPct float64 `json:"mean_total_utilization_pct"`
	Grows                   int     `json:"grows"`
	Shrinks                 int     `json:"shrinks"`
	MandatoryShrinks        int     `json:"mandatory_shrinks"`
	ResizeTimeS             float64 `json:"resize_time_s"`
	// LateCreditS is the scenario time taken off the jobs' computation
	// (added, when negative) because a time scale made their resizes wait
	// longer for a safe point (apps.lateCredit), summed over the resizes.
	LateCreditS    float64        `json:"late_resize_credit_s"`
	Checks         map[string]int `json:"invariant_checks"`
	Violations     map[string]int `json:"invariant_violations"`
	Details        []string       `json:"invariant_details,omitempty"`
	InvariantsHold bool           `json:"invariants_hold"`
}

// SummarizeMalleability computes the malleability section: means over the
// completed jobs (all of them, rigid ones at their fixed size), operation
// counts from the resize log, utilisation from the samples, and the
// invariant counters the run kept.
func SummarizeMalleability(jobs []Job, util []UtilSample, ops []ResizeOp, checks, violations map[string]int, details []string) *Malleability {
	m := &Malleability{Checks: checks, Violations: violations, Details: details, InvariantsHold: true}
	for _, v := range violations {
		if v > 0 {
			m.InvariantsHold = false
		}
	}
	n := 0
	for _, j := range jobs {
		if j.Malleable {
			m.Jobs++
		}
		if j.Status != "completed" {
			continue
		}
		n++
		avg, mx := j.AvgProcs, j.MaxProcs
		if !j.Malleable || mx == 0 {
			avg, mx = float64(j.Size), float64(j.Size)
		}
		m.MeanAvgProcs += avg
		m.MeanMaxProcs += mx
		m.MeanExecS += j.Exec()
		m.MeanResponseS += j.Response()
	}
	if n > 0 {
		m.MeanAvgProcs /= float64(n)
		m.MeanMaxProcs /= float64(n)
		m.MeanExecS /= float64(n)
		m.MeanResponseS /= float64(n)
	}
	for _, op := range ops {
		switch op.Op {
		case msg.EventGrow:
			m.Grows++
		case msg.EventShrink:
			m.Shrinks++
			if op.Mandatory {
				m.MandatoryShrinks++
			}
		}
		m.ResizeTimeS += op.ResizeS
	}
	// Utilisation: per sampling instant, processors held over capacity.
	type acc struct{ cap, koala, local float64 }
	byT := map[float64]*acc{}
	for _, u := range util {
		a := byT[u.T]
		if a == nil {
			a = &acc{}
			byT[u.T] = a
		}
		a.cap += u.Capacity
		a.koala += u.Koala
		a.local += u.Local
	}
	k := 0
	for _, a := range byT {
		if a.cap > 0 {
			m.MeanUtilizationPct += 100 * a.koala / a.cap
			m.MeanTotalUtilizationPct += 100 * (a.koala + a.local) / a.cap
			k++
		}
	}
	if k > 0 {
		m.MeanUtilizationPct /= float64(k)
		m.MeanTotalUtilizationPct /= float64(k)
	}
	return m
}

// WriteSeries writes utilization.csv and resizes.csv in dir: the time
// series of platform utilisation and of grow/shrink operations.
func WriteSeries(dir string, util []UtilSample, ops []ResizeOp) error {
	ff := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	rows := [][]string{{"t_s", "cluster", "capacity", "idle", "local", "koala", "malleable", "rigid"}}
	for _, u := range util {
		rows = append(rows, []string{ff(u.T), u.Cluster, ff(u.Capacity), ff(u.Idle), ff(u.Local), ff(u.Koala), ff(u.Malleable), ff(u.Rigid)})
	}
	if err := writeCSV(filepath.Join(dir, "utilization.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"t_s", "job", "op", "cluster", "initiator", "mandatory", "from", "to", "resize_s", "op_s"}}
	for _, o := range ops {
		rows = append(rows, []string{ff(o.T), o.Job, o.Op, o.Cluster, o.Initiator, strconv.FormatBool(o.Mandatory),
			strconv.Itoa(o.From), strconv.Itoa(o.To), ff(o.ResizeS), ff(o.OpS)})
	}
	return writeCSV(filepath.Join(dir, "resizes.csv"), rows)
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}
