package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/internal/csvtest"
)

func ev(t float64, kind, job string, fields map[string]string, values map[string]float64) *msg.Event {
	return &msg.Event{TS: t, Kind: kind, JobId: job, Fields: fields, Values: values}
}

// A recorder folds the life of two jobs (one co-allocated, one failed) and
// the summary derives every metric from them.
func TestRecorderAndSummary(t *testing.T) {
	var events bytes.Buffer
	nominal := func(app string, size int) float64 { return 100 }
	r := NewRecorder(&events, 2, nominal)
	r.Record(ev(0, "submit", "j1", map[string]string{"app": "wave", "request": "flexible"}, map[string]float64{"size": 16}))
	r.Record(ev(5, "submit", "j2", map[string]string{"app": "wave", "request": "flexible"}, map[string]float64{"size": 8}))
	r.Record(ev(30, "placed", "j1", map[string]string{"components": "a:8+b:8"}, map[string]float64{"clusters": 2, "tries": 2}))
	r.Record(ev(40, "start", "j1", nil, nil))
	select {
	case <-r.Done():
		t.Fatal("done before any job ended")
	default:
	}
	if p := r.Progress(); p.Running != 1 || p.Queued != 1 || p.Submitted != 2 {
		t.Fatalf("progress %+v", p)
	}
	r.Record(ev(190, "end", "j1", map[string]string{"status": "completed"}, nil))
	r.Record(ev(200, "end", "j2", map[string]string{"status": "failed", "reason": "no fit"}, nil))
	r.Record(ev(201, "end", "j2", map[string]string{"status": "completed"}, nil)) // a second end is ignored
	select {
	case <-r.Done():
	default:
		t.Fatal("not done after both jobs ended")
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(events.String(), "\n"); n != 7 {
		t.Fatalf("events.jsonl has %d lines, want 7", n)
	}
	jobs := r.Jobs()
	if len(jobs) != 2 || jobs[0].ID != "j1" {
		t.Fatalf("jobs %+v", jobs)
	}
	j := jobs[0]
	if j.Queue() != 30 || j.Startup() != 10 || j.Wait() != 40 || j.Exec() != 150 || j.Response() != 190 {
		t.Fatalf("times: queue %v startup %v wait %v exec %v response %v", j.Queue(), j.Startup(), j.Wait(), j.Exec(), j.Response())
	}
	s := Summarize(Meta{Scenario: "x", TotalNodes: 32, DurationS: 100}, jobs)
	if s.Jobs != (Counts{Submitted: 2, Completed: 1, Failed: 1}) || s.FailReasons["no fit"] != 1 {
		t.Fatalf("counts %+v reasons %v", s.Jobs, s.FailReasons)
	}
	if s.AJRTS != 190 || s.AvgExecS != 150 || s.CoallocatedPct != 100 || s.ScenarioS != 201-1 {
		t.Fatalf("summary %+v", s)
	}
	// span is max(duration 100, last end 200) = 200; 32 nodes.
	if want := 100 * 16 * 100.0 / (32 * 200); math.Abs(s.NetUtilizationPct-want) > 1e-9 {
		t.Fatalf("net utilisation %v, want %v", s.NetUtilizationPct, want)
	}
	if want := 100 * 16 * 150.0 / (32 * 200); math.Abs(s.ObservedUtilizationPct-want) > 1e-9 {
		t.Fatalf("observed utilisation %v, want %v", s.ObservedUtilizationPct, want)
	}
	if s.ExecByClusters["2"].N != 1 || s.ExecByApp["wave"].MeanS != 150 {
		t.Fatalf("by clusters %v by app %v", s.ExecByClusters, s.ExecByApp)
	}

	dir := t.TempDir()
	if err := s.WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "backend", "seed", "time_scale", "wall_s", "jobs", "ajrt_s", "avg_wait_s",
		"avg_queue_s", "avg_startup_s", "avg_exec_s", "coallocated_pct", "net_utilization_pct", "observed_utilization_pct",
		"exec_by_app", "exec_by_clusters"} {
		if _, ok := back[k]; !ok {
			t.Errorf("results.json lacks %q", k)
		}
	}
	if err := WriteJobsCSV(dir, jobs); err != nil {
		t.Fatal(err)
	}
	rows := csvtest.Read(t, filepath.Join(dir, "jobs.csv"))
	if len(rows) != 3 || rows[0][0] != "id" || rows[2][16] != "failed" || rows[2][17] != "no fit" {
		t.Fatalf("jobs.csv rows %v", rows)
	}
	var out bytes.Buffer
	s.Print(&out)
	if !strings.Contains(out.String(), "1 completed, 1 failed") {
		t.Fatalf("summary table:\n%s", out.String())
	}
}

