package results

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// BatsimFile is the name of the Batsim-layout job table in a results
// directory.
const BatsimFile = "jobs_batsim.csv"

// BatsimColumns is the header of jobs_batsim.csv, in the order of Batsim's
// own jobs output (Batsim docs, "output-jobs": job_id ... metadata).
var BatsimColumns = []string{
	"job_id", "workload_name", "profile", "submission_time",
	"requested_number_of_resources", "requested_time", "success", "final_state",
	"starting_time", "execution_time", "finish_time", "waiting_time",
	"turnaround_time", "stretch", "consumed_energy", "allocated_resources", "metadata",
}

// Batsim final states used by the export.
const (
	BatsimSuccess  = "COMPLETED_SUCCESSFULLY"
	BatsimFailed   = "COMPLETED_FAILED"
	BatsimKilled   = "COMPLETED_KILLED"
	BatsimRejected = "REJECTED"
)

// BatsimCluster is one cluster of the platform, for the numbering of nodes
// in allocated_resources.
type BatsimCluster struct {
	Name  string
	Nodes int
}

// WriteBatsimCSV writes dir/jobs_batsim.csv: one row per job, in the order
// given, in Batsim's column layout, so that tools written for Batsim
// (evalys) read koala-emu runs. The nodes are numbered as described at
// WriteBatsimCSVPlatform, with the clusters sorted by name and each given
// as many numbers as the jobs held of it at once at most.
func WriteBatsimCSV(dir string, jobs []Job, workload string) error {
	return WriteBatsimCSVPlatform(dir, jobs, workload, nil)
}

// WriteBatsimCSVPlatform is WriteBatsimCSV with the platform's clusters in
// the order their nodes are numbered: the first cluster's nodes are 0 to
// n1-1, the next cluster's n1 to n1+n2-1, and so on (pass the scenario's
// included clusters in scenario order). A nil platform numbers the clusters
// the jobs name, sorted by name, each as large as the jobs needed at once.
//
// Columns (times in scenario seconds; an empty field is a time that never
// happened, as Batsim leaves the fields of rejected jobs empty):
//   - job_id: Job.ID; workload_name: workload; profile: Job.App.
//   - submission_time, starting_time, finish_time: Submit, Start, End.
//   - requested_number_of_resources: Job.Size (nodes).
//   - requested_time: KOALA jobs give no walltime; the job's nominal time
//     (Job.Nominal, its single-cluster execution time) stands in for it, -1
//     when unknown.
//   - final_state and success: status completed -> COMPLETED_SUCCESSFULLY
//     (success 1); a job that started and ended with status failed ->
//     COMPLETED_FAILED; a job that started and never ended (the run was cut
//     short: failed by the launcher with the interruption as its reason, or
//     still running) -> COMPLETED_KILLED; a job that never started (placement
//     failed, or still queued when the run ended) -> REJECTED, Batsim's state
//     for a job that was not executed. success is 0 for all but the first.
//   - execution_time = finish - start, waiting_time = start - submission,
//     turnaround_time = finish - submission, stretch = turnaround / execution
//     (empty when execution is 0 or unknown).
//   - consumed_energy: -1, energy is not modelled.
//   - allocated_resources: Batsim's interval set ("0-7 12-15") of the nodes
//     the job held. A Job records nodes per cluster (Components,
//     "amsterdam:8+vrije:16"), not which ones, so the export replays starts
//     and ends in time order (ends first at equal times, then the order of
//     jobs) and gives each starting job the lowest-numbered free nodes of
//     each of its clusters: allocations of concurrent jobs never overlap. A
//     killed job keeps its nodes to the end. Malleable jobs are shown at
//     their placed size. A migrated job is shown on the nodes where it
//     ended (Components), held from its placement there (Moved): the nodes
//     it left are not numbered to it.
//   - metadata: "request=...;components=...;reason=..." (empty parts left
//     out).
func WriteBatsimCSVPlatform(dir string, jobs []Job, workload string, platform []BatsimCluster) error {
	if workload == "" {
		return errors.New("batsim export: workload name is empty")
	}
	comps := make([][]batsimComponent, len(jobs))
	for i := range jobs {
		c, err := parseBatsimComponents(jobs[i].Components)
		if err != nil {
			return fmt.Errorf("batsim export: job %s: components %q: %w", jobs[i].ID, jobs[i].Components, err)
		}
		comps[i] = c
	}
	alloc, err := batsimAllocate(jobs, comps, platform)
	if err != nil {
		return fmt.Errorf("batsim export: %w", err)
	}
	l := csvLines{b: make([]byte, 0, 256+256*len(jobs))}
	l.strs(BatsimColumns...)
	l.end()
	for i := range jobs {
		batsimRow(&l, &jobs[i], workload, alloc[i])
	}
	path := filepath.Join(dir, BatsimFile)
	if err := os.WriteFile(path, l.b, 0o644); err != nil {
		return fmt.Errorf("batsim export: write %s: %w", path, err)
	}
	return nil
}

