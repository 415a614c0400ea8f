package wiring

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Results is a run's results: the recorder every actor's events reach, and
// the results directory (events.jsonl while the run goes, then
// manifest.json, results.json, jobs.csv and, for malleable runs, the
// series). Every backend opens it with OpenResults before it starts the
// actors, writes the manifest once the links are shaped, waits with Await
// and ends with Finish; Close closes events.jsonl.
type Results struct {
	plan     *scenarios.Plan
	out      string
	events   *os.File
	recorder *results.Recorder
	stats    *invariant.Stats
	reported *invariant.Summary // the hosts' counters (SetReported)

	mu         sync.Mutex
	violations map[string]int
	details    []string
	hook       func(*msg.Event)
}

// maxViolationDetails bounds the violation details counted from events.
const maxViolationDetails = 50

// SettleTimeout bounds, in wall time, how long a run waits for its
// recorder to handle the events already sent to it (Recorder.Sync) before
// it reads the results.
const SettleTimeout = 30 * time.Second

// OpenResults creates the results directory out (none when empty), opens
// events.jsonl and makes the recorder of plan's jobs; undo closes
// events.jsonl.
func OpenResults(plan *scenarios.Plan, out string, undo *Undo) (*Results, error) {
	r := &Results{plan: plan, out: out, violations: map[string]int{}}
	var events io.Writer
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("results directory: %w", err)
		}
		f, err := os.Create(filepath.Join(out, "events.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("events.jsonl: %w", err)
		}
		r.events, events = f, f
		undo.Push(r.Close)
	}
	r.recorder = results.NewRecorder(events, len(plan.Jobs), Nominal)
	r.recorder.OnEvent(r.observe)
	return r, nil
}

// Recorder is the run's recorder; spawn its Props as ActorRecorder.
func (r *Results) Recorder() *results.Recorder { return r.recorder }

// OnEvent calls f for every event the recorder receives.
func (r *Results) OnEvent(f func(*msg.Event)) {
	r.mu.Lock()
	r.hook = f
	r.mu.Unlock()
}

// SharedStats returns the invariant counters for a malleability manager and
// runners that live in this process (nil for a rigid plan). Without it
// (hosts in other processes) Finish counts the violations from the
// "invariant_violation" events and reports no check counts.
func (r *Results) SharedStats() *invariant.Stats {
	if r.plan.Policy.Malleability == nil {
		return nil
	}
	if r.stats == nil {
		r.stats = invariant.NewStats()
	}
	return r.stats
}

// SetReported sets the invariant counters the hosts reported (see
// KindInvariantReport); Finish then uses them instead of the violation
// events.
func (r *Results) SetReported(inv invariant.Summary) {
	r.mu.Lock()
	r.reported = &inv
	r.mu.Unlock()
}

