package owner

import (
	"strconv"
	"time"
)

// Docker labels of a run's owner, on every container and network of the
// run (next to launch/docker's koala-emu.run).
const (
	LabelBackend = "koala-emu.owner.backend"
	LabelPID     = "koala-emu.owner.pid"
	LabelStart   = "koala-emu.owner.start"
	LabelHost    = "koala-emu.owner.host"
	LabelBegan   = "koala-emu.owner.began"
)

// Labels returns the owner as Docker labels (the run ID is carried by
// koala-emu.run).
func (o Owner) Labels() map[string]string {
	return map[string]string{
		LabelBackend: o.Backend,
		LabelPID:     strconv.Itoa(o.PID),
		LabelStart:   strconv.FormatUint(o.Start, 10),
		LabelHost:    o.Host,
		LabelBegan:   o.Began.UTC().Format(time.RFC3339),
	}
}

// FromLabels reads an owner from Docker labels; nil when they carry none
// (or a malformed one).
func FromLabels(runID string, l map[string]string) *Owner {
	pid, err1 := strconv.Atoi(l[LabelPID])
	start, err2 := strconv.ParseUint(l[LabelStart], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return nil
	}
	began, _ := time.Parse(time.RFC3339, l[LabelBegan]) // zero when absent: only shown
	return &Owner{RunID: runID, Backend: l[LabelBackend], PID: pid, Start: start, Host: l[LabelHost], Began: began}
}