// Each row of jobs.csv holds its own job's fields: a measured job's
// fidelity figures, then an unmeasured job's empty ones, then the first
// job again.
func TestJobsCSVRows(t *testing.T) {
	measured := Job{ID: "m", App: "wave", Size: 4, Start: 1, End: 3, Status: "completed", Cause: "c1", Resubmissions: 2,
		Figures: &fidelity.Figures{Verdict: fidelity.Faithful, Stretch: 1.25, Compute: fidelity.Summary{P99: 0.5}}}
	unmeasured := Job{ID: "u", Size: 2, Start: -1, End: -1, Status: "failed", Reason: "no fit"}
	dir := t.TempDir()
	if err := WriteJobsCSV(dir, []Job{measured, unmeasured, measured}); err != nil {
		t.Fatal(err)
	}
	rows := csvtest.Read(t, filepath.Join(dir, "jobs.csv"))
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, c := range []struct {
		row                                  int
		id, fid, stretch, compute, cause, rs string
	}{
		{1, "m", fidelity.Faithful, "1.2500", "0.5000", "c1", "2"},
		{2, "u", fidelity.Unmeasured, "", "", "", "0"},
		{3, "m", fidelity.Faithful, "1.2500", "0.5000", "c1", "2"},
	} {
		r := rows[c.row]
		got := []string{r[col["id"]], r[col["fidelity"]], r[col["compute_stretch"]], r[col["compute_late_p99"]], r[col["cause"]], r[col["resubmissions"]]}
		want := []string{c.id, c.fid, c.stretch, c.compute, c.cause, c.rs}
		if len(r) != len(rows[0]) || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %d: %d fields, %q; want %d, %q", c.row, len(r), got, len(rows[0]), want)
		}
	}
}

// The summary names a time scale that leaves jobs too few iterations,
// under the dilation it was chosen with, and says nothing otherwise.
func TestFidelitySummaryNamesCoarseTimeScale(t *testing.T) {
	for _, coarse := range []string{"", "time scale 240 leaves 3 of 4 jobs fewer iterations than a wall budget keeps"} {
		var b bytes.Buffer
		printFidelity(&b, &fidelity.Report{Verdict: fidelity.Faithful, Dilation: &fidelity.Choice{Dilation: 1, Coarse: coarse}})
		got := b.String()
		if has := strings.Contains(got, "time scale"); has != (coarse != "") || !strings.Contains(got, coarse) {
			t.Errorf("note %q: summary\n%s", coarse, got)
		}
	}
}

// The late-resize credit is rank 0's of each resize that keeps it, summed:
// the other ranks' copies, a departing rank and other events do not count.
func TestRecorderLateCredit(t *testing.T) {
	r := NewRecorder(&bytes.Buffer{}, 1, func(string, int) float64 { return 100 })
	resized := func(rank, newRank, credit float64) *msg.Event {
		return ev(10, msg.EventRankResized, "j1", nil, map[string]float64{"rank": rank, "new_rank": newRank, "credit_s": credit})
	}
	r.Record(resized(0, 0, 2.5))  // a grow: rank 0's reckoning
	r.Record(resized(1, 1, 2.5))  // the same credit on another rank
	r.Record(resized(3, 3, 2.5))  // and on a new rank
	r.Record(resized(0, 0, -0.5)) // a shrink to a slower size: a debt
	r.Record(resized(2, -1, 0))   // a departing rank
	r.Record(ev(11, msg.EventGrow, "j1", nil, map[string]float64{"credit_s": 9}))
	if got := r.LateCredit(); got != 2 {
		t.Errorf("late credit %v, want 2", got)
	}
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

// events.jsonl keeps the order of recording across the batches its
// goroutines write, events recorded after a flush are written by the next
// one, and a failed write is reported by Flush.
func TestRecorderEventsInOrderAcrossBatches(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, 0, nil)
	n := 3*eventBatch + 7
	for i := range n {
		r.Record(ev(float64(i), "submit", "j", nil, nil))
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	r.Record(ev(float64(n), "submit", "j", nil, nil)) // after the flush
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want %d", len(lines), n+1)
	}
	for i, l := range lines {
		var e struct {
			T float64 `json:"t_s"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.T != float64(i) {
			t.Fatalf("line %d: %q (%v), want t_s %d", i+1, l, err, i)
		}
	}

	boom := errors.New("disk full")
	r = NewRecorder(&failAfter{n: 100 << 10, err: boom}, 0, nil)
	for i := range 4 * eventBatch {
		r.Record(ev(float64(i), "submit", "j", map[string]string{"pad": strings.Repeat("x", 100)}, nil))
	}
	if err := r.Flush(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "write events") {
		t.Fatalf("flush after a failed write: %v, want write events: %v", err, boom)
	}
}
