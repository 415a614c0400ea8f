package owner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Owner is the process that started a run.
type Owner struct {
	// RunID is the run's ID; Backend the backend's name.
	RunID   string `json:"run_id"`
	Backend string `json:"backend"`
	// PID is the launcher's process id and Start its start time in clock
	// ticks since boot (field 22 of /proc/PID/stat): a PID with another
	// start time is another process.
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
	// Host is the host name the launcher ran on.
	Host string `json:"host"`
	// Began is the wall time the run started.
	Began time.Time `json:"began"`
}

// Self is the owner record of a run started by this process now.
func Self(runID, backend string) (Owner, error) {
	pid := os.Getpid()
	start, err := StartTime(pid)
	if err != nil {
		return Owner{}, fmt.Errorf("owner of run %s: %w", runID, err)
	}
	host, err := os.Hostname()
	if err != nil {
		return Owner{}, fmt.Errorf("owner of run %s: host name: %w", runID, err)
	}
	return Owner{RunID: runID, Backend: backend, PID: pid, Start: start, Host: host, Began: time.Now().UTC()}, nil
}

// ErrNoProcess is returned by StartTime for a process id that does not
// exist.
var ErrNoProcess = errors.New("no such process")

// StartTime is the start time of process pid in clock ticks since boot,
// read from /proc/PID/stat.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseStart(string(b))
}

// parseStart reads field 22 (starttime) of a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after the last ')'.
func parseStart(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	const startField = 22 - 3 // fields after ')' start with field 3 (state)
	if len(f) <= startField {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want more than %d", len(f), startField)
	}
	v, err := strconv.ParseUint(f[startField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat: starttime: %w", err)
	}
	return v, nil
}

// Status is what Check found of a run's owner.
type Status string

// Owner statuses.
const (
	// Alive: the owner process runs (same pid, same start time).
	Alive Status = "alive"
	// Gone: no process has the owner's pid.
	Gone Status = "gone"
	// Reused: the pid belongs to a process started at another time.
	Reused Status = "pid reused"
	// Elsewhere: the owner ran on another host; its liveness is unknown
	// here.
	Elsewhere Status = "on another host"
	// Unknown: the run carries no owner record (an older version made it,
	// or a tool that records none).
	Unknown Status = "owner unknown"
)

// Orphaned reports whether a run with this owner status may be removed
// without being named: its owner is gone or its pid was reused.
func (s Status) Orphaned() bool { return s == Gone || s == Reused }

// Check says whether the owner of a run is alive, as seen from host, with
// startOf giving a pid's start time (StartTime on a real machine; an error
// wrapping ErrNoProcess for a pid that does not exist). An error other than
// ErrNoProcess counts as alive: a run is never removed on a guess.
func Check(o *Owner, host string, startOf func(pid int) (uint64, error)) Status {
	switch {
	case o == nil || o.PID <= 0:
		return Unknown
	case o.Host != host:
		return Elsewhere
	}
	start, err := startOf(o.PID)
	switch {
	case errors.Is(err, ErrNoProcess):
		return Gone
	case err != nil:
		return Alive
	case start != o.Start:
		return Reused
	}
	return Alive
}

// CheckHere is Check on this machine.
func CheckHere(o *Owner) Status {
	host, _ := os.Hostname() // an empty host name only makes every owner "elsewhere"
	return Check(o, host, StartTime)
}

// Decide says whether clean removes a run whose owner has status st, and
// why: a run named by only ("" names none) or any run when all is set; else
// a run whose owner is gone or whose pid was reused. Runs with a live
// owner, an owner on another host or no owner record are kept.
func Decide(runID string, st Status, only string, all bool) (remove bool, why string) {
	switch {
	case only != "" && runID != only:
		return false, "not the run asked for"
	case only != "":
		return true, "named (owner " + string(st) + ")"
	case all:
		return true, "--all (owner " + string(st) + ")"
	case st.Orphaned():
		return true, "owner " + string(st)
	}
	return false, "owner " + string(st)
}
