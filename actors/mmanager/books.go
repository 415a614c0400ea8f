package mmanager

import (
	"sort"

	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
)

// clusterState is one cluster as a round sees it.
type clusterState struct {
	name    string
	view    pm.ClusterView
	running []pm.Job // malleable jobs that may be resized now
	blocked bool     // shrinks in flight or starts waiting for them
	avail   int      // processors left for waiting jobs (Worst Fit basis)
	rel     int      // processors the running jobs hold above their minimum
	fight   bool     // PWA: a waiting job already counts on shrinks here
}

// projected returns the processors KOALA will hold in cluster c once every
// operation in flight is done: booked sizes plus grows in flight, minus
// shrinks in flight, plus starts being claimed or waiting for shrinks.
func (m *manager) projected(c string) int {
	u := 0
	for _, j := range m.jobs {
		if j.cluster != c {
			continue
		}
		u += j.size
		if j.op != nil {
			u += j.op.delta()
		}
	}
	for _, w := range m.claiming {
		if w.at == c {
			u += w.size
		}
	}
	for _, w := range m.after[c] {
		u += w.size
	}
	return u
}

// holding returns an upper bound of the processors KOALA holds in cluster c
// now: booked sizes, plus grows in flight, plus starts being claimed.
func (m *manager) holding(c string) int {
	u := 0
	for _, j := range m.jobs {
		if j.cluster != c {
			continue
		}
		u += j.size
		if j.op != nil && j.op.grow {
			u += j.op.delta()
		}
	}
	for _, w := range m.claiming {
		if w.at == c {
			u += w.size
		}
	}
	return u
}

func (m *manager) threshold(c string) float64 {
	if t, ok := m.cfg.Thresholds[c]; ok {
		return t
	}
	return m.cfg.Threshold
}

// state builds the view of cluster c, or nil when its status is unknown.
//
// Idle is what the cluster can give now, counting KOALA's operations in
// flight as done: capacity - local users - projected KOALA usage, and never
// more than the information service's idle count (which may lag behind a
// release). KoalaUsed is the projected usage.
func (m *manager) state(c string) *clusterState {
	st := m.status[c]
	if st == nil {
		return nil
	}
	u := m.projected(c)
	idle := min(int(st.Capacity)-int(st.LocalBusy)-u, int(st.Idle))
	s := &clusterState{name: c, view: pm.ClusterView{Name: c, Idle: max(idle, 0), Capacity: int(st.Capacity),
		KoalaUsed: u, Threshold: m.threshold(c)}}
	// An unreachable (partitioned) cluster takes no waiting job.
	s.blocked = len(m.after[c]) > 0 || st.Unreachable
	for _, j := range m.sortedJobs() {
		if j.cluster != c || !j.malleable {
			continue
		}
		if j.op != nil && !j.op.grow {
			s.blocked = true
		}
		if j.running && j.op == nil {
			s.running = append(s.running, pm.Job{ID: j.id, Start: j.start, Size: j.size, Min: j.min, Max: j.max, PowerOfTwo: j.pow2})
		}
	}
	s.rel = pm.Releasable(s.running)
	return s
}

func (m *manager) sortedJobs() []*mjob {
	out := make([]*mjob, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].id < out[b].id })
	return out
}
