package results

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// The recorder pairs every fault with its detection (the first of its kind
// and target at or after it) and a kill with the job it hit; the section
// counts failed jobs by cause and the resubmissions.
func TestFaultsSection(t *testing.T) {
	r := NewRecorder(nil, 2, nil)
	ev := func(ts float64, kind, job string, fields map[string]string) {
		r.Record(&msg.Event{TS: ts, Kind: kind, JobId: job, Fields: fields})
	}
	ev(0, msg.EventSubmit, "j1", nil)
	ev(0, msg.EventSubmit, "j2", nil)
	ev(5, msg.EventNodeDown, "", map[string]string{"node": "a-n001"}) // an earlier loss, not the fault's
	ev(10, msg.EventFault, "", map[string]string{"kind": "kill", "target": "a-n002"})
	ev(10.5, msg.EventNodeDown, "j1", map[string]string{"node": "a-n002"})
	ev(10.6, msg.EventResubmit, "j1", map[string]string{"cause": "node_down"})
	ev(20, msg.EventFault, "", map[string]string{"kind": "partition", "target": "b"})
	ev(20, msg.EventUnreachable, "", map[string]string{"cluster": "b"})
	ev(30, msg.EventFault, "", map[string]string{"kind": "degrade", "target": "a", "peer": "b"})
	ev(40, msg.EventFault, "", map[string]string{"kind": "kill", "target": "a-n003", "error": "no such node"})
	ev(50, msg.EventEnd, "j1", map[string]string{"status": "completed"})
	ev(60, msg.EventEnd, "j2", map[string]string{"status": "failed", "cause": "rank", "reason": "rank 0: boom"})

	applied := r.Faults()
	if len(applied) != 4 {
		t.Fatalf("%d faults, want 4", len(applied))
	}
	kill, part, deg, bad := applied[0], applied[1], applied[2], applied[3]
	if kill.DetectedAfterS == nil || *kill.DetectedAfterS != 0.5 || kill.Job != "j1" {
		t.Errorf("kill: %+v", kill)
	}
	if part.DetectedAfterS == nil || *part.DetectedAfterS != 0 {
		t.Errorf("partition: %+v", part)
	}
	if deg.DetectedAfterS != nil || deg.Peer != "b" {
		t.Errorf("degrade: %+v", deg)
	}
	if bad.Error == "" || bad.DetectedAfterS != nil {
		t.Errorf("failed kill: %+v", bad)
	}
	jobs := r.Jobs()
	f := SummarizeFaults(applied, jobs)
	if f.Resubmissions != 1 || f.JobsResubmitted != 1 || f.FailedByCause["rank"] != 1 || len(f.FailedByCause) != 1 {
		t.Errorf("section %+v", f)
	}
	b := NewBooks(jobs, 2)
	if !b.Balanced() || b.Submitted != 3 || b.Resubmitted != 1 {
		t.Errorf("books %+v: %v", b, b.Err())
	}
	var sb strings.Builder
	printFaults(&sb, f)
	for _, want := range []string{"3 applied (1 not", "2 detected (at most 0.5 s after)", "failed: 1 rank", "1 resubmissions of 1 jobs"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("summary line %q lacks %q", sb.String(), want)
		}
	}
}

// Once Sync returns, the recorder actor has recorded every event sent to
// it before.
func TestRecorderSyncFollowsEventsSent(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	rec := NewRecorder(nil, 0, nil)
	pid := sys.Root.Spawn(rec.Props())
	const n = 2000
	for i := 0; i < n; i++ {
		sys.Root.Send(pid, &msg.Event{TS: float64(i), Kind: msg.EventFault, Fields: map[string]string{"kind": "kill", "target": "n"}})
	}
	if err := rec.Sync(sys.Root, pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Faults()); got != n {
		t.Fatalf("%d faults recorded when Sync returned, want %d", got, n)
	}
}
