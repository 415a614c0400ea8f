package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/scenarios/swf"
)

// Trace excerpts that built-in scenarios replay (see traces/README.md).
//
//go:embed traces
var builtinTraces embed.FS

// Names the batch grid accepts. They mirror the registries of
// actors/policy/batch and actors/policy/realloc (launch/wiring's tests check
// that they agree); scenarios imports no policy.
var (
	BatchPolicies   = []string{"fcfs", "cbf"}
	ReallocModes    = []string{"none", "regular", "all-cancellation"}
	ReallocHeurists = []string{"mct", "minmin"}
)

// Defaults of a batch grid.
const (
	DefaultBatchPolicy      = "cbf"
	DefaultReallocMode      = "none"
	DefaultReallocHeuristic = "mct"
	DefaultReallocPeriod    = time.Hour
	DefaultReallocThreshold = 60 * time.Second
)

// streamLocal draws which trace jobs go straight to their batch cluster.
const streamLocal uint64 = 0x6c6f63616c000000 // "local"

// BatchSpec is a batch grid (SPEC §5): batch clusters planned by FCFS or
// CBF, fed by SWF traces, with a middleware (one server per cluster and an
// agent) that maps moldable jobs by minimum completion time and reallocates
// the waiting ones. A scenario with batch has no topology, workload, policy
// or faults.
type BatchSpec struct {
	// Policy is every cluster's batch policy: fcfs or cbf (default cbf).
	Policy   string             `yaml:"policy,omitempty"`
	Clusters []BatchClusterSpec `yaml:"clusters"`
	Traces   []TraceSpec        `yaml:"traces"`
	// LocalShare in [0, 1] is the share of every trace's jobs submitted
	// straight to the cluster the trace feeds, as local users, drawn per
	// job from the seed: 0 (default) is a dedicated platform, 0.667 the
	// non-dedicated one of SPEC §5, 1 a plain replay of rigid trace jobs
	// on their batch clusters, with no middleware job.
	LocalShare *float64    `yaml:"local_share,omitempty"`
	Realloc    ReallocSpec `yaml:"realloc,omitempty"`
}

// BatchClusterSpec is one batch cluster.
type BatchClusterSpec struct {
	Name       string `yaml:"name"`
	Processors int    `yaml:"processors"`
	// Speed divides every job's lengths on the cluster (default 1; 1.2 is
	// 20 % faster).
	Speed *float64 `yaml:"speed,omitempty"`
}

// TraceSpec is one SWF trace replayed into the grid.
type TraceSpec struct {
	// File is the trace (plain or gzip), relative to the scenario file's
	// directory; a built-in scenario reads its own excerpts.
	File string `yaml:"file"`
	// Cluster is the batch cluster the trace feeds: its local jobs go there,
	// its job numbers name the jobs (cluster-number).
	Cluster string `yaml:"cluster"`
	// StartS and LengthS are the window of submit times replayed, from the
	// log's start; LengthS 0 (default) replays to the end.
	StartS  float64 `yaml:"start_s,omitempty"`
	LengthS float64 `yaml:"length_s,omitempty"`
	// MaxJobs keeps at most this many jobs (0: all).
	MaxJobs int `yaml:"max_jobs,omitempty"`
	// MaxProcs skips jobs wider than this (default and at most: the fed
	// cluster's processors, so that a local job fits).
	MaxProcs int `yaml:"max_procs,omitempty"`
}

// ReallocSpec is the middleware's reallocation.
type ReallocSpec struct {
	// Mode is none (default), regular or all-cancellation.
	Mode string `yaml:"mode,omitempty"`
	// Heuristic is mct (default) or minmin.
	Heuristic string `yaml:"heuristic,omitempty"`
	// PeriodS is the time between reallocations (default 3600).
	PeriodS *float64 `yaml:"period_s,omitempty"`
	// ThresholdS is the regular algorithm's least gain (default 60).
	ThresholdS *float64 `yaml:"threshold_s,omitempty"`
}