// BatsimState returns the Batsim final state of a job (see
// WriteBatsimCSVPlatform).
func BatsimState(j *Job) string {
	switch {
	case j.Status == "completed":
		return BatsimSuccess
	case j.Start < 0:
		return BatsimRejected
	case j.End < 0:
		return BatsimKilled
	default:
		return BatsimFailed
	}
}

// batsimRow appends job j's row to l.
func batsimRow(l *csvLines, j *Job, workload, alloc string) {
	state := BatsimState(j)
	success := "0"
	if state == BatsimSuccess {
		success = "1"
	}
	l.strs(j.ID, workload, j.App)
	batsimTime(l, j.Submit)
	l.int(j.Size)
	if j.Nominal > 0 {
		batsimNum(l, j.Nominal)
	} else {
		l.str("-1")
	}
	l.strs(success, state)
	for _, v := range [...]float64{j.Start, j.Exec(), j.End, j.Wait(), j.Response()} {
		batsimTime(l, v)
	}
	if exec, resp := j.Exec(), j.Response(); exec > 0 && resp >= 0 {
		batsimNum(l, resp/exec)
	} else {
		l.str("")
	}
	l.strs("-1", alloc)
	var meta []string
	for _, kv := range [][2]string{{"request", j.Request}, {"components", j.Components}, {"reason", j.Reason}} {
		if kv[1] != "" {
			meta = append(meta, kv[0]+"="+kv[1])
		}
	}
	l.str(strings.Join(meta, ";"))
	l.end()
}

// batsimTime appends a time or a duration; a negative one never happened
// (an empty field).
func batsimTime(l *csvLines, v float64) {
	if v < 0 {
		l.str("")
		return
	}
	batsimNum(l, v)
}

// batsimNum appends v rounded to the microsecond (Batsim prints 6
// decimals) in its shortest form.
func batsimNum(l *csvLines, v float64) {
	l.shortest(math.Round(v*1e6) / 1e6)
}

type batsimComponent struct {
	cluster string
	nodes   int
}

func parseBatsimComponents(s string) ([]batsimComponent, error) {
	if s == "" {
		return nil, nil
	}
	var out []batsimComponent
	for _, part := range strings.Split(s, "+") {
		name, n, ok := strings.Cut(part, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("component %q is not cluster:nodes", part)
		}
		k, err := strconv.Atoi(n)
		if err != nil || k < 0 {
			return nil, fmt.Errorf("component %q: node count is not a whole number", part)
		}
		out = append(out, batsimComponent{name, k})
	}
	return out, nil
}

// batsimAllocate numbers the nodes each started job held (see
// WriteBatsimCSVPlatform) and returns each job's interval set.
func batsimAllocate(jobs []Job, comps [][]batsimComponent, platform []BatsimCluster) ([]string, error) {
	// The clusters the components name, numbered in the order first named.
	cidx := map[string]int32{}
	var names []string
	total := 0
	for _, cs := range comps {
		for _, c := range cs {
			if _, ok := cidx[c.cluster]; !ok {
				cidx[c.cluster] = int32(len(names))
				names = append(names, c.cluster)
			}
			total += c.nodes
		}
	}
	r := batsimReplay{used: make([][]bool, len(names)), low: make([]int, len(names)), held: make([]batsimSpan, len(jobs)),
		nodes: make([]batsimNode, 0, total)}
	r.run(batsimEvents(jobs, comps), comps, cidx)
	peak := make(map[string]int, len(names))
	for c, u := range r.used {
		peak[names[c]] = len(u)
	}
	offset, err := batsimOffsets(peak, platform)
	if err != nil {
		return nil, err
	}
	off := make([]int, len(names))
	for c, n := range names {
		off[c] = offset[n]
	}
	out := make([]string, len(jobs))
	var ids []int
	var b []byte
	for i, h := range r.held {
		ids = ids[:0]
		for _, n := range r.nodes[h.from:h.to] {
			ids = append(ids, off[n.cluster]+int(n.id))
		}
		b = batsimIntervals(b[:0], ids)
		out[i] = string(b)
	}
	return out, nil
}

