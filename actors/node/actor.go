package node

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
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
	// Links is the scenario's link matrix (undilated). Every rank measures
	// its frames' lateness against its cluster's row of it and its
	// computations' stretch (package fidelity), and prices its job's
	// one-off phase on the whole (comm.Options.Links). Zero: the ranks
	// measure computation only and price nothing.
	Links      netem.Matrix
	ListenHost string // address ranks listen on, e.g. 127.0.0.1
	Env        actors.Env
}

type rank struct {
	job     string
	rank    int32
	runner  *actor.PID
	app     apps.App
	params  apps.Params
	probe   *fidelity.Probe
	ep      *comm.Endpoint
	ctx     context.Context
	cancel  context.CancelFunc
	running bool          // the rank's goroutine owns reporting
	ctl     *apps.Control // a malleable application's resize control
	stop    atomic.Bool   // a checkpointable rank stops at its next safe point
	restart *msg.RankRestart
}

type rankFinished struct{ r *rank }

type node struct {
	cfg     Config
	targets map[string]netem.Link // the node's row of cfg.Links (nil without it)
	cur     *rank
	load    *comm.Load // the node's competing load; every rank it runs computes under it
	depot   *depot     // the node's checkpoints (SRS)
}

// Props returns the props of a node actor.
func Props(cfg Config) *actor.Props {
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.Egress == nil {
		cfg.Egress = netem.Passthrough{}
	}
	var targets map[string]netem.Link
	if plan, err := cfg.Links.PlanFor(cfg.Name, cfg.Cluster); err == nil {
		targets = plan.To
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &node{cfg: cfg, targets: targets, load: comm.NewLoad(), depot: &depot{egress: cfg.Egress}}
	})
}

func (n *node) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.StartRank:
		n.start(ctx, x)
	case *msg.RankTable:
		n.run(ctx, x)
	case *msg.AbortRank:
		n.abort(ctx, x)
	case *msg.ResizeRanks:
		n.resize(ctx, x)
	case *msg.NodeLoad:
		n.setLoad(x)
	case *msg.StopRank:
		if n.cur != nil && n.cur.job == x.JobId {
			n.cur.stop.Store(true)
		}
	case *msg.RankRestart:
		if n.cur != nil && n.cur.job == x.JobId && !n.cur.running {
			n.cur.restart = x
		}
	case *rankFinished:
		// Matched on the rank itself: a late notice of an earlier rank of
		// the same job must not free a newer one.
		if n.cur == x.r {
			n.cur = nil
		}
	case *actor.Stopping:
		if n.cur != nil {
			n.cur.cancel()
			_ = n.cur.ep.Close() // the rank's goroutine reports the failure
		}
	case *actor.Stopped:
		n.depot.close()
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
	probe := fidelity.NewProbe()
	ep, err := comm.Listen(rctx, comm.Options{
		JobID: s.JobId, Rank: int(s.Rank), Cluster: n.cfg.Cluster,
		Speed: n.cfg.Speed, Processors: n.cfg.Processors, Dilation: n.cfg.Dilation,
		Egress: n.cfg.Egress, Targets: n.targets, Links: n.cfg.Links, Probe: probe, Load: n.load,
	}, n.cfg.ListenHost+":0")
	if err != nil {
		cancel()
		reply.Error = fmt.Sprintf("node %s: listen: %v", n.cfg.Name, err)
		ctx.Send(runner, reply)
		return
	}
	n.cur = &rank{job: s.JobId, rank: s.Rank, runner: runner, app: app, ep: ep, ctx: rctx, cancel: cancel, probe: probe,
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
	if _, ok := r.app.(apps.Malleable); ok {
		r.ctl = n.control(r)
	}
	go func() {
		done := &msg.RankDone{JobId: r.job, Rank: r.rank, Node: name}
		defer r.finish(root, self, done)
		c, err := r.ep.Connect(r.ctx, peers)
		if err != nil {
			done.Error = fmt.Sprintf("connect: %v", err)
			return
		}
		defer c.Close()
		// The connections the application names open now: the job starts
		// (every rank connected) with its set-up done, as an MPI job's.
		if err := apps.ConnectPeers(r.ctx, r.app, c, r.params); err != nil {
			done.Error = fmt.Sprintf("connect: %v", err)
			c.Abort(err)
			return
		}
		root.Send(r.runner, &msg.RankConnected{JobId: r.job, Rank: r.rank})
		var res apps.Result
		if m, ok := r.app.(apps.Malleable); ok {
			res, err = m.RunMalleable(r.ctx, c, r.params, r.ctl, nil)
		} else if cp, ok := r.app.(apps.Checkpointable); ok {
			res, err = cp.RunSRS(r.ctx, c, r.params, rankSRS{n: n, r: r})
		} else {
			res, err = r.app.Run(r.ctx, c, r.params)
		}
		n.report(done, c, r.probe, res, err)
	}()
}

// report fills the rank's RankDone from its communicator and result.
func (n *node) report(done *msg.RankDone, c *comm.Comm, probe *fidelity.Probe, res apps.Result, err error) {
	st := c.Stats()
	fs := probe.Snapshot()
	done.Fidelity = fs.Encode()
	done.BytesSent, done.MsgsSent = st.BytesSent, st.MsgsSent
	done.ComputeS, done.CommS = st.ComputeTime.Seconds(), st.CommTime.Seconds()
	if err != nil {
		done.Error = err.Error()
		c.Abort(err)
		return
	}
	done.Ok, done.Value, done.Iterations = true, res.Value, int32(res.Iterations)
}