// BatchPlan is a validated batch grid with its trace jobs read.
type BatchPlan struct {
	Policy    string
	Clusters  []BatchCluster
	Mode      string // none | regular | all-cancellation
	Heuristic string
	Period    time.Duration
	Threshold time.Duration
	// Jobs are the replayed trace jobs, in the order of Plan.Jobs (same IDs).
	Jobs []BatchJob
	// Traces are the books of every trace read.
	Traces []TraceBooks
}

// BatchCluster is one batch cluster of a plan.
type BatchCluster struct {
	Name       string
	Processors int
	Speed      float64
}

// BatchJob is one trace job to replay.
type BatchJob struct {
	ID      string
	Cluster string // the cluster its trace feeds
	Number  int64  // its SWF job number
	Submit  time.Duration
	Procs   int
	// Walltime (requested time) and Runtime as the trace gives them.
	Walltime, Runtime time.Duration
	// Local: submitted straight to Cluster; otherwise to the agent.
	Local bool
}

// TraceBooks are the counts of one trace: the jobs of its window, those
// kept and those skipped, by reason.
type TraceBooks struct {
	File    string         `json:"file"`
	Cluster string         `json:"cluster"`
	Window  int            `json:"window_jobs"`
	Kept    int            `json:"kept"`
	Skipped map[string]int `json:"skipped"`
}

// batchOnly reports the sections a batch grid scenario must leave out.
func (v *validator) batchOnly(s *Scenario) {
	if !blank(reflect.ValueOf(s.Topology)) {
		v.add("topology", "a batch grid (batch) takes no topology; its clusters are batch.clusters")
	}
	if !blank(reflect.ValueOf(s.Workload)) {
		v.add("workload", "a batch grid (batch) takes no workload; its jobs come from batch.traces")
	}
	if !blank(reflect.ValueOf(s.Policy)) {
		v.add("policy", "a batch grid (batch) takes no policy; see batch.policy and batch.realloc")
	}
	if len(s.Faults) > 0 {
		v.add("faults", "a batch grid (batch) takes no faults")
	}
}

// blank reports whether v holds nothing: zero values, empty slices and
// maps, nil pointers (a section written out empty by a YAML round trip is
// still absent).
func blank(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !blank(v.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	default:
		return v.IsZero()
	}
}

// batch validates the batch grid and reads its traces.
func (v *validator) batch(s *Scenario, r *resolved) *BatchPlan {
	b := s.Batch
	v.batchOnly(s)
	p := &BatchPlan{Policy: DefaultBatchPolicy, Mode: DefaultReallocMode, Heuristic: DefaultReallocHeuristic,
		Period: DefaultReallocPeriod, Threshold: DefaultReallocThreshold}
	if b.Policy != "" {
		p.Policy = b.Policy
		if !slices.Contains(BatchPolicies, b.Policy) {
			v.add("batch.policy", "unknown batch policy %q (known: %s)", b.Policy, sortedList(BatchPolicies))
		}
	}
	v.batchClusters(b, p)
	v.realloc(b, r, p)
	share := 0.0
	if b.LocalShare != nil {
		share = *b.LocalShare
		if !finite(share) || share < 0 || share > 1 {
			v.add("batch.local_share", "must be in [0, 1], got %g", share)
			share = 0
		}
	}
	if len(b.Traces) == 0 {
		v.add("batch.traces", "at least one trace is required")
	}
	local := newRand(r.seed, streamLocal)
	fed := map[string]bool{}
	for i, t := range b.Traces {
		path := fmt.Sprintf("batch.traces[%d]", i)
		c, ok := p.cluster(t.Cluster)
		switch {
		case !ok:
			v.add(path+".cluster", "unknown batch cluster %q", t.Cluster)
			continue
		case fed[t.Cluster]:
			v.add(path+".cluster", "cluster %q is fed by an earlier trace already", t.Cluster)
			continue
		}
		fed[t.Cluster] = true
		jobs, books, ok := v.trace(s, r, path, t, c)
		if !ok {
			continue
		}
		for k := range jobs {
			jobs[k].Local = local.Float64() < share
		}
		p.Jobs = append(p.Jobs, jobs...)
		p.Traces = append(p.Traces, books)
	}
	sort.SliceStable(p.Jobs, func(a, b int) bool { return p.Jobs[a].Submit < p.Jobs[b].Submit })
	return p
}

