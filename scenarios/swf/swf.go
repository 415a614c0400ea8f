package swf

import (
	"fmt"
	"math"
	"time"
)

// Unknown is the SWF value of a field that does not apply or that the log
// does not know. Record keeps it as written.
const Unknown = -1

// SWF status codes (field 11) that the reader interprets.
const (
	StatusFailed    = 0
	StatusCompleted = 1
	StatusCancelled = 5
)

// NumFields is the number of fields of an SWF job line.
const NumFields = 18

// FieldNames are the SWF names of fields 1 to 18 (index 0 is field 1), as
// they appear in ParseError.
var FieldNames = [NumFields]string{
	"job number",
	"submit time",
	"wait time",
	"run time",
	"allocated processors",
	"average CPU time",
	"used memory",
	"requested processors",
	"requested time",
	"requested memory",
	"status",
	"user id",
	"group id",
	"executable number",
	"queue number",
	"partition number",
	"preceding job",
	"think time",
}

// Record is one job line as written in the trace: every field in its SWF
// unit, Unknown (-1) where the log does not know it. Times are seconds
// (submit time from the log's start, UnixStartTime), memory is kilobytes per
// processor. Count and identifier fields are integers; time and memory fields
// may be fractional.
type Record struct {
	JobNumber       int64   // field 1
	SubmitTime      float64 // field 2, seconds since the log's start
	WaitTime        float64 // field 3, seconds
	RunTime         float64 // field 4, seconds of wall-clock time
	AllocatedProcs  int64   // field 5
	AvgCPUTime      float64 // field 6, seconds per processor
	UsedMemory      float64 // field 7, KB per processor
	RequestedProcs  int64   // field 8
	RequestedTime   float64 // field 9, seconds (the user's estimate)
	RequestedMemory float64 // field 10, KB per processor
	Status          int64   // field 11: 1 completed, 0 failed, 5 cancelled
	UserID          int64   // field 12
	GroupID         int64   // field 13
	Executable      int64   // field 14
	Queue           int64   // field 15
	Partition       int64   // field 16
	PrecedingJob    int64   // field 17
	ThinkTime       float64 // field 18, seconds
}

// Job is a job kept for replay: the trace record plus the values a replay
// uses, derived by these rules:
//   - Submit is the submit time minus Options.Start (the window start), so
//     the first job of a window starting at the log's start keeps its trace
//     offset (6.9 days for KTH: the cleaning dropped its first jobs).
//   - Procs is the allocated processor count if known (> 0), else the
//     requested one.
//   - Runtime is the trace's run time (field 4; always > 0 for a kept job).
//   - Walltime is the requested time (field 9) when known (> 0), else the run
//     time. Runtime may exceed Walltime: real logs hold such jobs (CTC: 7,174
//     of 77,222) because their schedulers did not kill at the estimate or the
//     estimate was CPU time. They are kept as they are and counted in
//     Stats.OverWalltime; a batch cluster that kills at the walltime will kill
//     them.
//
// Times are rounded to the nanosecond.
type Job struct {
	Record
	Line     int // line number in the file
	Submit   time.Duration
	Procs    int
	Runtime  time.Duration
	Walltime time.Duration
}

// Header is the trace's leading comment block, "; Key: value" lines. The
// named values are parsed from the first value of their key (the leading
// integer: "MaxNodes: 338 (batch partition; 512 total)" gives 338) and are
// zero when the header does not give them. Fields holds every key, the named
// ones included, as written: one value per occurrence in file order (Queue
// and Note repeat), a continuation line (a comment indented by two or more
// spaces that follows a key line) joined to its value with "\n". Comment
// lines after the first job line are skipped, not parsed.
type Header struct {
	MaxNodes       int
	MaxProcs       int
	UnixStartTime  int64 // the log's start: submit time 0, in Unix seconds
	TimeZoneString string
	MaxJobs        int
	MaxRecords     int
	Fields         map[string][]string
	Lines          int // comment and blank lines before the first job line
}