func (r *Results) observe(ev *msg.Event) {
	r.mu.Lock()
	hook := r.hook
	if ev.Kind == msg.EventInvariantViolation {
		name := ev.Fields["invariant"]
		r.violations[name]++
		if len(r.details) < maxViolationDetails {
			r.details = append(r.details, name+": "+ev.Fields["detail"])
		}
	}
	r.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

// WriteManifest prints the manifest to progress and writes manifest.json.
func (r *Results) WriteManifest(m netem.Manifest, progress io.Writer) error {
	m.Print(progress)
	if r.out == "" {
		return nil
	}
	return m.WriteJSON(filepath.Join(r.out, "manifest.json"))
}

// Close writes what the recorder still buffers to events.jsonl and closes
// it: a run that ends without Finish (an error, an interruption before the
// results) keeps every event recorded so far, and so do events recorded
// after Finish (actors that report while they stop).
func (r *Results) Close() error {
	if r.events == nil {
		return nil
	}
	err := r.recorder.Flush()
	if cerr := r.events.Close(); err == nil {
		err = cerr
	}
	r.events = nil
	return err
}

// Outcome is how a run ended, as a backend hands it to Finish.
type Outcome struct {
	// Backend and Shaper name the backend and the mechanism in effect.
	Backend, Shaper string
	// Jobs, Wall and Interrupted are what Await returned.
	Jobs        []results.Job
	Wall        time.Duration
	Interrupted string
	// Extra are the backend's own figures for results.json.
	Extra map[string]any
	// Manifest is the run's link manifest.
	Manifest netem.Manifest
	// Host is what the host sampler saw while the workload ran; Dilation
	// and RequireFaithful come from the run's Options (Await sets them).
	Host            *fidelity.Host
	Dilation        *fidelity.Choice
	RequireFaithful bool
	// Unmeasured, when not empty, says why nothing of the run could be
	// measured (the sim backend runs no real ranks): the fidelity verdict
	// is then "unmeasured" with this reason, whatever the figures.
	Unmeasured string
}

// Await waits until every job has ended, ctx ends, or scenario time passes
// the plan's duration plus opts.Drain, printing progress every
// opts.ProgressEvery; it then calls stop (which ends the submissions) and
// returns the jobs (unfinished ones failed, see FailUnfinished), the wall
// time and the reason the run was cut short ("" when every job ended).
func (r *Results) Await(ctx context.Context, clk clock.Clock, opts Options, stop func()) Outcome {
	plan, rec := r.plan, r.recorder
	deadline := plan.Duration + opts.Drain
	tick := time.NewTicker(opts.ProgressEvery)
	defer tick.Stop()
	o := Outcome{Dilation: opts.Dilation, RequireFaithful: opts.RequireFaithful}
	host := fidelity.StartHost(time.Second)
wait:
	for {
		select {
		case <-rec.Done():
			break wait
		case <-ctx.Done():
			o.Interrupted = "interrupted"
			break wait
		case <-tick.C:
			p := rec.Progress()
			fmt.Fprintf(opts.Progress, "scenario %s / %s (wall %s): %d/%d submitted, %d queued, %d running, %d completed, %d failed\n",
				fmtDur(clk.Now()), fmtDur(plan.Duration), clk.Wall().Round(time.Second), p.Submitted, len(plan.Jobs),
				p.Queued, p.Running, p.Completed, p.Failed)
			if clk.Now() > deadline {
				o.Interrupted = ReasonDeadline
				break wait
			}
		}
	}
	stop()
	o.Host = host.Stop()
	o.Wall = clk.Wall()
	o.Jobs = rec.Jobs()
	if o.Interrupted != "" {
		o.Jobs = FailUnfinished(o.Jobs, plan, o.Interrupted)
	}
	return o
}

// Finish is the one function every backend ends a run with: it flushes the
// recorder, summarises the jobs (and, for a malleable plan, the
// malleability figures and invariants), writes results.json, jobs.csv and
// the series, and returns the result. The error says when the run was
// interrupted or an invariant was violated; the result is returned then
// too.
func (r *Results) Finish(ctx context.Context, o Outcome) (*Result, error) {
	if err := r.recorder.Flush(); err != nil {
		return nil, err
	}
	plan := r.plan
	sum := results.Summarize(results.Meta{
		Scenario: plan.Name, Backend: o.Backend, Policy: plan.Policy.Placement, Shaper: o.Shaper, Seed: plan.Seed,
		TimeScale: plan.TimeScale, Dilation: plan.Dilation, WallS: o.Wall.Seconds(), TotalNodes: plan.TotalNodes(),
		DurationS: plan.Duration.Seconds(), TargetNetUtilizationPct: 100 * plan.NetUtilization,
	}, o.Jobs)
	if len(o.Extra) > 0 || o.Interrupted != "" {
		sum.Extra = maps.Clone(o.Extra)
		if sum.Extra == nil {
			sum.Extra = map[string]any{}
		}
		if o.Interrupted != "" {
			sum.Extra["interrupted"] = o.Interrupted
		}
	}
	if plan.Policy.Malleability != nil {
		checks, violations, details := r.invariants()
		sum.Malleability = results.SummarizeMalleability(o.Jobs, r.recorder.Utilization(), r.recorder.Resizes(), checks, violations, details)
		sum.Malleability.LateCreditS = r.recorder.LateCredit()
	}
	sum.Fidelity = results.FidelityReport(o.Jobs, o.Host, o.Dilation)
	if o.Unmeasured != "" {
		sum.Fidelity.Verdict, sum.Fidelity.Reasons = fidelity.Unmeasured, []string{o.Unmeasured}
	}
	if len(plan.Faults) > 0 || plan.Policy.Resubmits > 0 {
		sum.Faults = results.SummarizeFaults(r.recorder.Faults(), o.Jobs)
	}
	if plan.Policy.Migration != nil {
		sum.Migrations = r.recorder.Migrations()
	}
	sum.Books = results.NewBooks(o.Jobs, len(plan.Jobs))
	if plan.Batch != nil {
		if sum.Extra == nil {
			sum.Extra = map[string]any{}
		}
		sum.Extra["batch"] = NewBatchBooks(plan, o.Jobs, r.recorder.Count)
	}
	if err := r.write(sum, o.Jobs); err != nil {
		return nil, err
	}
	res := &Result{Summary: sum, Jobs: o.Jobs, Manifest: o.Manifest}
	if err := sum.Books.Err(); err != nil {
		return res, fmt.Errorf("the run's books do not balance: %w", err)
	}
	if o.RequireFaithful && !sum.Faithful() {
		return res, fmt.Errorf("fidelity: the run is %s (%s), and faithful was required",
			sum.Fidelity.Verdict, strings.Join(sum.Fidelity.Reasons, "; "))
	}
	if o.Interrupted == "interrupted" {
		return res, fmt.Errorf("run interrupted: %w", ctx.Err())
	}
	if m := sum.Malleability; m != nil && !m.InvariantsHold {
		return res, fmt.Errorf("malleability invariants violated: %v %v", m.Violations, m.Details)
	}
	return res, nil
}

// invariants are the shared counters when the manager ran here, else those
// the hosts reported, else the violations counted from events (no check
// counts).
func (r *Results) invariants() (checks, violations map[string]int, details []string) {
	if r.stats != nil {
		inv := r.stats.Snapshot()
		return inv.Checks, inv.Violations, inv.Details
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported != nil {
		// A violation event from a host that went away before it reported
		// still counts.
		violations = maps.Clone(r.reported.Violations)
		for k, v := range r.violations {
			violations[k] = max(violations[k], v)
		}
		return r.reported.Checks, violations, r.reported.Details
	}
	return nil, maps.Clone(r.violations), append([]string(nil), r.details...)
}

// write writes results.json, jobs.csv, its Batsim layout and a malleable
// plan's series, each file by a goroutine of its own (they only read the
// jobs), and returns the first error in that order.
func (r *Results) write(sum results.Summary, jobs []results.Job) error {
	if r.out == "" {
		return nil
	}
	// The same jobs in Batsim's layout, for its analysis tools (evalys).
	var clusters []results.BatsimCluster
	for _, c := range r.plan.Clusters {
		clusters = append(clusters, results.BatsimCluster{Name: c.Name, Nodes: c.Nodes})
	}
	writers := []func() error{
		func() error { return sum.WriteJSON(r.out) },
		func() error { return results.WriteJobsCSV(r.out, jobs) },
		func() error { return results.WriteBatsimCSVPlatform(r.out, jobs, r.plan.Name, clusters) },
	}
	if r.plan.Policy.Malleability != nil {
		writers = append(writers, func() error {
			return results.WriteSeries(r.out, r.recorder.Utilization(), r.recorder.Resizes())
		})
	}
	errs := make([]error, len(writers))
	var wg sync.WaitGroup
	for i, w := range writers {
		wg.Go(func() { errs[i] = w() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// FailUnfinished reports every job of plan that did not end as failed with
// reason, those never submitted included, so that an interrupted run loses
// nothing.
//
// A run that was interrupted (reason "interrupted": Ctrl-C, SIGTERM) marks
// its unfinished jobs interrupted rather than failed, so its books count
// them apart.
func FailUnfinished(jobs []results.Job, plan *scenarios.Plan, reason string) []results.Job {
	status := "failed"
	if reason == "interrupted" {
		status = results.StatusInterrupted
	}
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		seen[jobs[i].ID] = true
		if jobs[i].Status != "completed" && jobs[i].Status != "failed" {
			jobs[i].Status, jobs[i].Reason = status, reason
			if status == results.StatusFailed {
				jobs[i].Cause = msg.FailureCause_FAILURE_DEADLINE.Name()
			}
		}
	}
	for _, j := range plan.Jobs {
		if !seen[j.ID] {
			jobs = append(jobs, results.Job{ID: j.ID, App: j.App, Size: j.Size, Request: j.Request, Submit: -1,
				Placement: -1, Start: -1, End: -1, Status: status, Reason: reason + " (never submitted)"})
		}
	}
	return jobs
}

func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	h := d / time.Hour
	m := (d % time.Hour) / time.Minute
	s := (d % time.Minute) / time.Second
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// MissingResults lists the files Finish and OpenResults write (with the
// series of a malleable run) that the results directory dir lacks.
func MissingResults(dir string, malleable bool) []string {
	files := []string{"events.jsonl", "manifest.json", "results.json", "jobs.csv", "jobs_batsim.csv"}
	if malleable {
		files = append(files, "utilization.csv")
	}
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	return missing
}
