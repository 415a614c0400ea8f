package runner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
)

// Config builds a runner for one job.
type Config struct {
	Job       *msg.JobSpec
	Scheduler *actor.PID
	Clusters  map[string]*actor.PID // cluster managers, to release nodes
	TimeScale float64
	// StartupDelay emulates the local resource managers' job start latency
	// (about 10 s on DAS-3), in scenario time.
	StartupDelay time.Duration
	// RankTimeout bounds, in wall time, how long the runner waits for ranks
	// to report ready; a job whose nodes do not answer fails.
	RankTimeout time.Duration
	Env         actors.Env
}

type member struct {
	rank    int32
	cluster string
	node    string
	pid     *actor.PID
	addr    string
	ready   bool
	conn    bool
	done    *msg.RankDone
}

type runner struct {
	cfg       Config
	placed    *msg.JobPlaced
	members   []*member
	readyN    int
	connN     int
	doneN     int
	started   bool
	finished  bool
	failure   string
	cancelArm func()
}

type launch struct{}
type readyTimeout struct{}

// Props returns the props of a job's runner.
func Props(cfg Config) *actor.Props {
	if cfg.RankTimeout <= 0 {
		cfg.RankTimeout = 60 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor { return &runner{cfg: cfg} })
}

func (r *runner) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		ev := r.cfg.Env.Event(msg.EventSubmit, "runner", r.cfg.Job.Id)
		ev.Fields = map[string]string{"app": r.cfg.Job.App, "request": r.cfg.Job.Request}
		ev.Values = map[string]float64{"size": float64(r.cfg.Job.Size)}
		r.cfg.Env.Emit(ev)
		ctx.Send(r.cfg.Scheduler, &msg.SubmitJob{Job: r.cfg.Job, Runner: msg.FromPID(ctx.Self())})
	case *msg.JobRejected:
		r.finish(ctx, fmt.Sprintf("placement failed after %d tries: %s", x.Tries, x.Reason))
	case *msg.JobPlaced:
		r.placed = x
		rank := int32(0)
		for _, a := range x.Allocations {
			for _, n := range a.Nodes {
				r.members = append(r.members, &member{rank: rank, cluster: a.Cluster, node: n.Name, pid: n.Pid.PID()})
				rank++
			}
		}
		r.cfg.Env.After(r.cfg.StartupDelay, ctx.Self(), &launch{})
	case *launch:
		for _, m := range r.members {
			ctx.Send(m.pid, &msg.StartRank{
				JobId: r.cfg.Job.Id, Rank: m.rank, Size: int32(len(r.members)), App: r.cfg.Job.App,
				Args: r.cfg.Job.Args, TimeScale: r.cfg.TimeScale, Cluster: m.cluster, Runner: msg.FromPID(ctx.Self()),
			})
		}
		t := time.AfterFunc(r.cfg.RankTimeout, func() { r.cfg.Env.System.Root.Send(ctx.Self(), &readyTimeout{}) })
		r.cancelArm = func() { t.Stop() }
	case *readyTimeout:
		if !r.started && !r.finished {
			r.fail(ctx, fmt.Sprintf("ranks not ready within %s", r.cfg.RankTimeout))
		}
	case *msg.RankReady:
		r.ready(ctx, x)
	case *msg.RankConnected:
		if m := r.member(x.Rank); m != nil && !m.conn {
			m.conn = true
			r.connN++
			if r.connN == len(r.members) && !r.started && r.failure == "" {
				r.started = true
				if r.cancelArm != nil {
					r.cancelArm()
				}
				r.cfg.Env.Emit(r.cfg.Env.Event(msg.EventStart, "runner", r.cfg.Job.Id))
			}
		}
	case *msg.RankDone:
		if m := r.member(x.Rank); m != nil && m.done == nil {
			m.done = x
			r.doneN++
			if !x.Ok && r.failure == "" {
				r.fail(ctx, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
			}
			if r.doneN == len(r.members) {
				r.finish(ctx, r.failure)
			}
		}
	case *msg.NodeDown:
		for _, m := range r.members {
			if m.node == x.Node && m.done == nil {
				reason := fmt.Sprintf("node %s of cluster %s went down: %s", x.Node, x.Cluster, x.Reason)
				if r.failure != "" && !strings.HasPrefix(r.failure, "node ") {
					// A crashed node's peers usually lose their connections to it
					// (and fail) before the membership declares it dead; the
					// node failure is the cause, so it leads the reason.
					r.failure = reason + " (first error: " + r.failure + ")"
				}
				r.fail(ctx, reason)
				// the node will never report: count it as done
				m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: "node down"}
				r.doneN++
				if r.doneN == len(r.members) {
					r.finish(ctx, r.failure)
				}
			}
		}
	}
}

