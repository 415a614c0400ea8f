package batch

import (
	"fmt"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	policy "github.com/koala-emu/koala-emu/actors/policy/batch"
)

// Config builds a batch cluster manager.
type Config struct {
	// Name is the cluster's name, the source of its events.
	Name string
	// Capacity is the number of processors, at least 1.
	Capacity int
	// Policy plans the queue (policy.New("fcfs") or "cbf").
	Policy policy.Policy
	Env    actors.Env
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
}

type waiting struct {
	job *msg.BatchJob
	pub *msg.BatchQueued // its entry in the states sent (state)
}

// jobDone is the manager's own timer: a running job reached the end of its
// runtime (killed false) or its walltime (killed true).
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
}

// Props returns the props of a batch cluster manager. The configuration is
// checked by New; Props panics on none of it.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &manager{cfg: cfg, running: map[string]*running{}, known: map[string]bool{}}
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
	case *msg.BatchSubmit:
		m.submit(x.GetJob())
	case *msg.BatchCancel:
		m.cancel(ctx, x)
	case *jobDone:
		m.done(x)
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

func (m *manager) done(d *jobDone) {
	r, ok := m.running[d.id]
	if !ok {
		return
	}
	m.finish(d.id, r, d.killed)
	m.replan()
}

// finish takes job id off the running set and reports its end.
func (m *manager) finish(id string, r *running, killed bool) {
	r.stop()
	delete(m.running, id)
	m.busy -= int(r.job.GetProcs())
	for i, o := range m.order {
		if o == r {
			m.order = append(m.order[:i], m.order[i+1:]...)
			m.rin = append(m.rin[:i], m.rin[i+1:]...)
			break
		}
	}
	kind := msg.EventBatchEnd
	if killed {
		kind = msg.EventBatchKill
	}
	ev := m.event(kind, r.job)
	ev.Values["run_s"] = (m.now() - r.start).Seconds()
	m.cfg.Env.Emit(ev)
	end := m.cfg.Env.Event(msg.EventEnd, m.cfg.Name, id)
	end.Fields = completedFields
	if killed {
		end.Fields = killedFields
	}
	m.cfg.Env.Emit(end)
}
