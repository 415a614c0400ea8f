package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// NodeProps returns the props of a simulated node actor: it speaks the node
// actor's protocol (StartRank, RankTable, AbortRank) to the same runners,
// but instead of running its rank over TCP it sleeps the model's predicted
// execution time on the simulation's clock and then reports RankDone. cfg
// is built by wiring.Spec.NodeConfig, as on every backend; its Egress,
// ListenHost and Dilation are not used.
func NodeProps(cfg node.Config, m *Model) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &simNode{cfg: cfg, model: m} })
}

type simRank struct {
	job    string
	rank   int32
	runner *actor.PID
	app    string
	args   map[string]float64
	cancel func()
}

// rankEnd is the predicted end of a rank, delivered by the clock.
type rankEnd struct {
	r    *simRank
	d    time.Duration
	iter float64
}

type simNode struct {
	cfg   node.Config
	model *Model
	cur   *simRank
}

func (n *simNode) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.StartRank:
		n.start(ctx, x)
	case *msg.RankTable:
		n.run(ctx, x)
	case *msg.AbortRank:
		n.abort(ctx, x)
	case *rankEnd:
		if n.cur != x.r {
			return
		}
		n.cur = nil
		ctx.Send(x.r.runner, &msg.RankDone{JobId: x.r.job, Rank: x.r.rank, Node: n.cfg.Name, Ok: true,
			Iterations: int32(x.iter), ComputeS: x.d.Seconds()})
	case *actor.Stopping:
		if n.cur != nil && n.cur.cancel != nil {
			n.cur.cancel()
		}
	}
}

func (n *simNode) start(ctx actor.Context, s *msg.StartRank) {
	reply := &msg.RankReady{JobId: s.JobId, Rank: s.Rank, Node: n.cfg.Name}
	runner := s.Runner.PID()
	if n.cur != nil {
		reply.Error = fmt.Sprintf("node %s is busy with job %s", n.cfg.Name, n.cur.job)
		ctx.Send(runner, reply)
		return
	}
	if _, err := apps.Lookup(s.App); err != nil {
		reply.Error = err.Error()
		ctx.Send(runner, reply)
		return
	}
	n.cur = &simRank{job: s.JobId, rank: s.Rank, runner: runner, app: s.App, args: s.Args}
	reply.Addr = "sim:" + n.cfg.Name
	ctx.Send(runner, reply)
}

func (n *simNode) run(ctx actor.Context, t *msg.RankTable) {
	r := n.cur
	if r == nil || r.job != t.JobId || r.cancel != nil {
		return
	}
	clusters := make([]string, len(t.Peers))
	for i, p := range t.Peers {
		clusters[i] = p.Cluster
	}
	d, err := n.model.Predict(r.app, r.args, clusters)
	if err != nil {
		n.cur = nil
		ctx.Send(r.runner, &msg.RankDone{JobId: r.job, Rank: r.rank, Node: n.cfg.Name, Error: err.Error()})
		return
	}
	ctx.Send(r.runner, &msg.RankConnected{JobId: r.job, Rank: r.rank})
	iter := 0.0
	if a, err := apps.Lookup(r.app); err == nil {
		if tr, err := apps.TrafficOf(a, len(clusters), r.args); err == nil {
			iter = tr.Iterations
		}
	}
	r.cancel = n.cfg.Env.After(d, ctx.Self(), &rankEnd{r: r, d: d, iter: iter})
}

// abort ends the current rank of a job at once, as a killed process would.
func (n *simNode) abort(ctx actor.Context, a *msg.AbortRank) {
	r := n.cur
	if r == nil || r.job != a.JobId {
		return
	}
	if r.cancel != nil {
		r.cancel()
	}
	n.cur = nil
	ctx.Send(r.runner, &msg.RankDone{JobId: r.job, Rank: r.rank, Node: n.cfg.Name, Error: "aborted: " + a.Reason})
}

// Prober answers the information service's probes from the link matrix
// (dilation 1): nothing is sent, so nothing can be measured, and the values
// the scenario states are what an ideal measurement would find.
type Prober struct {
	Cluster string
	Model   *Model
}

// Addr implements cluster.Prober: a name, not an address.
func (p Prober) Addr() string { return "sim:" + p.Cluster }

// Measure implements cluster.Prober: the matrix's latency and bandwidth
// (bytes/s) from p's cluster to dst.
func (p Prober) Measure(_ context.Context, dst, _ string, _ int) (time.Duration, float64, error) {
	l, err := p.Model.Link(p.Cluster, dst)
	if err != nil {
		return 0, 0, fmt.Errorf("sim probe %s->%s: %w", p.Cluster, dst, err)
	}
	return l.Latency, l.Bandwidth, nil
}