func (p *BatchPlan) cluster(name string) (BatchCluster, bool) {
	for _, c := range p.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return BatchCluster{}, false
}

func (v *validator) batchClusters(b *BatchSpec, p *BatchPlan) {
	if len(b.Clusters) == 0 {
		v.add("batch.clusters", "at least one cluster is required")
	}
	seen := map[string]bool{}
	for i, c := range b.Clusters {
		path := fmt.Sprintf("batch.clusters[%d]", i)
		switch {
		case !clusterName.MatchString(c.Name):
			v.add(path+".name", "%q: use lower-case letters, digits and '-'", c.Name)
		case seen[c.Name]:
			v.add(path+".name", "duplicate cluster %q", c.Name)
		}
		seen[c.Name] = true
		if c.Processors < 1 {
			v.add(path+".processors", "must be at least 1, got %d", c.Processors)
		} else {
			v.atMost(path+".processors", c.Processors, 1_000_000)
		}
		speed := 1.0
		if c.Speed != nil {
			speed = *c.Speed
			if !finite(speed) || speed <= 0 || speed > 100 {
				v.add(path+".speed", "must be in (0, 100], got %g", speed)
				speed = 1
			}
		}
		p.Clusters = append(p.Clusters, BatchCluster{Name: c.Name, Processors: max(c.Processors, 1), Speed: speed})
	}
}

func (v *validator) realloc(b *BatchSpec, r *resolved, p *BatchPlan) {
	rs := b.Realloc
	if rs.Mode != "" {
		p.Mode = rs.Mode
		if !slices.Contains(ReallocModes, rs.Mode) {
			v.add("batch.realloc.mode", "unknown mode %q (known: %s)", rs.Mode, strings.Join(ReallocModes, ", "))
		}
	}
	if rs.Heuristic != "" {
		p.Heuristic = rs.Heuristic
		if !slices.Contains(ReallocHeurists, rs.Heuristic) {
			v.add("batch.realloc.heuristic", "unknown heuristic %q (known: %s)", rs.Heuristic, strings.Join(ReallocHeurists, ", "))
		}
	}
	if rs.PeriodS != nil {
		if d := v.seconds(r, "batch.realloc.period_s", *rs.PeriodS, true); d > 0 {
			p.Period = d
		}
	}
	if rs.ThresholdS != nil {
		p.Threshold = v.seconds(r, "batch.realloc.threshold_s", *rs.ThresholdS, false)
	}
}

