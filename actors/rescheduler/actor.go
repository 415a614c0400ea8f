package rescheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/comm"
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
	// status is the information service's last status of each cluster
	// (idle nodes, each node's load).
	status map[string]*msg.ClusterStatus
	// jobs are the running watched jobs' last figures (JobProgress), by
	// job; moving are the jobs told to migrate, by job, with their target,
	// until they report progress there.
	jobs   map[string]*msg.MigrationRequest
	moving map[string]string
}

// Props returns the rescheduler's props.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newRescheduler(cfg) })
}

func newRescheduler(cfg Config) *rescheduler {
	return &rescheduler{cfg: cfg, status: map[string]*msg.ClusterStatus{}, jobs: map[string]*msg.MigrationRequest{},
		moving: map[string]string{}}
}

func (r *rescheduler) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *msg.GridStatus:
		for _, c := range x.Clusters {
			r.status[c.Cluster] = c
		}
	case *msg.JobProgress:
		f := x.Figures
		if f == nil {
			return
		}
		r.jobs[f.JobId] = f
		if r.moving[f.JobId] == f.Cluster {
			delete(r.moving, f.JobId)
		}
	case *msg.JobEnded:
		delete(r.jobs, x.JobId)
		delete(r.moving, x.JobId)
		if x.Ok {
			r.opportunistic(ctx, x)
		}
	case *msg.MigrationRequest:
		d := r.Decide(x)
		ev := r.cfg.Env.Event(msg.EventMigrationDecision, "rescheduler", x.JobId)
		ev.Fields = map[string]string{"from": x.Cluster, "to": d.Cluster, "migrate": fmt.Sprint(d.Migrate),
			"reason": d.Reason, "cost_model": d.CostModel, "forced": fmt.Sprint(d.Forced)}
		ev.Values = map[string]float64{"gain": d.Gain, "here_s": d.HereS, "there_s": d.ThereS, "cost_s": d.CostS,
			"phase": float64(x.Phase), "average_ratio": x.AverageRatio, "ratio": x.Ratio, "size": float64(d.Size)}
		r.cfg.Env.Emit(ev)
		r.send(ctx, x.Runner, d)
	}
}

