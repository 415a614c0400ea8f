package wiring

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	abatch "github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
	"github.com/koala-emu/koala-emu/actors/realloc"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Actor names of a batch grid.
const ActorAgent = "agent"

// BatchActor and ServerActor name a batch cluster's manager and server.
func BatchActor(cluster string) string  { return "batch-" + cluster }
func ServerActor(cluster string) string { return "server-" + cluster }

// BatchSpawn spawns one role actor of a batch grid (the backend's way: on
// the simulation's runtime, or plainly in one process).
type BatchSpawn func(props *actor.Props, name string) (*actor.PID, error)

// BatchAt runs f at scenario instant at (the backend's clock: an event of
// the virtual clock, or a scaled timer).
type BatchAt func(at time.Duration, f func())

// BatchHost is what a backend tells StartBatch: where the grid's actors
// live (Spawn), how it keeps time (At), and whether that time is a
// virtual clock's.
type BatchHost struct {
	Spawn BatchSpawn
	At    BatchAt
	// Virtual says the backend's clock is virtual (sim): it jumps from
	// event to event, and nothing real runs on it.
	Virtual bool
}

// Execution is how the host's batch clusters run their jobs, chosen here
// for every backend: as compute-only processes on node actors of their
// cluster (abatch.OnNodes, one node of one processor per processor),
// except on a virtual clock, where each manager holds a job's processors
// for its runtime on a timer of that clock (abatch.OnTimers). On a
// virtual clock a process cannot compute (Comm.Compute waits on the wall
// clock), a simulated node would only predict the runtime the manager
// already knows, and the processes' messages (four a process; about
// 600,000 processes in a month of the three traces) would only slow the
// simulation down and change nothing in its results.
func (h BatchHost) Execution() abatch.Execution {
	if h.Virtual {
		return abatch.OnTimers
	}
	return abatch.OnNodes
}

// StartBatch is the one place a batch grid (plan.Batch, SPEC §5) is built,
// on every backend that runs one: per cluster, its node actors (under
// abatch.OnNodes, BatchHost.Execution), its batch cluster manager and its
// server; the agent; and every trace job's submission at its time (a
// local job straight to the cluster its trace feeds, the others to the
// agent, each with the moldable type drawn from the seed and the job's
// ID). The recorder must already run under env.Recorder.
func StartBatch(env actors.Env, plan *scenarios.Plan, host BatchHost) error {
	b := plan.Batch
	if b == nil {
		return fmt.Errorf("batch grid: the plan has none")
	}
	pol, err := batch.New(b.Policy)
	if err != nil {
		return fmt.Errorf("batch.policy: %w", err)
	}
	clusters := make([]realloc.Cluster, len(b.Clusters))
	batches := map[string]*actor.PID{}
	var servers []*actor.PID
	for i, c := range b.Clusters {
		clusters[i] = realloc.Cluster{Name: c.Name, Capacity: c.Processors, Speed: c.Speed}
		if batches[c.Name], err = spawnBatchCluster(env, plan, host, pol, c); err != nil {
			return err
		}
		s, err := host.Spawn(realloc.ServerProps(realloc.ServerConfig{Cluster: clusters[i], Policy: pol, Batch: batches[c.Name], Env: env}), ServerActor(c.Name))
		if err != nil {
			return fmt.Errorf("spawn %s: %w", ServerActor(c.Name), err)
		}
		servers = append(servers, s)
	}
	props, err := realloc.AgentProps(realloc.AgentConfig{Clusters: clusters, Servers: servers, Policy: pol, Mode: b.Mode,
		Heuristic: b.Heuristic, Period: b.Period, Threshold: b.Threshold, Env: env})
	if err != nil {
		return fmt.Errorf("batch.realloc: %w", err)
	}
	agent, err := host.Spawn(props, ActorAgent)
	if err != nil {
		return fmt.Errorf("spawn %s: %w", ActorAgent, err)
	}
	fields := map[submitKey]map[string]string{}
	for _, j := range b.Jobs {
		m, to, err := batchSubmission(plan, j, clusters, batches, agent)
		if err != nil {
			return err
		}
		k := submitKey{j.Local, j.Cluster}
		if fields[k] == nil {
			fields[k] = submitFields(j)
		}
		f := fields[k]
		host.At(j.Submit, func() {
			ev := env.Event(msg.EventSubmit, "launcher", j.ID)
			ev.Fields, ev.Values = f, map[string]float64{"size": float64(j.Procs)}
			env.Emit(ev)
			env.System.Root.Send(to, m)
		})
	}
	return nil
}