// trace reads one trace's window; a malformed trace is one error naming
// the file, line and field.
func (v *validator) trace(s *Scenario, r *resolved, path string, t TraceSpec, c BatchCluster) ([]BatchJob, TraceBooks, bool) {
	opts := swf.Options{Start: v.seconds(r, path+".start_s", t.StartS, false), Length: v.seconds(r, path+".length_s", t.LengthS, false),
		MaxProcs: c.Processors, Limit: t.MaxJobs}
	switch {
	case t.MaxJobs < 0:
		v.add(path+".max_jobs", "must not be negative, got %d", t.MaxJobs)
		return nil, TraceBooks{}, false
	case t.MaxProcs < 0 || t.MaxProcs > c.Processors:
		v.add(path+".max_procs", "must be in [0, %d] (cluster %s's processors), got %d", c.Processors, c.Name, t.MaxProcs)
		return nil, TraceBooks{}, false
	case t.MaxProcs > 0:
		opts.MaxProcs = t.MaxProcs
	}
	if t.File == "" {
		v.add(path+".file", "is required")
		return nil, TraceBooks{}, false
	}
	rc, err := openTrace(s.source, t.File)
	if err != nil {
		v.add(path+".file", "%v", err)
		return nil, TraceBooks{}, false
	}
	defer rc.Close()
	_, jobs, st, err := swf.ReadAll(rc, t.File, opts)
	if err != nil {
		v.add(path+".file", "%v", err)
		return nil, TraceBooks{}, false
	}
	books := TraceBooks{File: t.File, Cluster: c.Name, Kept: st.Kept, Skipped: map[string]int{}}
	books.Window = st.Kept
	for reason, n := range st.Skipped {
		if reason == swf.ReasonBeforeWindow || reason == swf.ReasonAfterWindow {
			continue
		}
		books.Skipped[string(reason)] = n
		books.Window += n
	}
	out := make([]BatchJob, len(jobs))
	for i, j := range jobs {
		if j.Submit.Seconds() > MaxScenarioSeconds {
			v.add(path+".file", "%s:%d: job %d is submitted %gs into the window, beyond the longest scenario (%g s); narrow length_s",
				t.File, j.Line, j.JobNumber, j.Submit.Seconds(), float64(MaxScenarioSeconds))
			return nil, TraceBooks{}, false
		}
		out[i] = BatchJob{ID: fmt.Sprintf("%s-%d", c.Name, j.JobNumber), Cluster: c.Name, Number: j.JobNumber, Submit: j.Submit,
			Procs: j.Procs, Walltime: j.Walltime, Runtime: j.Runtime}
	}
	return out, books, true
}

// openTrace opens a trace file: relative to the scenario file's directory,
// or, for a built-in scenario, among the built-in excerpts.
func openTrace(source, file string) (io.ReadCloser, error) {
	if name, ok := strings.CutPrefix(source, "builtin:"); ok && name != "" && !filepath.IsAbs(file) {
		f, err := builtinTraces.Open(filepath.ToSlash(filepath.Clean(file)))
		if err != nil {
			return nil, fmt.Errorf("built-in trace %s: %w", file, err)
		}
		return f, nil
	}
	if !filepath.IsAbs(file) && source != "" {
		file = filepath.Join(filepath.Dir(source), file)
	}
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("trace %s does not exist", file)
	}
	return f, err
}

// horizon is a generous bound on the end of a batch grid, for the run's
// deadline: the last submission plus ten times every job's trace walltime
// (run one after the other), at the slowest cluster's pace.
func (p *BatchPlan) horizon() time.Duration {
	var last, sum time.Duration
	slow := math.Inf(1)
	for _, c := range p.Clusters {
		slow = min(slow, c.Speed)
	}
	for _, j := range p.Jobs {
		last = max(last, j.Submit)
		sum += j.Walltime
	}
	h := float64(last) + 10*float64(sum)/max(slow, 1e-3)
	return time.Duration(min(h, MaxScenarioSeconds*float64(time.Second)))
}

// Applications and requests of a batch grid's jobs in Plan.Jobs.
const (
	BatchApp     = "swf"
	RequestGrid  = "grid"
	RequestLocal = "local"
)

// planClusters are the batch clusters as Plan.Clusters: one processor per
// node, so that a plan's node counts are its processors.
func (p *BatchPlan) planClusters() []Cluster {
	out := make([]Cluster, len(p.Clusters))
	for i, c := range p.Clusters {
		out[i] = Cluster{Name: c.Name, Nodes: c.Processors, Processors: 1, Speed: c.Speed}
	}
	return out
}

// planJobs are the trace jobs as Plan.Jobs.
func (p *BatchPlan) planJobs() []Job {
	out := make([]Job, len(p.Jobs))
	for i, j := range p.Jobs {
		req := RequestGrid
		if j.Local {
			req = RequestLocal
		}
		out[i] = Job{ID: j.ID, Submit: j.Submit, App: BatchApp, Size: j.Procs, Request: req}
	}
	return out
}