// control builds the resize control of a malleable rank: its reports go to
// the runner as RankResized (and an event with the bytes moved), its
// voluntary releases as AppRelease.
func (n *node) control(r *rank) *apps.Control {
	root, env, name := n.cfg.Env.System.Root, n.cfg.Env, n.cfg.Name
	factor := 1.0
	if env.Clock != nil {
		factor = env.Clock.Factor()
	}
	return apps.NewControl(func(x apps.Resized) {
		root.Send(r.runner, &msg.RankResized{JobId: r.job, ResizeId: x.ID, Rank: int32(x.Rank), NewRank: int32(x.NewRank),
			Node: name, ResizeS: x.Duration.Seconds() * factor, Released: x.Released, SafePoints: int32(x.SafePoints)})
		ev := env.Event(msg.EventRankResized, "node", r.job)
		ev.Fields = map[string]string{"node": name, "cluster": n.cfg.Cluster}
		ev.Values = map[string]float64{"resize_id": float64(x.ID), "rank": float64(x.Rank), "new_rank": float64(x.NewRank),
			"old_size": float64(x.Stats.OldSize), "new_size": float64(x.Stats.NewSize),
			"bytes_sent": float64(x.Stats.BytesSent), "bytes_recv": float64(x.Stats.BytesRecv), "kept": float64(x.Stats.Kept),
			"resize_wall_s": x.Duration.Seconds(), "safe_points": float64(x.SafePoints),
			"late_wall_s": x.Late.Seconds(), "credit_s": x.Credit.Seconds() * factor}
		env.Emit(ev)
	}, func(p int) {
		root.Send(r.runner, &msg.AppRelease{JobId: r.job, Rank: r.rank, Processors: int32(p)})
	})
}

// setLoad puts the load's programs on the node: its ranks' computation
// stretches by the share of the processors they lose to them
// (comm.ShareFactor over the node's processors), from their next Compute
// on. The event records it with the job it slows, if any.
func (n *node) setLoad(x *msg.NodeLoad) {
	f := comm.ShareFactor(n.cfg.Processors, int(x.Programs))
	n.load.Set(f)
	job := ""
	if n.cur != nil {
		job = n.cur.job
	}
	ev := n.cfg.Env.Event(msg.EventNodeLoad, "node", job)
	ev.Fields = map[string]string{"node": n.cfg.Name, "cluster": n.cfg.Cluster, "reason": x.Reason}
	ev.Values = map[string]float64{"programs": float64(x.Programs), "factor": f}
	n.cfg.Env.Emit(ev)
}

// resize hands a resize order to the rank: a running rank applies it at its
// next safe point; a rank started for a grow (endpoint open, no table yet)
// joins the job.
func (n *node) resize(ctx actor.Context, x *msg.ResizeRanks) {
	r := n.cur
	if r == nil || r.job != x.JobId {
		return
	}
	fail := func(why string) {
		ctx.Send(r.runner, &msg.RankResized{JobId: r.job, ResizeId: x.ResizeId, Rank: r.rank, NewRank: x.Self, Node: n.cfg.Name, Error: why})
	}
	m, ok := r.app.(apps.Malleable)
	if !ok {
		fail(fmt.Sprintf("application %s cannot resize", r.app.Name()))
		return
	}
	peers := make([]comm.Peer, len(x.Peers))
	for i, p := range x.Peers {
		peers[i] = comm.Peer{Rank: int(p.Rank), Addr: p.Addr, Cluster: p.Cluster}
	}
	order := apps.Resize{ID: x.ResizeId, Peers: peers, OldSize: int(x.OldSize), Self: int(x.Self), Mandatory: x.Mandatory}
	if r.running {
		if r.ctl == nil {
			fail("rank is not running a malleable application")
			return
		}
		r.ctl.Order(order)
		return
	}
	if x.Self != r.rank {
		fail(fmt.Sprintf("new rank %d asked to join as rank %d", r.rank, x.Self))
		return
	}
	r.running = true
	r.ctl = n.control(r)
	self, root, name := ctx.Self(), n.cfg.Env.System.Root, n.cfg.Name
	go func() {
		done := &msg.RankDone{JobId: r.job, Rank: r.rank, Node: name}
		defer r.finish(root, self, done)
		c, data, st, err := r.ep.Join(r.ctx, peers, int(x.OldSize))
		if err != nil {
			done.Error = fmt.Sprintf("join: %v", err)
			root.Send(r.runner, &msg.RankResized{JobId: r.job, ResizeId: x.ResizeId, Rank: r.rank, NewRank: x.Self, Node: name, Error: done.Error})
			return
		}
		defer c.Close()
		res, err := m.RunMalleable(r.ctx, c, r.params, r.ctl, &apps.Joined{Order: order, Data: data, Stats: st})
		n.report(done, c, r.probe, res, err)
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

// finish ends a rank's goroutine: it closes the endpoint, reports done to
// the runner and tells the node actor the rank is gone.
func (r *rank) finish(root *actor.RootContext, self *actor.PID, done *msg.RankDone) {
	r.cancel()
	if err := r.ep.Close(); err != nil && done.Error == "" {
		done.Error = "close endpoint: " + err.Error()
	}
	// The node lets go first: a local send is queued at once, so anything
	// RankDone causes (a release, the next job's StartRank) reaches the
	// node behind it and finds the node free.
	root.Send(self, &rankFinished{r: r})
	root.Send(r.runner, done)
}
