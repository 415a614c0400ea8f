package mmanager

import (
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
)

// round takes one decision per cluster. Waiting jobs are first assigned to
// clusters by the placement policy (Worst Fit: the cluster with the most
// processors left for them; one cluster, no co-allocation); then the
// approach decides per cluster with the jobs assigned to it, in queue order:
//
//   - PRA: the basis of Worst Fit is what is left after the running jobs'
//     grows, since PRA grows them first; a job that fits nowhere waits.
//   - PWA: the basis is the available processors before any grow. A job that
//     fits nowhere is assigned to the cluster where shrinking the running
//     jobs can make room for it (most available first), one such job per
//     cluster; that cluster's processors are then kept for it. PWA shrinks
//     (mandatory) and starts it once the shrinks are acknowledged.
//
// A cluster with shrinks in flight (or starts waiting for them) takes no
// decision until they are done, so released processors are never promised
// twice. Jobs with a grow or shrink in flight are not offered to the
// policies; their projected sizes count in the cluster's usage.
func (m *manager) round(ctx actor.Context) {
	states := m.states()
	if len(states) == 0 {
		return
	}
	assign := m.assign(ctx, states)
	started := map[string]bool{}
	for _, s := range states {
		if !s.blocked {
			m.decide(ctx, s, assign[s.name], started)
		}
	}
	m.retry(ctx, started)
}

// states returns the clusters whose status is known, in order, each with
// the processors left for waiting jobs (avail): what is available, less the
// grows PRA gives the running jobs first.
func (m *manager) states() []*clusterState {
	var states []*clusterState
	for _, c := range m.cfg.Order {
		s := m.state(c)
		if s == nil {
			continue
		}
		states = append(states, s)
		if s.blocked {
			continue
		}
		s.avail = s.view.Available()
		if m.cfg.Approach == "pra" {
			for _, g := range m.appr(m.pol, s.view, s.running, nil).Grow {
				s.avail -= g.Delta
			}
		}
	}
	return states
}

// assign goes through the queue in order and assigns each waiting job to
// the cluster that will start it (placement policy first, then, under PWA,
// a cluster where shrinks make room). A job no cluster can ever hold is
// rejected; the others stay in the queue.
func (m *manager) assign(ctx actor.Context, states []*clusterState) map[string][]pm.Waiting {
	assign := map[string][]pm.Waiting{}
	keep := m.queue[:0:0]
	for _, w := range m.queue {
		if m.neverFits(w, states) {
			m.reject(ctx, w, fmt.Sprintf("%s (%d processors)", ReasonNeverFits, w.size))
			continue
		}
		keep = append(keep, w)
		if s := m.place(w, states); s != nil {
			assign[s.name] = append(assign[s.name], pm.Waiting{ID: w.spec.Id, Size: w.size})
			s.avail -= w.size
			continue
		}
		if m.cfg.Approach != "pwa" {
			continue
		}
		if s := roomByShrinking(w, states); s != nil {
			assign[s.name] = append(assign[s.name], pm.Waiting{ID: w.spec.Id, Size: w.size})
			s.fight = true
			s.avail = 0
		}
	}
	m.queue = keep
	return assign
}

// neverFits reports whether no cluster could ever hold w under its cap: a
// fixed job larger than its cluster's cap, or any job larger than every
// cap once every cluster's status is known.
func (m *manager) neverFits(w *waiting, states []*clusterState) bool {
	maxCap := 0
	for _, s := range states {
		if w.fixed != "" && s.name == w.fixed {
			return w.size > s.view.Cap()
		}
		maxCap = max(maxCap, s.view.Cap())
	}
	return w.fixed == "" && len(states) == len(m.cfg.Order) && w.size > maxCap
}

