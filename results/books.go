package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Job statuses the books know. A job is queued or running while the run
// goes on; at the end it is completed, failed or (a run cut short)
// interrupted.
const (
	StatusQueued      = "queued"
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Books are the job accounts of a run. Two equations must hold:
//
//	planned   = submitted jobs + never submitted
//	submitted = completed + failed + resubmitted + interrupted
//
// Submitted counts submissions: one per job record with a submission time,
// plus Resubmitted, the failed attempts that a resubmission policy submitted
// again (each such attempt ends as "resubmitted" and its retry is a new
// submission; NewBooks adds every record's Resubmissions, see
// AddResubmissions). The jobs
// of the plan that were never submitted are counted apart: they do not
// unbalance the books (a run cut short leaves some), but a negative count
// (more submitted jobs than planned) does.
//
// The terms that explain a difference are counted too, and each must be 0
// for the books to balance: Open (queued or running when the books were
// closed), Unknown (a status the books do not know), Duplicates (a job
// recorded twice) and Unsubmitted (a job that was placed, ran or ended
// without a recorded submission).
type Books struct {
	Planned        int `json:"planned"`
	NeverSubmitted int `json:"never_submitted"`
	Submitted      int `json:"submitted"`
	Completed      int `json:"completed"`
	Failed         int `json:"failed"`
	Resubmitted    int `json:"resubmitted"`
	Interrupted    int `json:"interrupted"`
	Open           int `json:"open,omitempty"`
	Unknown        int `json:"unknown,omitempty"`
	Duplicates     int `json:"duplicates,omitempty"`
	Unsubmitted    int `json:"unsubmitted,omitempty"`
}

// NewBooks closes the books of a run from its job records and the number of
// jobs in its plan.
func NewBooks(jobs []Job, planned int) *Books {
	b := &Books{Planned: planned}
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if seen[j.ID] {
			b.Duplicates++
			continue
		}
		seen[j.ID] = true
		if j.Submit < 0 {
			// Never submitted: still queued, or marked failed or
			// interrupted when the run ended first; it has no times.
			neverRan := j.Status == StatusQueued || j.Status == StatusFailed || j.Status == StatusInterrupted
			if !neverRan || j.Placement >= 0 || j.Start >= 0 || j.End >= 0 {
				b.Unsubmitted++
			}
			continue
		}
		b.Submitted++
		b.AddResubmissions(j.Resubmissions)
		switch j.Status {
		case StatusCompleted:
			b.Completed++
		case StatusFailed:
			b.Failed++
		case StatusInterrupted:
			b.Interrupted++
		case StatusQueued, StatusRunning:
			b.Open++
		default:
			b.Unknown++
		}
	}
	b.NeverSubmitted = planned - (b.Submitted - b.Resubmitted)
	return b
}

// AddResubmissions counts n failed attempts that were submitted again: n
// more submissions, each ended as resubmitted.
func (b *Books) AddResubmissions(n int) {
	b.Submitted += n
	b.Resubmitted += n
}

// Ended is the submissions that ended: completed + failed + resubmitted +
// interrupted.
func (b *Books) Ended() int { return b.Completed + b.Failed + b.Resubmitted + b.Interrupted }

// Balanced reports whether both equations hold and every explaining term
// is 0.
func (b *Books) Balanced() bool { return b.Err() == nil }

// Err returns nil when the books balance, and otherwise an error that says
// which terms disagree and by how much.
func (b *Books) Err() error {
	var problems []string
	if ended := b.Ended(); b.Submitted != ended {
		problems = append(problems, fmt.Sprintf("submitted %d != completed %d + failed %d + resubmitted %d + interrupted %d (= %d)",
			b.Submitted, b.Completed, b.Failed, b.Resubmitted, b.Interrupted, ended))
	}
	if b.Open > 0 {
		problems = append(problems, fmt.Sprintf("%d submitted jobs neither ended nor were interrupted (still queued or running)", b.Open))
	}
	if b.Unknown > 0 {
		problems = append(problems, fmt.Sprintf("%d submitted jobs have a status the books do not know", b.Unknown))
	}
	if b.NeverSubmitted < 0 {
		problems = append(problems, fmt.Sprintf("planned %d < submitted jobs %d: %d submitted jobs are not in the plan",
			b.Planned, b.Submitted-b.Resubmitted, -b.NeverSubmitted))
	}
	if b.Duplicates > 0 {
		problems = append(problems, fmt.Sprintf("%d jobs recorded twice", b.Duplicates))
	}
	if b.Unsubmitted > 0 {
		problems = append(problems, fmt.Sprintf("%d jobs were placed, ran or ended without a recorded submission", b.Unsubmitted))
	}
	if b.Resubmitted < 0 || b.Planned < 0 {
		problems = append(problems, fmt.Sprintf("negative count: planned %d, resubmitted %d", b.Planned, b.Resubmitted))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnbalanced, strings.Join(problems, "; "))
}

// ErrUnbalanced is wrapped by every error of Books.Err.
var ErrUnbalanced = errors.New("the books do not balance")

// MarshalJSON writes the terms plus "balanced" and, when the books do not
// balance, "problem" (the text of Err).
func (b *Books) MarshalJSON() ([]byte, error) {
	type terms Books
	out := struct {
		*terms
		Balanced bool   `json:"balanced"`
		Problem  string `json:"problem,omitempty"`
	}{terms: (*terms)(b), Balanced: true}
	if err := b.Err(); err != nil {
		out.Balanced, out.Problem = false, err.Error()
	}
	return json.Marshal(out)
}
