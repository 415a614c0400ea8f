package rescheduler

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/qr"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// Cluster is what the rescheduler knows of a cluster.
type Cluster struct {
	Name  string
	Nodes int
	Speed float64 // relative compute rate of its nodes
}

// Config builds the rescheduler.
type Config struct {
	Clusters []Cluster
	// Links is the link matrix between the clusters (undilated, scenario
	// time).
	Links     netem.Matrix
	Cost      migrate.CostModel
	Threshold float64
	// Invert forces the opposite of every decision (the experiments'
	// "opposite decision forced" runs).
	Invert bool
	Env    actors.Env
}

type rescheduler struct {
	cfg    Config
	forced map[string]bool // jobs whose one forced decision was given (Invert)
}

// Props returns the rescheduler's props.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &rescheduler{cfg: cfg} })
}

func (r *rescheduler) Receive(ctx actor.Context) {
	if x, ok := ctx.Message().(*msg.MigrationRequest); ok {
		d := r.Decide(x)
		ev := r.cfg.Env.Event(msg.EventMigrationDecision, "rescheduler", x.JobId)
		ev.Fields = map[string]string{"from": x.Cluster, "to": d.Cluster, "migrate": fmt.Sprint(d.Migrate),
			"reason": d.Reason, "cost_model": d.CostModel, "forced": fmt.Sprint(d.Forced)}
		ev.Values = map[string]float64{"gain": d.Gain, "here_s": d.HereS, "there_s": d.ThereS, "cost_s": d.CostS,
			"phase": float64(x.Phase), "average_ratio": x.AverageRatio, "ratio": x.Ratio, "size": float64(d.Size)}
		r.cfg.Env.Emit(ev)
		if p := x.Runner.PID(); p != nil {
			ctx.Send(p, d)
		}
	}
}

// ReasonForcedOnce answers a job's later requests when decisions are
// forced opposite: the job took its forced decision and keeps it.
const ReasonForcedOnce = "forced run: the job's one decision was forced already"

// Decide answers one request: the best other cluster by gain, and
// migrate.Decide's rule on it (inverted when Config.Invert).
//
// Choices where the SPEC is silent:
//   - Remaining time here is the model's remaining time on the job's
//     nodes times the ratio of its last phase (the job goes on at the pace
//     it runs at now; the average, which the monitor asks on, also holds
//     the phases before a load came); there, the model's on every node of the
//     other cluster (the load there is not known: taken as none).
//   - The job moves onto all of the other cluster's nodes (SPEC §6: from 4
//     Tennessee to 8 Illinois machines); the restart waits in the
//     scheduler's queue if they are busy.
//   - The cost is in scenario time, for the matrix at its full size.
//   - Invert forces the opposite of a job's first decision only (the
//     experiment compares one decision with its opposite); the job's
//     later requests are declined, so a job forced to stay stays.
func (r *rescheduler) Decide(x *msg.MigrationRequest) *msg.MigrationDecision {
	out := &msg.MigrationDecision{JobId: x.JobId, CostModel: r.cfg.Cost.Name(), Reason: "no other cluster"}
	cur, ok := r.cluster(x.Cluster)
	if !ok {
		out.Reason = fmt.Sprintf("unknown cluster %q", x.Cluster)
		return out
	}
	var best *migrate.Decision
	for _, c := range r.cfg.Clusters {
		if c.Name == cur.Name || c.Nodes < 1 {
			continue
		}
		d, err := r.candidate(x, cur, c)
		if err != nil {
			out.Reason = err.Error()
			continue
		}
		if best == nil || d.Gain > best.Gain {
			best = &d
			out.Cluster, out.Size = c.Name, int32(c.Nodes)
		}
	}
	if best == nil {
		return out
	}
	out.Migrate, out.Gain, out.Reason = best.Migrate, best.Gain, best.Reason
	out.HereS, out.ThereS, out.CostS = best.Here.Seconds(), best.There.Seconds(), best.Cost.Seconds()
	if r.cfg.Invert {
		if r.forced[x.JobId] {
			out.Migrate, out.Forced, out.Reason = false, true, ReasonForcedOnce
			return out
		}
		if r.forced == nil {
			r.forced = map[string]bool{}
		}
		r.forced[x.JobId] = true
		out.Migrate, out.Forced = !out.Migrate, true
		out.Reason = "forced opposite of: " + out.Reason
	}
	return out
}

func (r *rescheduler) cluster(name string) (Cluster, bool) {
	for _, c := range r.cfg.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return Cluster{}, false
}

// candidate is the decision for moving x from cur onto every node of c.
func (r *rescheduler) candidate(x *msg.MigrationRequest, cur, c Cluster) (migrate.Decision, error) {
	here, layoutHere, err := r.remaining(x, cur, int(x.Size))
	if err != nil {
		return migrate.Decision{}, err
	}
	here = time.Duration(float64(here) * pace(x))
	there, layoutThere, err := r.remaining(x, c, c.Nodes)
	if err != nil {
		return migrate.Decision{}, err
	}
	plan, err := srs.Redistribute(layoutHere, layoutThere, qr.ElemSize)
	if err != nil {
		return migrate.Decision{}, err
	}
	wan, err := r.cfg.Links.Link(cur.Name, c.Name)
	if err != nil {
		return migrate.Decision{}, err
	}
	cost, err := r.cfg.Cost.Estimate(migrate.Move{Bytes: plan.Bytes(), Links: func(int, int) (time.Duration, float64) {
		return wan.Latency, wan.Bandwidth
	}})
	if err != nil {
		return migrate.Decision{}, err
	}
	return migrate.Decide(here, there, cost.Total, r.cfg.Threshold)
}

// pace is how much slower than predicted the job runs now: its last
// phase's ratio (the load it runs under now, as the information service's
// forecast would give it), or its average when the request has none.
func pace(x *msg.MigrationRequest) float64 {
	if x.Ratio > 0 {
		return x.Ratio
	}
	return max(x.AverageRatio, 1e-9)
}

// remaining is the model's remaining time of x from its next phase on
// procs unloaded nodes of c, and the full-size matrix layout there.
func (r *rescheduler) remaining(x *msg.MigrationRequest, c Cluster, procs int) (time.Duration, srs.Distribution, error) {
	m, rate, err := apps.QRModel(x.Args, procs)
	if err != nil {
		return 0, srs.Distribution{}, err
	}
	nodes := make([]qr.Node, procs)
	for i := range nodes {
		nodes[i] = qr.Node{Speed: rate * c.Speed}
	}
	l, err := r.cfg.Links.Link(c.Name, c.Name)
	if err != nil {
		return 0, srs.Distribution{}, err
	}
	from := min(int(x.Phase), len(m.Phases()))
	d, err := m.Remaining(from, nodes, func(int, int) (time.Duration, float64) { return l.Latency, l.Bandwidth })
	if err != nil {
		return 0, srs.Distribution{}, err
	}
	layout, err := apps.QRLayout(x.Args, procs, 1)
	return d, layout, err
}