func (r *runner) member(rank int32) *member {
	if int(rank) < 0 || int(rank) >= len(r.members) {
		return nil
	}
	return r.members[rank]
}

func (r *runner) ready(ctx actor.Context, x *msg.RankReady) {
	m := r.member(x.Rank)
	if m == nil || m.ready {
		return
	}
	m.ready = true
	r.readyN++
	if x.Error != "" {
		// This rank never opened: it will not report done.
		m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: x.Error}
		r.doneN++
		r.fail(ctx, fmt.Sprintf("rank %d on %s: %s", x.Rank, x.Node, x.Error))
		if r.doneN == len(r.members) {
			r.finish(ctx, r.failure)
		}
		return
	}
	m.addr = x.Addr
	if r.readyN == len(r.members) && r.failure == "" {
		table := &msg.RankTable{JobId: r.cfg.Job.Id}
		for _, mm := range r.members {
			table.Peers = append(table.Peers, &msg.RankPeer{Rank: mm.rank, Addr: mm.addr, Cluster: mm.cluster})
		}
		for _, mm := range r.members {
			ctx.Send(mm.pid, table)
		}
	}
}

// fail aborts every rank still running; the job ends when all ranks report.
func (r *runner) fail(ctx actor.Context, reason string) {
	if r.failure != "" {
		return
	}
	r.failure = reason
	for _, m := range r.members {
		if m.done == nil {
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
		}
	}
	// Ranks that were told to start but never got the table have nothing to
	// run: they report done after the abort closes their endpoint. Ranks that
	// never became ready are covered by readyTimeout.
	if !r.started && r.readyN < len(r.members) {
		for _, m := range r.members {
			if !m.ready && m.done == nil {
				m.done = &msg.RankDone{JobId: r.cfg.Job.Id, Rank: m.rank, Node: m.node, Error: "not ready"}
				r.doneN++
			}
		}
		if r.doneN == len(r.members) {
			r.finish(ctx, r.failure)
		}
	}
}

func (r *runner) finish(ctx actor.Context, failure string) {
	if r.finished {
		return
	}
	r.finished = true
	if r.cancelArm != nil {
		r.cancelArm()
	}
	// Release every claimed node, per cluster.
	byCluster := map[string][]string{}
	for _, m := range r.members {
		byCluster[m.cluster] = append(byCluster[m.cluster], m.node)
	}
	for c, nodes := range byCluster {
		if pid := r.cfg.Clusters[c]; pid != nil {
			ctx.Send(pid, &msg.ReleaseNodes{JobId: r.cfg.Job.Id, Nodes: nodes})
		}
	}
	ev := r.cfg.Env.Event(msg.EventEnd, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"status": "completed"}
	ev.Values = map[string]float64{}
	if failure != "" {
		ev.Fields["status"] = "failed"
		ev.Fields["reason"] = failure
	}
	if r.placed != nil {
		clusters := make([]string, 0, len(byCluster))
		for c := range byCluster {
			clusters = append(clusters, c)
		}
		sort.Strings(clusters)
		ev.Fields["clusters"] = strings.Join(clusters, "+")
		var bytes, msgs int64
		var comp, comm float64
		var fid [][]byte
		for _, m := range r.members {
			if m.done != nil {
				bytes += m.done.BytesSent
				msgs += m.done.MsgsSent
				comp += m.done.ComputeS
				comm += m.done.CommS
				fid = append(fid, m.done.Fidelity)
			}
		}
		if f, err := fidelity.MergeEncoded(fid); err != nil {
			ev.Fields["fidelity_error"] = err.Error()
		} else if f != "" {
			ev.Fields[fidelity.EventField] = f
		}
		ev.Values["bytes_sent"] = float64(bytes)
		ev.Values["msgs_sent"] = float64(msgs)
		if n := float64(len(r.members)); n > 0 {
			ev.Values["rank_compute_wall_s"] = comp / n
			ev.Values["rank_comm_wall_s"] = comm / n
		}
		if len(r.members) > 0 && r.members[0].done != nil {
			ev.Values["value"] = r.members[0].done.Value
			ev.Values["iterations"] = float64(r.members[0].done.Iterations)
		}
	}
	r.cfg.Env.Emit(ev)
	ctx.Send(r.cfg.Scheduler, &msg.JobFinished{JobId: r.cfg.Job.Id, Ok: failure == "", Reason: failure})
	ctx.Stop(ctx.Self())
}
