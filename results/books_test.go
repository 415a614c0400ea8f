package results

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// rec is a job record: submitted at 0 with the given status, or never
// submitted when status is "-".
func rec(id, status string) Job {
	if status == "-" {
		return Job{ID: id, Submit: -1, Placement: -1, Start: -1, End: -1, Status: StatusQueued}
	}
	j := Job{ID: id, Submit: 0, Placement: -1, Start: -1, End: -1, Status: status}
	if status == StatusCompleted || status == StatusFailed {
		j.Placement, j.Start, j.End = 1, 2, 3
	}
	return j
}

func recs(statuses ...string) []Job {
	out := make([]Job, len(statuses))
	for i, s := range statuses {
		out[i] = rec(string(rune('a'+i)), s)
	}
	return out
}

func TestBooks(t *testing.T) {
	const (
		c = StatusCompleted
		f = StatusFailed
		i = StatusInterrupted
		q = StatusQueued
		r = StatusRunning
	)
	cases := []struct {
		name     string
		jobs     []Job
		planned  int
		resub    int
		want     Books
		problems []string // substrings of the error; none when balanced
	}{
		{"all completed", recs(c, c, c), 3, 0,
			Books{Planned: 3, Submitted: 3, Completed: 3}, nil},
		{"completed and failed", recs(c, f, c, f), 4, 0,
			Books{Planned: 4, Submitted: 4, Completed: 2, Failed: 2}, nil},
		{"empty run", nil, 0, 0, Books{}, nil},
		{"never submitted counted apart", recs(c, f), 5, 0,
			Books{Planned: 5, NeverSubmitted: 3, Submitted: 2, Completed: 1, Failed: 1}, nil},
		{"a record without a submission is never submitted", recs(c, "-"), 2, 0,
			Books{Planned: 2, NeverSubmitted: 1, Submitted: 1, Completed: 1}, nil},
		{"interrupted run", recs(c, i, i, "-"), 4, 0,
			Books{Planned: 4, NeverSubmitted: 1, Submitted: 3, Completed: 1, Interrupted: 2}, nil},
		{"resubmissions", recs(c, f, c), 3, 2,
			Books{Planned: 3, Submitted: 5, Completed: 2, Failed: 1, Resubmitted: 2}, nil},
		{"resubmissions on the records", []Job{
			{ID: "a", Submit: 0, Start: 1, End: 2, Status: c, Resubmissions: 2},
			{ID: "b", Submit: 0, Start: 1, End: 2, Status: f, Resubmissions: 1}}, 2, 0,
			Books{Planned: 2, Submitted: 5, Completed: 1, Failed: 1, Resubmitted: 3}, nil},
		{"open jobs at the end", recs(c, q, r, f), 4, 0,
			Books{Planned: 4, Submitted: 4, Completed: 1, Failed: 1, Open: 2},
			[]string{"submitted 4 != completed 1 + failed 1 + resubmitted 0 + interrupted 0 (= 2)", "2 submitted jobs neither ended"}},
		{"unknown status", recs(c, "lost"), 2, 0,
			Books{Planned: 2, Submitted: 2, Completed: 1, Unknown: 1},
			[]string{"submitted 2 != completed 1", "1 submitted jobs have a status the books do not know"}},
		{"more submitted than planned", recs(c, c, c), 2, 0,
			Books{Planned: 2, NeverSubmitted: -1, Submitted: 3, Completed: 3},
			[]string{"planned 2 < submitted jobs 3: 1 submitted jobs are not in the plan"}},
		{"recorded twice", append(recs(c, f), rec("a", c)), 2, 0,
			Books{Planned: 2, Submitted: 2, Completed: 1, Failed: 1, Duplicates: 1},
			[]string{"1 jobs recorded twice"}},
		{"ended without a submission", append(recs(c), Job{ID: "x", Submit: -1, Start: 5, End: 9, Status: c}), 2, 0,
			Books{Planned: 2, NeverSubmitted: 1, Submitted: 1, Completed: 1, Unsubmitted: 1},
			[]string{"1 jobs were placed, ran or ended without a recorded submission"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBooks(tc.jobs, tc.planned)
			b.AddResubmissions(tc.resub)
			if *b != tc.want {
				t.Fatalf("books %+v\nwant  %+v", *b, tc.want)
			}
			err := b.Err()
			if len(tc.problems) == 0 {
				if err != nil || !b.Balanced() {
					t.Fatalf("want balanced, got %v", err)
				}
				return
			}
			if err == nil || b.Balanced() {
				t.Fatal("want unbalanced books")
			}
			if !errors.Is(err, ErrUnbalanced) {
				t.Fatalf("error %v does not wrap ErrUnbalanced", err)
			}
			for _, p := range tc.problems {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not say %q", err, p)
				}
			}
		})
	}
}

// TestBooksSubmittedTermOff checks the first equation on its own: books
// whose submitted term disagrees with the ended terms, with nothing to
// explain it, do not balance.
func TestBooksSubmittedTermOff(t *testing.T) {
	b := &Books{Planned: 10, Submitted: 10, Completed: 7, Failed: 2}
	err := b.Err()
	if err == nil || !strings.Contains(err.Error(), "submitted 10 != completed 7 + failed 2 + resubmitted 0 + interrupted 0 (= 9)") {
		t.Fatalf("got %v", err)
	}
	b.Interrupted = 1
	if err := b.Err(); err != nil {
		t.Fatalf("with the interrupted job: %v", err)
	}
}

func TestBooksInSummaryJSON(t *testing.T) {
	s := Summary{Books: NewBooks(recs(StatusCompleted, StatusQueued), 3)}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Books map[string]any `json:"books"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	b := out.Books
	if b["planned"] != 3.0 || b["submitted"] != 2.0 || b["completed"] != 1.0 || b["never_submitted"] != 1.0 || b["open"] != 1.0 {
		t.Fatalf("books in JSON: %v", b)
	}
	if b["balanced"] != false || !strings.Contains(b["problem"].(string), "still queued or running") {
		t.Fatalf("balance in JSON: %v", b)
	}
	// Read back, the terms come out as written.
	var back struct {
		Books *Books `json:"books"`
	}
	if err := json.Unmarshal(data, &back); err != nil || back.Books == nil || *back.Books != *s.Books {
		t.Fatalf("read back %+v, %v", back.Books, err)
	}
	if data, _ := json.Marshal(Summary{}); strings.Contains(string(data), "books") {
		t.Fatalf("a summary without books writes them: %s", data)
	}
}

// An interrupted run's records, as the launcher closes them: jobs that had
// started are interrupted, jobs never submitted are marked so and carry no
// times; the books balance.
func TestBooksOfAnInterruptedRun(t *testing.T) {
	jobs := []Job{
		{ID: "a", Submit: 0, Placement: 1, Start: 2, End: 9, Status: StatusCompleted},
		{ID: "b", Submit: 3, Placement: 4, Start: 5, End: -1, Status: StatusInterrupted, Reason: "interrupted"},
		{ID: "c", Submit: -1, Placement: -1, Start: -1, End: -1, Status: StatusInterrupted, Reason: "interrupted (never submitted)"},
	}
	b := NewBooks(jobs, 3)
	if err := b.Err(); err != nil || b.Interrupted != 1 || b.NeverSubmitted != 1 || b.Completed != 1 {
		t.Fatalf("books %+v: %v", b, err)
	}
}