// Start is the log's start as a time, in the log's zone if TimeZoneString
// names one this host knows, else UTC. It is the zero time when the header
// has no UnixStartTime.
func (h Header) Start() time.Time {
	if h.UnixStartTime == 0 {
		return time.Time{}
	}
	t := time.Unix(h.UnixStartTime, 0).UTC()
	if loc, err := time.LoadLocation(h.TimeZoneString); err == nil && h.TimeZoneString != "" {
		t = t.In(loc)
	}
	return t
}

// Reason says why a job line was not kept. Reasons are fixed strings so
// results can count them; Reasons lists them all.
type Reason string

// The reasons, in the order the reader tests them: a job is counted under
// the first that applies.
const (
	// ReasonNoSubmitTime: the submit time is unknown (-1).
	ReasonNoSubmitTime Reason = "no-submit-time"
	// ReasonBeforeWindow: submitted before Options.Start.
	ReasonBeforeWindow Reason = "before-window"
	// ReasonAfterWindow: submitted at or after Options.Start+Options.Length.
	ReasonAfterWindow Reason = "after-window"
	// ReasonCancelled: cancelled before it started: status 5 with a run time
	// <= 0 (or unknown) or an unknown wait time. A status-5 job that ran
	// (run time > 0, wait time known) was killed by its user while running;
	// it is kept and replayed for the time it ran.
	ReasonCancelled Reason = "cancelled-before-start"
	// ReasonNoProcs: neither the allocated nor the requested processor count
	// is known (both <= 0).
	ReasonNoProcs Reason = "no-processor-count"
	// ReasonNoRuntime: the run time is zero (under 0.5 s in SWF) or unknown.
	ReasonNoRuntime Reason = "zero-or-unknown-run-time"
	// ReasonTooWide: more processors than Options.MaxProcs.
	ReasonTooWide Reason = "wider-than-max-procs"
)

// Reasons lists every Reason in the order they are tested.
func Reasons() []Reason {
	return []Reason{ReasonNoSubmitTime, ReasonBeforeWindow, ReasonAfterWindow,
		ReasonCancelled, ReasonNoProcs, ReasonNoRuntime, ReasonTooWide}
}

// Stats counts what a Reader read. Once the reader is done, Jobs = Kept +
// the sum of Skipped.
type Stats struct {
	Lines        int            // every line read: header, comments, blanks, jobs
	Jobs         int            // job lines read (parsed without error)
	Kept         int            // jobs returned
	Skipped      map[Reason]int // jobs not returned, by reason
	OverWalltime int            // kept jobs whose Runtime exceeds their Walltime
	// LimitReached is true when reading stopped at Options.Limit: the lines
	// after the last kept job were not read and are not counted.
	LimitReached bool
}

// SkippedTotal is the sum of Skipped.
func (s Stats) SkippedTotal() int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// Options selects the jobs to keep. The zero value keeps every replayable
// job of the whole trace.
type Options struct {
	// Start and Length are a window of submit times relative to the log's
	// start (submit time 0, the header's UnixStartTime): jobs submitted in
	// [Start, Start+Length) are kept; Length 0 means to the end of the log.
	// Kept jobs' Submit is rebased to Start. The whole file is still read and
	// checked; jobs outside the window are counted as skipped.
	Start, Length time.Duration
	// MaxProcs drops jobs that use more processors than this (counted as
	// ReasonTooWide); 0 means no limit.
	MaxProcs int
	// Limit stops reading once this many jobs are kept; 0 means no limit.
	Limit int
}

func (o Options) validate() error {
	switch {
	case o.Start < 0:
		return fmt.Errorf("swf: options: start %v is negative", o.Start)
	case o.Length < 0:
		return fmt.Errorf("swf: options: length %v is negative", o.Length)
	case o.Length > math.MaxInt64-o.Start:
		return fmt.Errorf("swf: options: start %v plus length %v overflows", o.Start, o.Length)
	case o.MaxProcs < 0:
		return fmt.Errorf("swf: options: max procs %d is negative", o.MaxProcs)
	case o.Limit < 0:
		return fmt.Errorf("swf: options: limit %d is negative", o.Limit)
	}
	return nil
}
