package results

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
)

// Job is everything recorded about one job. Times are scenario seconds since
// the run started; a time that never happened is -1.
type Job struct {
	ID         string  `json:"id"`
	App        string  `json:"app"`
	Size       int     `json:"size"`
	Request    string  `json:"request"`
	Components string  `json:"components"` // e.g. "amsterdam:8+vrije:16"
	Clusters   int     `json:"clusters"`
	Submit     float64 `json:"submit_s"`
	Placement  float64 `json:"placement_s"`
	Start      float64 `json:"start_s"`
	End        float64 `json:"end_s"`
	Tries      int     `json:"tries"`
	Status     string  `json:"status"` // completed | failed | running | queued
	Reason     string  `json:"reason,omitempty"`
	// Cause is why a failed job failed, typed (msg.FailureCause's Name:
	// node_down, rank, placement, ...); empty unless failed.
	Cause string `json:"cause,omitempty"`
	// Resubmissions counts the failed attempts submitted again
	// (policy.on_failure: resubmit); the record is the last attempt's, its
	// submission time the first's.
	Resubmissions int     `json:"resubmissions,omitempty"`
	Nominal       float64 `json:"nominal_s"` // single-cluster execution time, for net utilisation
	BytesSent     float64 `json:"bytes_sent"`
	// Malleable jobs: time-weighted average and maximum processors, the
	// number of grows and shrinks and the time spent resizing.
	Malleable bool    `json:"malleable,omitempty"`
	AvgProcs  float64 `json:"avg_procs,omitempty"`
	MaxProcs  float64 `json:"max_procs,omitempty"`
	Grows     int     `json:"grows,omitempty"`
	Shrinks   int     `json:"shrinks,omitempty"`
	ResizeS   float64 `json:"resize_s,omitempty"`
	// Fidelity: what the job's ranks measured (nil when they measured
	// nothing), and its figures and verdict (see package fidelity).
	Fidelity *fidelity.Stats   `json:"-"`
	Figures  *fidelity.Figures `json:"fidelity,omitempty"`
	// Moved is when a migrated job was placed where it ends (Components);
	// 0 for a job that never moved. results.json's migrations list the
	// moves.
	Moved float64 `json:"-"`
}

// Wait is start - submit.
func (j *Job) Wait() float64 { return span(j.Submit, j.Start) }

// Queue is placement - submit.
func (j *Job) Queue() float64 { return span(j.Submit, j.Placement) }

// Startup is start - placement.
func (j *Job) Startup() float64 { return span(j.Placement, j.Start) }

// Exec is end - start.
func (j *Job) Exec() float64 { return span(j.Start, j.End) }

// Response is end - submit.
func (j *Job) Response() float64 { return span(j.Submit, j.End) }

func span(a, b float64) float64 {
	if a < 0 || b < 0 {
		return -1
	}
	return b - a
}

// Recorder folds events into job records and writes events.jsonl. It is
// safe for concurrent use; the recorder actor is its only writer in a run.
type Recorder struct {
	mu       sync.Mutex
	jobs     map[string]*Job
	order    []string
	events   *eventWriter // events.jsonl (nil: none)
	err      error
	expected int
	ended    int
	done     chan struct{}
	nominal  func(app string, size int) float64
	counts   map[string]int
	onEvent  func(*msg.Event)
	util     []UtilSample
	resizes  []ResizeOp
	// lateCredit sums the jobs' credits for late resizes (rank 0's
	// reckoning, scenario seconds; Malleability.LateCreditS).
	lateCredit float64
	faults     []FaultRecord
	// migrations and declined migration requests (migrations.go).
	migrations []Migration
	declined   int
	// opportunistic decisions that chose a job to move
	opportunisticChosen int
	detected            []detection
}

// NewRecorder returns a recorder that writes events to w (nil: none) and
// closes Done once `expected` jobs have ended. nominal gives a job's
// single-cluster execution time in scenario seconds.
func NewRecorder(w io.Writer, expected int, nominal func(app string, size int) float64) *Recorder {
	r := &Recorder{jobs: map[string]*Job{}, expected: expected, done: make(chan struct{}), nominal: nominal, counts: map[string]int{}}
	if w != nil {
		r.events = &eventWriter{w: bufio.NewWriterSize(w, 64<<10)}
	}
	if expected == 0 {
		close(r.done)
	}
	return r
}

// OnEvent registers a callback run for every event, outside the lock.
func (r *Recorder) OnEvent(f func(*msg.Event)) { r.onEvent = f }

// Props returns the props of the recorder actor.
func (r *Recorder) Props() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *msg.Event:
			r.Record(m)
		case recorderSync:
			ctx.Respond(m)
		}
	})
}

// recorderSync asks the recorder actor to answer (Recorder.Sync).
type recorderSync struct{}

