package realloc

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	abatch "github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
)

// ServerConfig builds the server of one batch cluster.
type ServerConfig struct {
	Cluster Cluster
	// Policy is the cluster's batch policy, for estimates.
	Policy batch.Policy
	// Batch is the cluster's manager (actors/batch).
	Batch *actor.PID
	Env   actors.Env
}

// A server asks its cluster for the cluster's state (abatch.StateRequest)
// for every estimate and every state request it is sent, and answers each
// when its state comes: the manager answers in order, after the
// submissions and cancellations the server forwarded before asking, so an
// answer never misses what this server sent its cluster before it.
type server struct {
	cfg     ServerConfig
	waiting []any // the estimates and state requests asked for, in order
}

// ServerProps returns the props of a server.
func ServerProps(cfg ServerConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &server{cfg: cfg}
	})
}

func (s *server) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.ServerEstimate, *msg.ServerStateRequest:
		s.waiting = append(s.waiting, x)
		ctx.Send(s.cfg.Batch, abatch.StateRequest{ReplyTo: ctx.Self()})
	case *msg.BatchState:
		if len(s.waiting) == 0 {
			return
		}
		w := s.waiting[0]
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
		s.answer(ctx, w, x)
	case *msg.ServerSubmit:
		ctx.Send(s.cfg.Batch, &msg.BatchSubmit{Job: x.GetJob()})
	case *msg.ServerCancel:
		ctx.Send(s.cfg.Batch, &msg.BatchCancel{JobIds: x.GetJobIds(), ReplyTo: x.GetReplyTo(), Tag: x.GetTag()})
	}
}

// answer answers an estimate or a state request with the state asked for
// it.
func (s *server) answer(ctx actor.Context, w any, state *msg.BatchState) {
	switch x := w.(type) {
	case *msg.ServerEstimate:
		if to := x.GetReplyTo().PID(); to != nil {
			ctx.Send(to, s.estimate(state, x.GetJob()))
		}
	case *msg.ServerStateRequest:
		if to := x.GetReplyTo().PID(); to != nil {
			ctx.Send(to, state)
		}
	}
}

// estimate sizes job on the cluster's state, planned now.
func (s *server) estimate(state *msg.BatchState, job *msg.GridJob) *msg.ServerEstimateReply {
	out := &msg.ServerEstimateReply{Cluster: s.cfg.Cluster.Name, JobId: job.GetId()}
	run, queue := snapshot(state)
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