// send gives a decision to the job's runner; a job told to migrate is
// moving until it reports progress on its target. The runner takes the
// first migration it gets and ignores the others until it has moved, so a
// later one does not change the target.
func (r *rescheduler) send(ctx actor.Context, runner *msg.Pid, d *msg.MigrationDecision) {
	if _, moving := r.moving[d.JobId]; d.Migrate && !moving {
		r.moving[d.JobId] = d.Cluster
	}
	if p := runner.PID(); p != nil {
		ctx.Send(p, d)
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
//     the phases before a load came); there, the phase under way here at
//     that pace (the job stops at the safe point after it), then the
//     model's time of the phases after it on every node of the other
//     cluster, each under the load the information service last reported
//     for it (unloaded when it reported none).
//   - The cost is the cost model's for the move, told whether the other
//     cluster's nodes were all idle in the information service's last
//     status (a restart that cannot be placed at once waits for the
//     scheduler's next scan).
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
		d, err := r.candidate(x, cur, c, r.clusterFactors(c))
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

// candidate is the decision for moving x from cur onto all the nodes of
// c, each computing under its load factor; the restart waits for the
// scheduler when the information service's last status of c shows fewer
// idle nodes than that.
func (r *rescheduler) candidate(x *msg.MigrationRequest, cur, c Cluster, factors []float64) (migrate.Decision, error) {
	busy := false
	if st := r.status[c.Name]; st != nil {
		busy = int(st.Idle) < len(factors)
	}
	here, there, cost, err := r.estimate(x, cur, c, factors, busy)
	if err != nil {
		return migrate.Decision{}, err
	}
	return migrate.Decide(here, there, cost, r.cfg.Threshold)
}

// estimate predicts x's remaining time here (at its current pace), its
// remaining time if it moves onto len(factors) nodes of c under their load
// factors, and the cost of moving there (busy: the new nodes are not all
// idle). The job stops at its next safe point, after the phase under way:
// that phase runs here at the current pace, the job's remaining phases
// there (the time there holds both).
func (r *rescheduler) estimate(x *msg.MigrationRequest, cur, c Cluster, factors []float64, busy bool) (here, there, cost time.Duration, err error) {
	pHere, layoutHere, err := r.phases(x, cur, unloaded(int(x.Size)))
	if err != nil {
		return 0, 0, 0, err
	}
	pThere, layoutThere, err := r.phases(x, c, factors)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, t := range pHere {
		here += t
	}
	here = time.Duration(float64(here) * pace(x))
	if len(pHere) > 0 {
		there = time.Duration(float64(pHere[0]) * pace(x))
	}
	for k := 1; k < len(pThere); k++ {
		there += pThere[k]
	}
	plan, err := srs.Redistribute(layoutHere, layoutThere, qr.ElemSize)
	if err != nil {
		return 0, 0, 0, err
	}
	wan, err := r.cfg.Links.Link(cur.Name, c.Name)
	if err != nil {
		return 0, 0, 0, err
	}
	est, err := r.cfg.Cost.Estimate(migrate.Move{Bytes: plan.Bytes(), Busy: busy, Links: func(int, int) (time.Duration, float64) {
		return wan.Latency, wan.Bandwidth
	}})
	if err != nil {
		return 0, 0, 0, err
	}
	return here, there, est.Total, nil
}

// unloaded is the load factors of n unloaded nodes.
func unloaded(n int) []float64 {
	f := make([]float64, n)
	for i := range f {
		f[i] = 1
	}
	return f
}

// clusterFactors is the load factor of every node of c as the information
// service last reported them (comm.ShareFactor: how much longer a
// computation takes there), the loaded nodes first, most loaded first.
func (r *rescheduler) clusterFactors(c Cluster) []float64 {
	f := unloaded(c.Nodes)
	st := r.status[c.Name]
	if st == nil {
		return f
	}
	var loaded []float64
	for _, p := range st.NodePrograms {
		loaded = append(loaded, comm.ShareFactor(int(st.Processors), int(p)))
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(loaded)))
	copy(f, loaded)
	return f
}

// nodeFactors is the load factor of each named node of cluster c as the
// information service last reported it.
func (r *rescheduler) nodeFactors(c string, nodes []string) []float64 {
	f := unloaded(len(nodes))
	if st := r.status[c]; st != nil {
		for i, n := range nodes {
			f[i] = comm.ShareFactor(int(st.Processors), int(st.NodePrograms[n]))
		}
	}
	return f
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

// phases is the model's time of each phase of x from its next one on
// len(factors) nodes of c, node i computing factors[i] times slower than
// unloaded, and the full-size matrix layout there.
func (r *rescheduler) phases(x *msg.MigrationRequest, c Cluster, factors []float64) ([]time.Duration, srs.Distribution, error) {
	procs := len(factors)
	m, rate, err := apps.QRModel(x.Args, procs)
	if err != nil {
		return nil, srs.Distribution{}, err
	}
	nodes := make([]qr.Node, procs)
	for i, f := range factors {
		nodes[i] = qr.Node{Speed: rate * c.Speed / f}
	}
	l, err := r.cfg.Links.Link(c.Name, c.Name)
	if err != nil {
		return nil, srs.Distribution{}, err
	}
	n := len(m.Phases())
	ts, err := m.Predict(min(int(x.Phase), n), n, nodes, func(int, int) (time.Duration, float64) { return l.Latency, l.Bandwidth })
	if err != nil {
		return nil, srs.Distribution{}, err
	}
	layout, err := apps.QRLayout(x.Args, procs, 1)
	return ts, layout, err
}