// Sync returns once the recorder actor at pid has recorded every event
// sent to it before the call: a local mailbox is first in, first out, so
// its answer to a request sent now comes after them. A run's end (Done:
// the last job's end event) says nothing of the events other actors sent
// before it that the actor has not handled yet (a fault's record, a node
// marked down); a run syncs before it reads the recorder for its results.
func (r *Recorder) Sync(root *actor.RootContext, pid *actor.PID, timeout time.Duration) error {
	if _, err := root.RequestFuture(pid, recorderSync{}, timeout).Result(); err != nil {
		return fmt.Errorf("sync with the recorder: %w", err)
	}
	return nil
}

// Done is closed when every expected job has ended.
func (r *Recorder) Done() <-chan struct{} { return r.done }

func (r *Recorder) job(id string) *Job {
	j := r.jobs[id]
	if j == nil {
		j = &Job{ID: id, Submit: -1, Placement: -1, Start: -1, End: -1, Status: "queued"}
		r.jobs[id] = j
		r.order = append(r.order, id)
	}
	return j
}

// Record folds one event.
func (r *Recorder) Record(ev *msg.Event) {
	r.mu.Lock()
	r.counts[ev.Kind]++
	if r.events != nil {
		r.events.add(ev)
	}
	switch ev.Kind {
	case msg.EventClusterUtil:
		v := ev.Values
		r.util = append(r.util, UtilSample{T: ev.TS, Cluster: ev.Fields["cluster"], Capacity: v["capacity"], Idle: v["idle"],
			Local: v["local"], Koala: v["koala"], Malleable: v["malleable"], Rigid: v["rigid"]})
	case msg.EventFault:
		r.faults = append(r.faults, faultRecord(ev))
	case msg.EventMigrated:
		r.migrations = append(r.migrations, migrationRecord(ev))
	case msg.EventMigrationDecision:
		if ev.Fields["migrate"] != "true" {
			r.declined++
		}
	case msg.EventOpportunistic:
		if ev.Fields["migrate"] == "true" {
			r.opportunisticChosen++
		}
	case msg.EventNodeDown:
		r.detected = append(r.detected, detection{kind: msg.FaultKill, target: ev.Fields["node"], ts: ev.TS, job: ev.JobId})
	case msg.EventUnreachable:
		r.detected = append(r.detected, detection{kind: msg.FaultPartition, target: ev.Fields["cluster"], ts: ev.TS})
	case msg.EventReachable:
		r.detected = append(r.detected, detection{kind: msg.FaultHeal, target: ev.Fields["cluster"], ts: ev.TS})
	case msg.EventRankResized:
		if ev.Values["rank"] == 0 && ev.Values["new_rank"] == 0 {
			r.lateCredit += ev.Values["credit_s"]
		}
	case msg.EventGrow, msg.EventShrink:
		v := ev.Values
		r.resizes = append(r.resizes, ResizeOp{T: ev.TS, Job: ev.JobId, Op: ev.Kind, Cluster: ev.Fields["cluster"],
			Initiator: ev.Fields["initiator"], Mandatory: ev.Fields["mandatory"] == "true",
			From: int(v["from"]), To: int(v["to"]), ResizeS: v["resize_s"], OpS: v["op_s"]})
	}
	if ev.JobId != "" {
		r.fold(ev)
	}
	r.mu.Unlock()
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}

func (r *Recorder) fold(ev *msg.Event) {
	j := r.job(ev.JobId)
	switch ev.Kind {
	case msg.EventSubmit:
		j.Submit = ev.TS
		j.App = ev.Fields["app"]
		j.Request = ev.Fields["request"]
		j.Size = int(ev.Values["size"])
		j.Malleable = ev.Fields["malleable"] == "true"
		if r.nominal != nil {
			j.Nominal = r.nominal(j.App, j.Size)
		}
	case msg.EventPlaced:
		if j.Start >= 0 {
			// A migrated job placed again: its record keeps its first
			// placement and start, and its components become where it
			// runs now (results.json's migrations list the moves).
			j.Components = ev.Fields["components"]
			j.Clusters = int(ev.Values["clusters"])
			j.Moved = ev.TS
			return
		}
		j.Placement = ev.TS
		j.Components = ev.Fields["components"]
		j.Clusters = int(ev.Values["clusters"])
		j.Tries = int(ev.Values["tries"])
		j.Status = "running"
	case msg.EventRejected:
		j.Tries = int(ev.Values["tries"])
	case msg.EventStart:
		j.Start = ev.TS
	case msg.EventResubmit:
		// The failed attempt ends; the job waits again.
		j.Resubmissions++
		j.Placement, j.Start, j.Components, j.Clusters, j.Status = -1, -1, "", 0, StatusQueued
	case msg.EventEnd:
		if j.End >= 0 {
			return
		}
		j.End = ev.TS
		j.Status = ev.Fields["status"]
		j.Reason = ev.Fields["reason"]
		j.Cause = ev.Fields["cause"]
		j.BytesSent = ev.Values["bytes_sent"]
		if f := ev.Fields[fidelity.EventField]; f != "" {
			if st, err := fidelity.Decode(f); err == nil {
				fig := fidelity.Judge(st, fidelity.DefaultThresholds())
				j.Fidelity, j.Figures = st, &fig
			}
		}
		if j.Malleable {
			j.AvgProcs, j.MaxProcs = ev.Values["avg_procs"], ev.Values["max_procs"]
			j.Grows, j.Shrinks = int(ev.Values["grows"]), int(ev.Values["shrinks"])
			j.ResizeS = ev.Values["resize_s"]
		}
		r.ended++
		if r.ended == r.expected {
			close(r.done)
		}
	}
}

