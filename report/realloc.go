package report

import (
	"fmt"
	"path/filepath"
	"time"

	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
)

// Reallocation is the comparison of a batch grid run with its reference,
// the same run without reallocation (SPEC §5): the four metrics over the
// middleware's jobs (request "grid"; local users' jobs are left out).
type Reallocation struct {
	Run       string `json:"run"`
	Reference string `json:"reference"`
	// ToleranceS is the least change of completion counted as an impact.
	ToleranceS float64 `json:"tolerance_s"`
	// The metrics (see realloc.Metrics): shares are fractions.
	Jobs                int     `json:"jobs"`
	Impacted            int     `json:"impacted"`
	ImpactedShare       float64 `json:"impacted_share"`
	Reallocations       int     `json:"reallocations"`
	ReallocationsPerJob float64 `json:"reallocations_per_job"`
	Earlier             int     `json:"earlier"`
	EarlierShare        float64 `json:"earlier_share"`
	RelativeResponse    float64 `json:"relative_response"`
}

// CompareRealloc reads two run directories of a batch grid (jobs.csv and
// results.json's extra.batch) and computes the metrics of run against
// reference: impacted share, reallocations per job, share of impacted jobs
// finishing earlier, relative response time of the impacted jobs. A job's
// completion is its end_s (a job killed at its walltime completes then).
// It fails, naming the job, when the two runs did not replay the same jobs.
func CompareRealloc(run, reference string, tolerance time.Duration) (*Reallocation, error) {
	runRecs, moves, err := reallocRecords(run)
	if err != nil {
		return nil, err
	}
	refRecs, _, err := reallocRecords(reference)
	if err != nil {
		return nil, err
	}
	m, err := rp.Compare(refRecs, runRecs, moves, tolerance)
	if err != nil {
		return nil, fmt.Errorf("compare %s with %s: %w", run, reference, err)
	}
	return &Reallocation{Run: run, Reference: reference, ToleranceS: tolerance.Seconds(), Jobs: m.Jobs,
		Impacted: m.Impacted, ImpactedShare: m.ImpactedShare, Reallocations: m.Reallocations,
		ReallocationsPerJob: m.ReallocationsPerJob, Earlier: m.Earlier, EarlierShare: m.EarlierShare,
		RelativeResponse: m.RelativeResponse}, nil
}

// reallocRecords reads the middleware's jobs of a run and its count of
// reallocations.
func reallocRecords(dir string) ([]rp.Record, int, error) {
	s, err := readSummary(dir)
	if err != nil {
		return nil, 0, err
	}
	b, ok := s.Extra["batch"].(map[string]any)
	if !ok {
		return nil, 0, fmt.Errorf("report: %s is not a batch grid run (no extra.batch in %s)", dir, ResultsJSON)
	}
	moves, _ := b["reallocations"].(float64)
	path := filepath.Join(dir, JobsCSV)
	rows, col, err := csvTable(path, "id", "request", "submit_s", "end_s", "status")
	if err != nil {
		return nil, 0, err
	}
	var out []rp.Record
	for i, r := range rows {
		if r[col["request"]] != "grid" {
			continue
		}
		sub, err := field(path, i+2, "submit_s", r[col["submit_s"]])
		if err != nil {
			return nil, 0, err
		}
		end, err := field(path, i+2, "end_s", r[col["end_s"]])
		if err != nil {
			return nil, 0, err
		}
		if end < 0 {
			return nil, 0, fmt.Errorf("report: %s line %d: job %s never ended (status %s)", path, i+2, r[col["id"]], r[col["status"]])
		}
		out = append(out, rp.Record{ID: r[col["id"]], Submit: seconds(sub), Completion: seconds(end)})
	}
	return out, int(moves), nil
}

func seconds(s float64) time.Duration { return time.Duration(s*1e3+0.5) * time.Millisecond }
