package realloc

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
)

// DefaultPeriod is the time between two reallocations (SPEC §5: every hour).
const DefaultPeriod = time.Hour

// AgentConfig builds the agent.
type AgentConfig struct {
	// Clusters and Servers are in cluster order: Servers[i] fronts
	// Clusters[i].
	Clusters []Cluster
	Servers  []*actor.PID
	// Policy is the clusters' batch policy, for the estimates of a
	// reallocation.
	Policy batch.Policy
	// Mode names the reallocation algorithm ("regular", "all-cancellation");
	// "" or "none" maps jobs without ever reallocating them.
	Mode string
	// Heuristic names the heuristic ("mct", "minmin").
	Heuristic string
	// Period is the time between reallocations; 0 means DefaultPeriod.
	Period time.Duration
	// Threshold is the regular algorithm's least improvement; 0 means 60 s.
	Threshold time.Duration
	Env       actors.Env
}

// Agent phases: mapping jobs as they come, or inside a reallocation.
const (
	phaseIdle = iota
	phaseStates
	phaseCancel
)

type agent struct {
	cfg       AgentConfig
	self      *actor.PID
	algorithm rp.Algorithm
	heuristic rp.Heuristic
	stop      func()

	jobs    map[string]*msg.GridJob               // every grid job mapped
	where   map[string]int                        // cluster of each mapped job
	pending map[string][]*msg.ServerEstimateReply // estimates gathered, by job
	order   []string                              // jobs whose estimates are pending, in arrival order

	phase    int
	round    int64
	deferred []*msg.GridJob // arrivals during a reallocation
	states   []*msg.BatchState
	got      int
	moves    []rp.Move
	chosen   map[string]rp.Sized
	left     int
	done     map[string]bool // jobs whose cancellation succeeded
	waiting  int
}

type tick struct{}

// reasonDuplicate is the agent's refusal of a job ID it knows already.
const reasonDuplicate = "duplicate job id"

// AgentProps returns the props of the agent, or an error naming what is
// wrong in cfg.
func AgentProps(cfg AgentConfig) (*actor.Props, error) {
	if len(cfg.Clusters) == 0 || len(cfg.Clusters) != len(cfg.Servers) {
		return nil, fmt.Errorf("agent: %d clusters for %d servers", len(cfg.Clusters), len(cfg.Servers))
	}
	if cfg.Policy == nil {
		return nil, fmt.Errorf("agent: no batch policy")
	}
	var alg rp.Algorithm
	var h rp.Heuristic
	if cfg.Mode != "" && cfg.Mode != "none" {
		var err error
		if alg, err = rp.NewAlgorithm(cfg.Mode); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		if h, err = rp.NewHeuristic(cfg.Heuristic); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &agent{cfg: cfg, algorithm: alg, heuristic: h, jobs: map[string]*msg.GridJob{}, where: map[string]int{},
			pending: map[string][]*msg.ServerEstimateReply{}}
	}), nil
}

func (a *agent) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		if a.algorithm != nil {
			a.stop = a.cfg.Env.Every(a.cfg.Period, a.self, func() interface{} { return &tick{} })
		}
	case *actor.Stopping:
		if a.stop != nil {
			a.stop()
		}
	case *msg.AgentSubmit:
		if a.phase != phaseIdle {
			a.deferred = append(a.deferred, x.GetJob())
			return
		}
		a.request(ctx, x.GetJob())
	case *msg.ServerEstimateReply:
		a.estimated(ctx, x)
	case *tick:
		a.startRound(ctx)
	case *msg.BatchState:
		a.gotState(ctx, x)
	case *msg.BatchCancelled:
		a.cancelled(ctx, x)
	}
}

// request asks every server for the job's estimate.
func (a *agent) request(ctx actor.Context, j *msg.GridJob) {
	if _, dup := a.jobs[j.GetId()]; dup {
		a.fail(j.GetId(), reasonDuplicate)
		return
	}
	if _, dup := a.pending[j.GetId()]; dup {
		a.fail(j.GetId(), reasonDuplicate)
		return
	}
	a.pending[j.GetId()] = nil
	a.jobs[j.GetId()] = j
	for _, s := range a.cfg.Servers {
		ctx.Send(s, &msg.ServerEstimate{Job: j, ReplyTo: msg.FromPID(a.self)})
	}
}

// estimated gathers one server's estimate; with every server's in, the job
// goes to the one of minimum completion time (MCT).
func (a *agent) estimated(ctx actor.Context, r *msg.ServerEstimateReply) {
	id := r.GetJobId()
	got, ok := a.pending[id]
	if !ok {
		return
	}
	got = append(got, r)
	if len(got) < len(a.cfg.Servers) {
		a.pending[id] = got
		return
	}
	delete(a.pending, id)
	est := make([]rp.Estimate, len(a.cfg.Clusters))
	byCluster := make([]*msg.ServerEstimateReply, len(a.cfg.Clusters))
	for _, e := range got {
		for i, c := range a.cfg.Clusters {
			if c.Name == e.GetCluster() {
				est[i] = rp.Estimate{Completion: time.Duration(e.GetCompletionNs()), OK: e.GetOk()}
				byCluster[i] = e
			}
		}
	}
	best, ok := rp.MinCompletion(est)
	if !ok {
		delete(a.jobs, id)
		a.fail(id, "no cluster can run the job")
		return
	}
	e := byCluster[best]
	j := a.jobs[id]
	a.where[id] = best
	ctx.Send(a.cfg.Servers[best], &msg.ServerSubmit{Job: &msg.BatchJob{Id: id, Procs: e.GetProcs(), WalltimeNs: e.GetWalltimeNs(),
		RuntimeNs: e.GetRuntimeNs(), SubmitNs: j.GetSubmitNs()}})
	ev := a.cfg.Env.Event(msg.EventAgentMap, "agent", id)
	ev.Fields = map[string]string{"cluster": a.cfg.Clusters[best].Name, "type": j.GetJobType()}
	ev.Values = map[string]float64{"procs": float64(e.GetProcs()), "completion_s": time.Duration(e.GetCompletionNs()).Seconds()}
	a.cfg.Env.Emit(ev)
}

func (a *agent) fail(id, reason string) {
	ev := a.cfg.Env.Event(msg.EventAgentFailed, "agent", id)
	ev.Fields = map[string]string{"reason": reason}
	a.cfg.Env.Emit(ev)
	if reason != reasonDuplicate { // a duplicate's record belongs to the first
		end := a.cfg.Env.Event(msg.EventEnd, "agent", id)
		end.Fields = map[string]string{"status": "failed", "cause": msg.CauseRefused, "reason": reason}
		a.cfg.Env.Emit(end)
	}
}