// Progress is a snapshot for progress lines.
type Progress struct {
	Submitted, Queued, Running, Completed, Failed int
}

// Progress counts jobs by state.
func (r *Recorder) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p Progress
	for _, j := range r.jobs {
		if j.Submit < 0 {
			continue
		}
		p.Submitted++
		switch {
		case j.Status == "completed":
			p.Completed++
		case j.Status == "failed":
			p.Failed++
		case j.Placement >= 0:
			p.Running++
		default:
			p.Queued++
		}
	}
	return p
}

// Jobs returns copies of the job records in submission order.
func (r *Recorder) Jobs() []Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Job, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, *r.jobs[id])
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Submit < out[b].Submit })
	return out
}

// Utilization returns the utilisation samples recorded so far.
func (r *Recorder) Utilization() []UtilSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]UtilSample(nil), r.util...)
}

// Resizes returns the grow and shrink operations recorded so far.
// LateCredit is the scenario time the jobs' computation was shortened by
// (lengthened, when negative) for resizes applied late (rank 0's credit
// of each resize, apps.Resized.Credit), summed.
func (r *Recorder) LateCredit() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lateCredit
}

func (r *Recorder) Resizes() []ResizeOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ResizeOp(nil), r.resizes...)
}

// Count returns how many events of a kind were recorded.
func (r *Recorder) Count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[kind]
}

// Flush writes buffered events and returns the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events != nil && r.err == nil {
		if err := r.events.flush(); err != nil {
			r.err = fmt.Errorf("write events: %w", err)
		}
	}
	return r.err
}

// eventWriter writes events.jsonl beside the run: events are collected in
// batches, and each full batch is encoded and written by a goroutine of its
// own while the next one fills (one at a time, so the file keeps the order
// of recording). A run on one core loses nothing by it; a simulation, which
// records as fast as one core runs its actors, encodes on another core.
// The recorder's lock guards it; an event is only read once recorded (the
// actors send an event and keep no hold on it).
type eventWriter struct {
	w       *bufio.Writer
	enc     eventEncoder // events.jsonl's encoder and
	line    []byte       // its line buffer, reused from event to event
	batch   []*msg.Event // the batch filling
	spare   []*msg.Event // the batch being (or last) written, the next one's memory
	writing chan error   // the batch being written: its goroutine's result
	err     error        // the first write error
}

// eventBatch is the number of events handed to a writer goroutine at once.
const eventBatch = 512

func (e *eventWriter) add(ev *msg.Event) {
	e.batch = append(e.batch, ev)
	if len(e.batch) < eventBatch {
		return
	}
	e.wait()
	b := e.batch
	e.batch, e.spare = e.spare[:0], b
	e.writing = make(chan error, 1)
	go func(done chan<- error) { done <- e.write(b) }(e.writing)
}

// wait waits for the batch being written, if any, and takes its memory for
// the next batch.
func (e *eventWriter) wait() {
	if e.writing == nil {
		return
	}
	if err := <-e.writing; err != nil && e.err == nil {
		e.err = err
	}
	e.writing = nil
}

// write encodes and writes a batch; only one goroutine at a time runs it.
func (e *eventWriter) write(batch []*msg.Event) error {
	var err error
	for i, ev := range batch {
		batch[i] = nil
		if err != nil || e.err != nil {
			continue
		}
		b, ok := e.enc.appendEvent(e.line[:0], ev)
		if !ok { // a value JSON cannot hold: json.Marshal names it
			b, err = json.Marshal(eventJSON(ev))
		}
		if err == nil {
			b = append(b, '\n')
			_, err = e.w.Write(b)
		}
		e.line = b[:0]
	}
	return err
}

// flush writes every event added so far and returns the first error.
func (e *eventWriter) flush() error {
	e.wait()
	if err := e.write(e.batch); err != nil && e.err == nil {
		e.err = err
	}
	e.batch = e.batch[:0]
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

func eventJSON(ev *msg.Event) map[string]interface{} {
	m := map[string]interface{}{"t_s": round(ev.TS), "wall_s": round(ev.WallS), "kind": ev.Kind}
	if ev.JobId != "" {
		m["job"] = ev.JobId
	}
	if ev.Source != "" {
		m["source"] = ev.Source
	}
	for k, v := range ev.Fields {
		m[k] = v
	}
	for k, v := range ev.Values {
		m[k] = round(v)
	}
	return m
}

func round(f float64) float64 {
	const p = 1e6
	if f >= 9e12 || f <= -9e12 || f != f {
		return f // f x p would overflow int64; no fraction worth rounding is left
	}
	if f < 0 {
		return -float64(int64(-f*p+0.5)) / p
	}
	return float64(int64(f*p+0.5)) / p
}
