package results

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// FaultRecord is one fault of the scenario's timeline as it was applied
// (an msg.EventFault event).
type FaultRecord struct {
	TS              float64 `json:"t_s"`
	Kind            string  `json:"kind"`
	Target          string  `json:"target"`
	Peer            string  `json:"peer,omitempty"`
	LatencyFactor   float64 `json:"latency_factor,omitempty"`
	BandwidthFactor float64 `json:"bandwidth_factor,omitempty"`
	// Job is the job a kill hit (the KOALA job the node held when its
	// cluster manager marked it down), if any.
	Job string `json:"job,omitempty"`
	// DetectedAfterS is how long after the fault the grid knew of it, in
	// scenario seconds: a kill when its cluster manager marked the node
	// down, a partition or a heal when the information service marked the
	// cluster unreachable or reachable again. Absent when it never did (or
	// for a degrade, which nothing detects but the probes).
	DetectedAfterS *float64 `json:"detected_after_s,omitempty"`
	// Error says why the fault could not be applied ("" when it was).
	Error string `json:"error,omitempty"`
}

// Faults is results.json's faults section: the faults applied, and what
// they cost.
type Faults struct {
	Applied []FaultRecord `json:"applied"`
	// FailedByCause counts the failed jobs by cause (all causes, not only
	// the faults').
	FailedByCause map[string]int `json:"failed_by_cause,omitempty"`
	// Resubmissions counts failed attempts submitted again, over
	// JobsResubmitted jobs.
	Resubmissions   int `json:"resubmissions"`
	JobsResubmitted int `json:"jobs_resubmitted"`
}

// faultRecord reads an EventFault.
func faultRecord(ev *msg.Event) FaultRecord {
	return FaultRecord{TS: ev.TS, Kind: ev.Fields["kind"], Target: ev.Fields["target"], Peer: ev.Fields["peer"],
		LatencyFactor: ev.Values["latency_factor"], BandwidthFactor: ev.Values["bandwidth_factor"],
		Job: ev.JobId, Error: ev.Fields["error"]}
}

// detection is the grid learning of a fault: a node marked down (kind
// kill), a cluster marked unreachable (partition) or reachable (heal).
type detection struct {
	kind, target, job string
	ts                float64
}

// Faults returns the faults the recorder saw, in order, each with when the
// grid detected it (the first detection of its kind and target at or after
// it) and, for a kill, the job it hit.
func (r *Recorder) Faults() []FaultRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]FaultRecord(nil), r.faults...)
	for i := range out {
		f := &out[i]
		for _, d := range r.detected {
			if d.kind == f.Kind && d.target == f.Target && d.ts >= f.TS-1e-6 {
				after := max(d.ts-f.TS, 0)
				f.DetectedAfterS = &after
				if f.Job == "" {
					f.Job = d.job
				}
				break
			}
		}
	}
	return out
}

// SummarizeFaults is the faults section of a run from its applied faults
// and its job records.
func SummarizeFaults(applied []FaultRecord, jobs []Job) *Faults {
	f := &Faults{Applied: append([]FaultRecord{}, applied...)}
	for _, j := range jobs {
		if j.Status == StatusFailed && j.Cause != "" {
			if f.FailedByCause == nil {
				f.FailedByCause = map[string]int{}
			}
			f.FailedByCause[j.Cause]++
		}
		if j.Resubmissions > 0 {
			f.Resubmissions += j.Resubmissions
			f.JobsResubmitted++
		}
	}
	return f
}

func printFaults(w io.Writer, f *Faults) {
	if f == nil {
		return
	}
	causes := make([]string, 0, len(f.FailedByCause))
	for c, n := range f.FailedByCause {
		causes = append(causes, fmt.Sprintf("%d %s", n, c))
	}
	sort.Strings(causes)
	failed := "no job failed"
	if len(causes) > 0 {
		failed = "failed: " + strings.Join(causes, ", ")
	}
	errs, detected, worst := 0, 0, 0.0
	for _, a := range f.Applied {
		if a.Error != "" {
			errs++
		}
		if a.DetectedAfterS != nil {
			detected++
			worst = max(worst, *a.DetectedAfterS)
		}
	}
	fmt.Fprintf(w, "faults\t%d applied (%d not: see results.json), %d detected (at most %.1f s after); %s; %d resubmissions of %d jobs\n",
		len(f.Applied)-errs, errs, detected, worst, failed, f.Resubmissions, f.JobsResubmitted)
}
