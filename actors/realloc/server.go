package realloc

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
)

// ServerConfig builds the server of one batch cluster.
type ServerConfig struct {
	Cluster Cluster
	// Policy is the cluster's batch policy, for estimates.
	Policy batch.Policy
	// Batch is the cluster's manager (actors/batch), which must list the
	// server among its observers.
	Batch *actor.PID
	Env   actors.Env
}

type server struct {
	cfg   ServerConfig
	state *msg.BatchState
}

// ServerProps returns the props of a server.
func ServerProps(cfg ServerConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &server{cfg: cfg, state: &msg.BatchState{Cluster: cfg.Cluster.Name, Capacity: int32(cfg.Cluster.Capacity)}}
	})
}

func (s *server) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.BatchState:
		s.state = x
	case *msg.ServerEstimate:
		if to := x.GetReplyTo().PID(); to != nil {
			ctx.Send(to, s.estimate(x.GetJob()))
		}
	case *msg.ServerSubmit:
		ctx.Send(s.cfg.Batch, &msg.BatchSubmit{Job: x.GetJob()})
	case *msg.ServerCancel:
		ctx.Send(s.cfg.Batch, &msg.BatchCancel{JobIds: x.GetJobIds(), ReplyTo: x.GetReplyTo(), Tag: x.GetTag()})
	case *msg.ServerStateRequest:
		if to := x.GetReplyTo().PID(); to != nil {
			ctx.Send(to, s.state)
		}
	}
}

// estimate sizes job on the cluster's latest state, planned now.
func (s *server) estimate(job *msg.GridJob) *msg.ServerEstimateReply {
	out := &msg.ServerEstimateReply{Cluster: s.cfg.Cluster.Name, JobId: job.GetId()}
	run, queue := snapshot(s.state)
	plan, err := s.cfg.Policy.Schedule(s.cfg.Env.Clock.Now(), s.cfg.Cluster.Capacity, run, queue)
	if err != nil {
		out.Reason = err.Error()
		return out
	}
	sz, err := SizeOn(plan, s.cfg.Cluster, job)
	if err != nil {
		out.Reason = err.Error()
		return out
	}
	out.Ok, out.Procs = true, int32(sz.Procs)
	out.WalltimeNs, out.RuntimeNs, out.CompletionNs = int64(sz.Walltime), int64(sz.Runtime), int64(sz.Completion)
	return out
}
