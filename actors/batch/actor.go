package batch

import (
	"fmt"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
	"github.com/koala-emu/koala-emu/fidelity"
)

// Config builds a batch cluster manager.
type Config struct {
	// Name is the cluster's name, the source of its events.
	Name string
	// Capacity is the number of processors, at least 1.
	Capacity int
	// Policy plans the queue (policy.New("fcfs") or "cbf").
	Policy policy.Policy
	// Execution is how a job that starts runs: on the manager's timers
	// (OnTimers, the zero value) or as processes on Nodes (OnNodes).
	Execution Execution
	// Nodes are the cluster's node actors (actors/node) under OnNodes: one
	// of one processor per processor of the cluster, Capacity of them.
	Nodes []Node
	// TimeScale is the time scale the processes run at under OnNodes
	// (apps.Params.TimeScale; <= 0 means 1).
	TimeScale float64
	Env       actors.Env
}

// Execution is how a batch cluster manager runs the jobs its plan starts.
// The plan is the same either way: the planner counts a job's processors
// busy from its start to its end or its walltime, whichever comes first.
type Execution int

const (
	// OnTimers: a job is compute-only inside the manager, which holds its
	// processors for the job's runtime on a timer of its clock and kills
	// it at its walltime if the runtime is longer; nothing runs. The sim
	// backend's: a virtual clock runs nothing real.
	OnTimers Execution = iota
	// OnNodes: a job of P processors runs as P compute-only processes
	// (apps.Compute), one on each of P node actors of the cluster (one
	// processor a node, so the planner's processors are nodes). Each
	// process computes the job's runtime at the cluster's speed; the job
	// ends when the last of its processes reports RankDone, and the
	// manager stops them (AbortRank) at its walltime, anchored at its
	// start in the plan with the emulation's own delays left out
	// (nodes.go).
	OnNodes
)

// String names the execution in errors.
func (e Execution) String() string {
	if e == OnNodes {
		return "on-nodes"
	}
	return "on-timers"
}

// Node is one node actor of a batch cluster: its name (RankReady and
// RankDone name it) and its PID.
type Node struct {
	Name string
	PID  *actor.PID
}

// StateRequest asks a manager for its state: it sends a *msg.BatchState,
// made when it handles the request, to ReplyTo. Requests are answered in
// the order they arrive, after every message sent to the manager before
// them by the same sender.
type StateRequest struct {
	ReplyTo *actor.PID
}

type running struct {
	job   *msg.BatchJob
	start time.Duration
	stop  func()
	pub   *msg.BatchRunning // its entry in the states sent (state)
	procs *processes        // OnNodes: the job's processes
}

type waiting struct {
	job *msg.BatchJob
	pub *msg.BatchQueued // its entry in the states sent (state)
}

// jobDone is the manager's own timer: a running job reached the end of its
// runtime (killed false) or the plan's walltime (killed true).
type jobDone struct {
	id     string
	killed bool
}

type manager struct {
	cfg     Config
	self    *actor.PID
	running map[string]*running
	order   []*running // the running jobs in start order (deterministic states)
	busy    int        // the processors they hold
	queue   []*waiting
	known   map[string]bool
	fields  [2]map[string]string // event's fields: origin grid, local
	placed  map[int32]map[string]string
	// The planner's inputs, kept beside order and queue (rin[i] is
	// order[i]'s, qin[i] queue[i]'s, a queued job's hold included), so that
	// a plan costs no copy of them.
	rin   []policy.Running
	qin   []policy.Queued
	plan  policy.Plan // the last plan, the next one's start
	spare policy.Plan // the plan before it, the next one's memory
	pool  *pool       // OnNodes: the node actors and whose process each runs
}

// Props returns the props of a batch cluster manager. The configuration is
// checked by New; Props panics on none of it.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		m := &manager{cfg: cfg, running: map[string]*running{}, known: map[string]bool{}}
		if cfg.Execution == OnNodes {
			m.pool = newPool(cfg.Nodes)
		}
		return m
	})
}