// spawnBatchCluster spawns a batch cluster's node actors (under
// abatch.OnNodes: one of one processor per processor, named as every
// backend names nodes, computing at the cluster's speed; they send
// nothing, so they have no links) and its manager, and returns the
// manager.
func spawnBatchCluster(env actors.Env, plan *scenarios.Plan, host BatchHost, pol batch.Policy, c scenarios.BatchCluster) (*actor.PID, error) {
	cfg := abatch.Config{Name: c.Name, Capacity: c.Processors, Policy: pol, Execution: host.Execution(), TimeScale: plan.TimeScale, Env: env}
	if cfg.Execution == abatch.OnNodes {
		for i := range c.Processors {
			name := NodeName(c.Name, i)
			pid, err := host.Spawn(node.Props(node.Config{Name: name, Cluster: c.Name, Speed: c.Speed, Processors: 1,
				Dilation: plan.Dilation, Env: env}), NodeActor(name))
			if err != nil {
				return nil, fmt.Errorf("spawn %s: %w", NodeActor(name), err)
			}
			cfg.Nodes = append(cfg.Nodes, abatch.Node{Name: name, PID: pid})
		}
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	pid, err := host.Spawn(abatch.Props(cfg), BatchActor(c.Name))
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", BatchActor(c.Name), err)
	}
	return pid, nil
}

// submitKey is what a trace job's submit event's fields depend on: they
// are one map for every job of the same key (an event is only read once
// emitted).
type submitKey struct {
	local   bool
	cluster string
}

// batchSubmission is the message submitting trace job j and its receiver.
func batchSubmission(plan *scenarios.Plan, j scenarios.BatchJob, clusters []realloc.Cluster, batches map[string]*actor.PID, agent *actor.PID) (any, *actor.PID, error) {
	typ := JobType(plan.Seed, j.ID)
	if !j.Local {
		return &msg.AgentSubmit{Job: &msg.GridJob{Id: j.ID, TraceProcs: int32(j.Procs), TraceWalltimeNs: int64(j.Walltime),
			TraceRuntimeNs: int64(j.Runtime), SubmitNs: int64(j.Submit), JobType: typ.Name}}, agent, nil
	}
	speed := 1.0
	for _, c := range clusters {
		if c.Name == j.Cluster {
			speed = c.Speed
		}
	}
	w, r, err := rp.Shape(rp.TraceJob{Procs: j.Procs, Walltime: j.Walltime, Runtime: j.Runtime}, typ, speed, j.Procs)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	return &msg.BatchSubmit{Job: &msg.BatchJob{Id: j.ID, Procs: int32(j.Procs), WalltimeNs: int64(w), RuntimeNs: int64(r),
		SubmitNs: int64(j.Submit), Local: true}}, batches[j.Cluster], nil
}

// JobType is the moldable type of a trace job, drawn from the run's seed
// and the job's ID (so it does not depend on which other jobs are replayed).
func JobType(seed int64, id string) rp.JobType {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return rp.DrawType(rp.JobSeed(uint64(seed), h.Sum64()))
}

// submitFields are the fields of trace job j's submit event.
func submitFields(j scenarios.BatchJob) map[string]string {
	req := scenarios.RequestGrid
	if j.Local {
		req = scenarios.RequestLocal
	}
	return map[string]string{"app": scenarios.BatchApp, "request": req, "cluster": j.Cluster}
}

// BatchBooks are the books of a batch grid run, in results.json's extra
// "batch": every trace job of the replayed windows is submitted (completed,
// killed at its walltime, refused, or unfinished when the run was cut
// short) or skipped with a counted reason.
type BatchBooks struct {
	WindowJobs int            `json:"window_jobs"`
	Skipped    int            `json:"skipped"`
	SkippedBy  map[string]int `json:"skipped_by_reason"`
	Submitted  int            `json:"submitted"`
	Grid       int            `json:"grid"`
	Local      int            `json:"local"`
	Completed  int            `json:"completed"`
	Killed     int            `json:"killed_at_walltime"`
	Refused    int            `json:"refused"`
	Unfinished int            `json:"unfinished"`
	// Reallocations counts the moves that changed a job's cluster
	// (realloc_move events); Rounds the reallocation rounds.
	Reallocations int                    `json:"reallocations"`
	Rounds        int                    `json:"realloc_rounds"`
	Traces        []scenarios.TraceBooks `json:"traces"`
	Balanced      bool                   `json:"balanced"`
}

// NewBatchBooks closes the books of a batch grid from the job records and
// the recorder's event counts (count).
func NewBatchBooks(plan *scenarios.Plan, jobs []results.Job, count func(kind string) int) *BatchBooks {
	b := &BatchBooks{SkippedBy: map[string]int{}, Traces: plan.Batch.Traces, Submitted: len(plan.Jobs),
		Reallocations: count(msg.EventReallocMove), Rounds: count(msg.EventReallocRound)}
	for _, t := range plan.Batch.Traces {
		b.WindowJobs += t.Window
		for r, n := range t.Skipped {
			b.SkippedBy[r] += n
			b.Skipped += n
		}
	}
	for _, j := range plan.Batch.Jobs {
		if j.Local {
			b.Local++
		} else {
			b.Grid++
		}
	}
	for _, j := range jobs {
		switch {
		case j.Status == "completed":
			b.Completed++
		case j.Cause == msg.CauseWalltime:
			b.Killed++
		case j.Cause == msg.CauseRefused:
			b.Refused++
		default:
			b.Unfinished++
		}
	}
	b.Unfinished += b.Submitted - len(jobs)
	b.Balanced = b.WindowJobs == b.Submitted+b.Skipped && b.Submitted == b.Completed+b.Killed+b.Refused+b.Unfinished && b.Unfinished == 0
	return b
}
