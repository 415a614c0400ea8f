package node

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Config builds a node actor.
type Config struct {
	Name       string
	Cluster    string
	Speed      float64 // relative compute rate of the cluster
	Processors int
	Dilation   float64
	Egress     netem.Egress
	ListenHost string // address ranks listen on, e.g. 127.0.0.1
	Env        actors.Env
}

type rank struct {
	job     string
	rank    int32
	runner  *actor.PID
	app     apps.App
	params  apps.Params
	ep      *comm.Endpoint
	ctx     context.Context
	cancel  context.CancelFunc
	running bool // the rank's goroutine owns reporting
}

type rankFinished struct{ job string }

type node struct {
	cfg Config
	cur *rank
}

// Props returns the props of a node actor.
func Props(cfg Config) *actor.Props {
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.Egress == nil {
		cfg.Egress = netem.Passthrough{}
	}
	return actor.PropsFromProducer(func() actor.Actor { return &node{cfg: cfg} })
}

func (n *node) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.StartRank:
		n.start(ctx, x)
	case *msg.RankTable:
		n.run(ctx, x)
	case *msg.AbortRank:
		n.abort(ctx, x)
	case *rankFinished:
		if n.cur != nil && n.cur.job == x.job {
			n.cur = nil
		}
	case *actor.Stopping:
		if n.cur != nil {
			n.cur.cancel()
			_ = n.cur.ep.Close() // the rank's goroutine reports the failure
		}
	}
}

func (n *node) start(ctx actor.Context, s *msg.StartRank) {
	reply := &msg.RankReady{JobId: s.JobId, Rank: s.Rank, Node: n.cfg.Name}
	runner := s.Runner.PID()
	if n.cur != nil {
		reply.Error = fmt.Sprintf("node %s is busy with job %s", n.cfg.Name, n.cur.job)
		ctx.Send(runner, reply)
		return
	}
	app, err := apps.Lookup(s.App)
	if err != nil {
		reply.Error = err.Error()
		ctx.Send(runner, reply)
		return
	}
	rctx, cancel := context.WithCancel(context.Background())
	ep, err := comm.Listen(rctx, comm.Options{
		JobID: s.JobId, Rank: int(s.Rank), Cluster: n.cfg.Cluster,
		Speed: n.cfg.Speed, Processors: n.cfg.Processors, Dilation: n.cfg.Dilation,
		Egress: n.cfg.Egress,
	}, n.cfg.ListenHost+":0")
	if err != nil {
		cancel()
		reply.Error = fmt.Sprintf("node %s: listen: %v", n.cfg.Name, err)
		ctx.Send(runner, reply)
		return
	}
	n.cur = &rank{job: s.JobId, rank: s.Rank, runner: runner, app: app, ep: ep, ctx: rctx, cancel: cancel,
		params: apps.Params{TimeScale: s.TimeScale, Args: s.Args}}
	reply.Addr = ep.Addr()
	ctx.Send(runner, reply)
}

func (n *node) run(ctx actor.Context, t *msg.RankTable) {
	r := n.cur
	if r == nil || r.job != t.JobId {
		return
	}
	peers := make([]comm.Peer, len(t.Peers))
	for i, p := range t.Peers {
		peers[i] = comm.Peer{Rank: int(p.Rank), Addr: p.Addr, Cluster: p.Cluster}
	}
	self, root, name := ctx.Self(), n.cfg.Env.System.Root, n.cfg.Name
	r.running = true
	go func() {
		done := &msg.RankDone{JobId: r.job, Rank: r.rank, Node: name}
		defer func() {
			r.cancel()
			if err := r.ep.Close(); err != nil && done.Error == "" {
				done.Error = "close endpoint: " + err.Error()
			}
			root.Send(r.runner, done)
			root.Send(self, &rankFinished{job: r.job})
		}()
		c, err := r.ep.Connect(r.ctx, peers)
		if err != nil {
			done.Error = fmt.Sprintf("connect: %v", err)
			return
		}
		defer c.Close()
		root.Send(r.runner, &msg.RankConnected{JobId: r.job, Rank: r.rank})
		res, err := r.app.Run(r.ctx, c, r.params)
		st := c.Stats()
		done.BytesSent, done.MsgsSent = st.BytesSent, st.MsgsSent
		done.ComputeS, done.CommS = st.ComputeTime.Seconds(), st.CommTime.Seconds()
		if err != nil {
			done.Error = err.Error()
			return
		}
		done.Ok, done.Value, done.Iterations = true, res.Value, int32(res.Iterations)
	}()
}

// abort stops the current rank of a job. A running rank reports RankDone
// itself once its context ends; a rank still waiting for its table is closed
// and reported here.
func (n *node) abort(ctx actor.Context, a *msg.AbortRank) {
	r := n.cur
	if r == nil || r.job != a.JobId {
		return
	}
	r.cancel()
	if r.running {
		return
	}
	done := &msg.RankDone{JobId: r.job, Rank: r.rank, Node: n.cfg.Name, Error: "aborted: " + a.Reason}
	if err := r.ep.Close(); err != nil {
		done.Error += "; close endpoint: " + err.Error()
	}
	ctx.Send(r.runner, done)
	n.cur = nil
}