// batsimEvent is a job's start or end in the replay.
type batsimEvent struct {
	t     float64
	start bool
	job   int
}

// batsimEvents returns the starts and ends of the jobs that started on
// nodes, in time order: ends before starts at equal times, then the order
// of jobs.
func batsimEvents(jobs []Job, comps [][]batsimComponent) []batsimEvent {
	evs := make([]batsimEvent, 0, 2*len(jobs))
	for i := range jobs {
		if jobs[i].Start < 0 || len(comps[i]) == 0 {
			continue
		}
		evs = append(evs, batsimEvent{max(jobs[i].Start, jobs[i].Moved), true, i})
		if jobs[i].End >= 0 {
			evs = append(evs, batsimEvent{jobs[i].End, false, i})
		}
	}
	// A job has one start and one end, so the order of jobs settles every
	// tie: no sort need be stable.
	slices.SortFunc(evs, func(a, b batsimEvent) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		if a.start != b.start {
			if !a.start {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.job, b.job)
	})
	return evs
}

// batsimNode is a node a job held: its local number in a cluster.
type batsimNode struct{ cluster, id int32 }

// batsimSpan is a job's nodes in batsimReplay.nodes.
type batsimSpan struct{ from, to int }

// batsimReplay replays the starts and ends on clusters whose nodes are
// numbered 0, 1, ... locally: used[c] says which nodes of cluster c are
// held (its length is the most held at once), low[c] is at or below its
// lowest free node, and held[job] spans the nodes the job held in nodes
// (empty for a job that never started).
type batsimReplay struct {
	used  [][]bool
	low   []int
	held  []batsimSpan
	nodes []batsimNode
}

func (r *batsimReplay) run(evs []batsimEvent, comps [][]batsimComponent, cidx map[string]int32) {
	for _, e := range evs {
		h := &r.held[e.job]
		if !e.start {
			for _, n := range r.nodes[h.from:h.to] {
				r.used[n.cluster][n.id] = false
				r.low[n.cluster] = min(r.low[n.cluster], int(n.id))
			}
			continue
		}
		h.from = len(r.nodes)
		for _, comp := range comps[e.job] {
			r.take(cidx[comp.cluster], comp.nodes)
		}
		h.to = len(r.nodes)
	}
}

// take marks the lowest-numbered free nodes of cluster c used, n of them,
// adding nodes to the cluster where too few are free, and appends them to
// r.nodes.
func (r *batsimReplay) take(c int32, n int) {
	u := r.used[c]
	id := r.low[c]
	for ; n > 0; id++ {
		if id == len(u) {
			u = append(u, false)
		}
		if !u[id] {
			u[id] = true
			r.nodes = append(r.nodes, batsimNode{c, int32(id)})
			n--
		}
	}
	for id < len(u) && u[id] {
		id++
	}
	r.used[c], r.low[c] = u, id
}

// batsimOffsets returns the first global number of every cluster's nodes:
// the platform's clusters in its order, each as large as the platform says
// (an error if the jobs held more of one at once, or named a cluster it
// lacks); without a platform, the clusters of peak in name order, each as
// large as its peak.
func batsimOffsets(peak map[string]int, platform []BatsimCluster) (map[string]int, error) {
	offset := map[string]int{}
	next := 0
	if platform == nil {
		for _, c := range slices.Sorted(maps.Keys(peak)) {
			offset[c] = next
			next += peak[c]
		}
		return offset, nil
	}
	for _, c := range platform {
		offset[c.Name] = next
		next += c.Nodes
		if p := peak[c.Name]; p > c.Nodes {
			return nil, fmt.Errorf("cluster %s: jobs held %d of its %d nodes at once", c.Name, p, c.Nodes)
		}
	}
	for c := range peak {
		if _, ok := offset[c]; !ok {
			return nil, fmt.Errorf("cluster %s: named by a job, not in the platform", c)
		}
	}
	return offset, nil
}

// batsimIntervals appends node numbers to b as Batsim's interval set:
// sorted, runs as "a-b", single numbers alone, separated by spaces.
func batsimIntervals(b []byte, ids []int) []byte {
	slices.Sort(ids)
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(ids[i]), 10)
		if i != j {
			b = strconv.AppendInt(append(b, '-'), int64(ids[j]), 10)
		}
		i = j + 1
	}
	return b
}