// place asks the placement policy for one cluster to start w on, out of
// the processors left for waiting jobs (a blocked cluster has none), and
// returns it, or nil when none holds w now.
func (m *manager) place(w *waiting, states []*clusterState) *clusterState {
	snap := placement.Snapshot{Clusters: make([]placement.ClusterState, len(states))}
	for i, s := range states {
		cs := placement.ClusterState{Name: s.name, Capacity: s.view.Cap()}
		if !s.blocked {
			cs.Idle = min(max(s.avail, 0), cs.Capacity)
		}
		snap.Clusters[i] = cs
	}
	req := placement.Request{JobID: w.spec.Id, Type: placement.NonFixed, Components: []placement.Component{{Size: w.size}}}
	if w.fixed != "" {
		req.Type, req.Components[0].Cluster = placement.Fixed, w.fixed
	}
	out := m.placer.Place(req, snap, placement.Options{MaxClusters: 1})
	if out.Code != placement.Placed || len(out.Assignments) != 1 {
		return nil
	}
	for _, s := range states {
		if s.name == out.Assignments[0].Cluster {
			return s
		}
	}
	return nil
}

// roomByShrinking returns the cluster (PWA) where shrinking the running
// jobs makes room for w: not blocked, not already counted on by another
// waiting job, with enough available plus releasable processors; the one
// with the most available first (the first in order on ties).
func roomByShrinking(w *waiting, states []*clusterState) *clusterState {
	var best *clusterState
	for _, s := range states {
		if s.blocked || s.fight || w.fixed != "" && s.name != w.fixed || s.avail+s.rel < w.size {
			continue
		}
		if best == nil || s.avail > best.avail {
			best = s
		}
	}
	return best
}

// decide applies the approach to cluster s with the jobs assigned to it:
// it sends the shrinks and grows, and starts the jobs, at once or once the
// shrinks they rely on are acknowledged. started collects the jobs started.
func (m *manager) decide(ctx actor.Context, s *clusterState, assigned []pm.Waiting, started map[string]bool) {
	d := m.appr(m.pol, s.view, s.running, assigned)
	var shrinks map[int64]bool
	for _, ch := range d.Shrink {
		if shrinks == nil {
			shrinks = map[int64]bool{}
		}
		shrinks[m.request(ctx, ch, s.name)] = true
	}
	for _, ch := range d.Grow {
		m.request(ctx, ch, s.name)
	}
	for _, st := range d.Start {
		started[st.JobID] = true
		w := m.take(st.JobID)
		if w == nil {
			continue
		}
		w.at = s.name
		if st.AfterShrink && len(shrinks) > 0 {
			w.afterShrink = shrinks
			m.after[s.name] = append(m.after[s.name], w)
			continue
		}
		m.start(ctx, w)
	}
	m.checkCluster(s.name)
}

// retry counts one more try for every job left waiting, and rejects those
// past MaxTries.
func (m *manager) retry(ctx actor.Context, started map[string]bool) {
	keep := m.queue[:0]
	for _, w := range m.queue {
		if started[w.spec.Id] {
			continue
		}
		w.tries++
		if m.cfg.MaxTries > 0 && w.tries > m.cfg.MaxTries {
			m.reject(ctx, w, ReasonTooManyTries)
			continue
		}
		keep = append(keep, w)
	}
	m.queue = keep
}

// request sends a grow (voluntary) or shrink (mandatory) request for one
// policy change and returns its id.
func (m *manager) request(ctx actor.Context, ch pm.Change, cluster string) int64 {
	j := m.jobs[ch.JobID]
	if j == nil || ch.Delta == 0 {
		return 0
	}
	m.nextID++
	o := &mop{id: m.nextID, grow: ch.Delta > 0, mandatory: ch.Delta < 0, asked: abs(ch.Delta),
		deadline: m.env().Now() + m.cfg.OpTimeout.Seconds()}
	j.op = o
	m.ops[o.id] = j
	if o.grow {
		ctx.Send(j.runner, &msg.GrowRequest{JobId: j.id, Processors: int32(o.asked), Mandatory: o.mandatory, RequestId: o.id})
	} else {
		ctx.Send(j.runner, &msg.ShrinkRequest{JobId: j.id, Processors: int32(o.asked), Mandatory: o.mandatory, RequestId: o.id})
	}
	m.emit(msg.EventResizeRequest, j.id,
		map[string]string{"op": msg.ResizeKind(o.grow), "mandatory": strconv.FormatBool(o.mandatory), "cluster": cluster,
			"approach": m.cfg.Approach, "policy": m.cfg.Policy},
		map[string]float64{"processors": float64(o.asked), "size": float64(j.size)})
	return o.id
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