// Check reports what is wrong with cfg, naming the field.
func (c Config) Check() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("batch cluster: name is empty")
	case c.Capacity < 1:
		return fmt.Errorf("batch cluster %s: capacity %d is less than 1", c.Name, c.Capacity)
	case c.Policy == nil:
		return fmt.Errorf("batch cluster %s: no policy", c.Name)
	case c.Execution != OnTimers && c.Execution != OnNodes:
		return fmt.Errorf("batch cluster %s: execution %d is neither %v nor %v", c.Name, c.Execution, OnTimers, OnNodes)
	case c.Execution == OnNodes && len(c.Nodes) != c.Capacity:
		return fmt.Errorf("batch cluster %s: nodes: %d node actors for %d processors (%v runs one process a processor)",
			c.Name, len(c.Nodes), c.Capacity, OnNodes)
	}
	names := map[string]bool{}
	for i, n := range c.Nodes {
		switch {
		case n.Name == "" || n.PID == nil:
			return fmt.Errorf("batch cluster %s: nodes[%d]: no name or no PID", c.Name, i)
		case names[n.Name]:
			return fmt.Errorf("batch cluster %s: nodes[%d]: name %s given twice", c.Name, i, n.Name)
		}
		names[n.Name] = true
	}
	return nil
}

func (m *manager) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		m.self = ctx.Self()
	case *actor.Stopping:
		for _, r := range m.running {
			r.stop()
		}
		if m.pool != nil {
			m.pool.stopTimers()
		}
	case *msg.BatchSubmit:
		m.submit(x.GetJob())
	case *msg.BatchCancel:
		m.cancel(ctx, x)
	case *jobDone:
		m.done(x)
	case *msg.RankReady:
		m.ready(x)
	case *msg.RankConnected:
		m.connected(x)
	case *msg.RankDone:
		m.processDone(x)
	case *deadline:
		m.deadline(x)
	case *unlaunched:
		m.ended(x.r)
	case StateRequest:
		if x.ReplyTo != nil {
			ctx.Send(x.ReplyTo, m.state())
		}
	}
}

func (m *manager) now() time.Duration { return m.cfg.Env.Clock.Now() }

// event is a batch event of job j: its fields (cluster and origin) are
// one map per origin, shared by every event of the manager (an event is
// only read once emitted), so a caller that adds a field copies them.
func (m *manager) event(kind string, j *msg.BatchJob) *msg.Event {
	ev := m.cfg.Env.Event(kind, m.cfg.Name, j.GetId())
	if m.fields[0] == nil {
		m.fields[0] = map[string]string{"cluster": m.cfg.Name, "origin": "grid"}
		m.fields[1] = map[string]string{"cluster": m.cfg.Name, "origin": "local"}
	}
	ev.Fields = m.fields[0]
	if j.GetLocal() {
		ev.Fields = m.fields[1]
	}
	ev.Values = map[string]float64{"procs": float64(j.GetProcs())}
	return ev
}

// The fields of the end events of jobs completed and killed, and the
// values of a placed event, the same for every job: shared, read only.
var (
	completedFields = map[string]string{"status": "completed"}
	killedFields    = map[string]string{"status": "failed", "cause": msg.CauseWalltime, "reason": "killed at its walltime"}
	placedValues    = map[string]float64{"clusters": 1, "tries": 1}
)

func (m *manager) submit(j *msg.BatchJob) {
	if reason := m.refuse(j); reason != "" {
		ev := m.event(msg.EventBatchRefused, j)
		ev.Fields = maps.Clone(ev.Fields)
		ev.Fields["reason"] = reason
		m.cfg.Env.Emit(ev)
		if reason != RefuseDuplicate { // a duplicate's record belongs to the first
			end := m.cfg.Env.Event(msg.EventEnd, m.cfg.Name, j.GetId())
			end.Fields = map[string]string{"status": "failed", "cause": msg.CauseRefused, "reason": reason}
			m.cfg.Env.Emit(end)
		}
		return
	}
	m.known[j.GetId()] = true
	m.queue = append(m.queue, &waiting{job: j})
	m.qin = append(m.qin, policy.Queued{ID: j.GetId(), Procs: int(j.GetProcs()), Walltime: time.Duration(j.GetWalltimeNs())})
	ev := m.event(msg.EventBatchQueued, j)
	ev.Values["walltime_s"] = time.Duration(j.GetWalltimeNs()).Seconds()
	ev.Values["runtime_s"] = time.Duration(j.GetRuntimeNs()).Seconds()
	m.cfg.Env.Emit(ev)
	m.replan()
}

