package owner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The liveness rule: same host and pid with the same start time is alive;
// a missing pid is gone; a pid with another start time was reused; another
// host or no record is never judged; a /proc error is never a reason to
// remove.
func TestCheck(t *testing.T) {
	procs := map[int]uint64{100: 5000, 200: 7000}
	startOf := func(pid int) (uint64, error) {
		if pid == 300 {
			return 0, errors.New("permission denied")
		}
		s, ok := procs[pid]
		if !ok {
			return 0, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return s, nil
	}
	cases := []struct {
		name  string
		owner *Owner
		want  Status
	}{
		{"live pid", &Owner{PID: 100, Start: 5000, Host: "h"}, Alive},
		{"dead pid", &Owner{PID: 150, Start: 5000, Host: "h"}, Gone},
		{"reused pid", &Owner{PID: 200, Start: 6999, Host: "h"}, Reused},
		{"other host", &Owner{PID: 150, Start: 1, Host: "other"}, Elsewhere},
		{"no record", nil, Unknown},
		{"no pid", &Owner{Host: "h"}, Unknown},
		{"unreadable proc", &Owner{PID: 300, Start: 1, Host: "h"}, Alive},
	}
	for _, c := range cases {
		if got := Check(c.owner, "h", startOf); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		run  string
		st   Status
		only string
		all  bool
		want bool
	}{
		{"a", Alive, "", false, false},
		{"a", Gone, "", false, true},
		{"a", Reused, "", false, true},
		{"a", Elsewhere, "", false, false},
		{"a", Unknown, "", false, false},
		{"a", Alive, "", true, true},
		{"a", Unknown, "", true, true},
		{"a", Alive, "a", false, true},
		{"a", Gone, "b", false, false},
		{"a", Gone, "b", true, false},
	}
	for _, c := range cases {
		if got, why := Decide(c.run, c.st, c.only, c.all); got != c.want || why == "" {
			t.Errorf("Decide(%s, %s, only %q, all %v) = %v (%q), want %v", c.run, c.st, c.only, c.all, got, why, c.want)
		}
	}
}

// This process's own record is alive on this machine, and its start time
// is what /proc says.
func TestSelfIsAlive(t *testing.T) {
	o, err := Self("t1", "netns")
	if err != nil {
		t.Fatal(err)
	}
	if o.PID != os.Getpid() || o.Start == 0 {
		t.Fatalf("self: %+v", o)
	}
	if st := CheckHere(&o); st != Alive {
		t.Errorf("own record: %q, want alive", st)
	}
	o.Start++
	if st := CheckHere(&o); st != Reused {
		t.Errorf("own pid with another start time: %q, want pid reused", st)
	}
}

func TestParseStart(t *testing.T) {
	line := "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	got, err := parseStart(line)
	if err != nil || got != 987654 {
		t.Errorf("parseStart = %d, %v; want 987654", got, err)
	}
	if _, err := parseStart("12 (x) S 1"); err == nil {
		t.Error("a short stat line parsed")
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	o := Owner{RunID: "r1", Backend: "docker", PID: 12, Start: 34, Host: "h", Began: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	back := FromLabels("r1", o.Labels())
	if back == nil || *back != o {
		t.Errorf("round trip: %+v, want %+v", back, o)
	}
	if FromLabels("r1", map[string]string{"koala-emu.run": "r1"}) != nil {
		t.Error("labels without an owner gave one")
	}
}

func TestRecords(t *testing.T) {
	r := Records{Dir: filepath.Join(t.TempDir(), "runs")}
	o := Owner{RunID: "abc123", Backend: "netns", PID: 1, Start: 2, Host: "h"}
	if err := r.Write(o); err != nil {
		t.Fatal(err)
	}
	ids, err := r.List()
	if err != nil || len(ids) != 1 || ids[0] != "abc123" {
		t.Fatalf("list: %v %v", ids, err)
	}
	back, err := r.Read("abc123")
	if err != nil || back == nil || back.PID != 1 || back.Host != "h" {
		t.Fatalf("read: %+v %v", back, err)
	}
	if err := r.Remove("abc123"); err != nil {
		t.Fatal(err)
	}
	if back, err := r.Read("abc123"); back != nil || err != nil {
		t.Errorf("after remove: %+v %v", back, err)
	}
	if err := r.Write(Owner{RunID: "bad-id"}); err == nil {
		t.Error("a run ID with '-' was recorded")
	}
}