// Refusal reasons of EventBatchRefused.
const (
	RefuseDuplicate = "duplicate job id"
	RefuseProcs     = "processors out of range"
	RefuseTimes     = "walltime or runtime not positive"
)

func (m *manager) refuse(j *msg.BatchJob) string {
	switch {
	case j.GetId() == "" || m.known[j.GetId()]:
		return RefuseDuplicate
	case j.GetProcs() < 1 || int(j.GetProcs()) > m.cfg.Capacity:
		return RefuseProcs
	case j.GetWalltimeNs() <= 0 || j.GetRuntimeNs() <= 0:
		return RefuseTimes
	}
	return ""
}

func (m *manager) cancel(ctx actor.Context, c *msg.BatchCancel) {
	drop := map[string]bool{}
	for _, id := range c.GetJobIds() {
		drop[id] = true
	}
	var done []string
	kept, keptIn := m.queue[:0], m.qin[:0]
	for i, w := range m.queue {
		if drop[w.job.GetId()] {
			done = append(done, w.job.GetId())
			delete(m.known, w.job.GetId()) // it may come back later
			m.cfg.Env.Emit(m.event(msg.EventBatchCancel, w.job))
			continue
		}
		kept, keptIn = append(kept, w), append(keptIn, m.qin[i])
	}
	clear(m.queue[len(kept):])
	m.queue, m.qin = kept, keptIn
	if len(done) > 0 {
		m.replan()
	}
	if to := c.GetReplyTo().PID(); to != nil {
		ctx.Send(to, &msg.BatchCancelled{Cluster: m.cfg.Name, JobIds: done, Tag: c.GetTag()})
	}
}

// done is a job's timer: the end of its runtime (OnTimers) or its walltime.
func (m *manager) done(d *jobDone) {
	r, ok := m.running[d.id]
	if !ok {
		return
	}
	if d.killed {
		m.walltime(r)
	} else {
		m.finish(r, ending{})
	}
	m.replan()
}

// walltime is the plan's walltime of a running job (policy.KillTime of its
// start): the plan counts its processors free from now. OnTimers the job
// is killed now; OnNodes its processes keep the walltime counted from
// their own start (nodes.go), and it ends when they have reported.
func (m *manager) walltime(r *running) {
	if m.pool == nil {
		m.finish(r, ending{killed: true})
		return
	}
	m.release(r)
}

// finish takes a job off the running set and reports its end.
func (m *manager) finish(r *running, how ending) {
	m.release(r)
	m.end(r, how)
}

// release takes a job off the running set, if it is still on it: the plan
// counts its processors free from now.
func (m *manager) release(r *running) {
	if m.running[r.job.GetId()] != r {
		return
	}
	r.stop()
	delete(m.running, r.job.GetId())
	m.busy -= int(r.job.GetProcs())
	for i, o := range m.order {
		if o == r {
			m.order = append(m.order[:i], m.order[i+1:]...)
			m.rin = append(m.rin[:i], m.rin[i+1:]...)
			break
		}
	}
}

// ending is how a job ended: completed (the zero value), killed at its
// walltime, or failed (a process reported an error).
type ending struct {
	killed  bool
	note    string // why a job was killed, beyond its walltime
	failure string
	// fidelity is the job's processes' fidelity figures merged (OnNodes).
	fidelity string
}

// end reports a job's end.
func (m *manager) end(r *running, how ending) {
	kind := msg.EventBatchEnd
	if how.killed {
		kind = msg.EventBatchKill
	}
	ev := m.event(kind, r.job)
	ev.Values["run_s"] = (m.now() - r.start).Seconds()
	m.cfg.Env.Emit(ev)
	end := m.cfg.Env.Event(msg.EventEnd, m.cfg.Name, r.job.GetId())
	switch {
	case how.killed:
		end.Fields = killedFields
	case how.failure != "":
		end.Fields = map[string]string{"status": "failed", "cause": msg.FailureCause_FAILURE_RANK.Name(), "reason": how.failure}
	default:
		end.Fields = completedFields
	}
	if how.note != "" || how.fidelity != "" {
		end.Fields = maps.Clone(end.Fields) // the shared maps are read only
		if how.note != "" {
			end.Fields["reason"] += ": " + how.note
		}
		if how.fidelity != "" {
			end.Fields[fidelity.EventField] = how.fidelity
		}
	}
	m.cfg.Env.Emit(end)
}
