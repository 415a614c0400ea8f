package mmanager

import (
	"fmt"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
)

func (m *manager) checkJob(j *mjob) {
	if !j.malleable || !j.running || j.op != nil {
		return
	}
	pj := pm.Job{Size: j.size, Min: j.min, Max: j.max, PowerOfTwo: j.pow2}
	lo, hi := pj.Bounds()
	invariant.Check(m.env(), m.cfg.Stats, "mmanager", j.id, invariant.Bounds, j.size >= lo && j.size <= hi,
		func() string {
			return fmt.Sprintf("job %s booked at %d processors, bounds [%d, %d]", j.id, j.size, lo, hi)
		})
	if j.pow2 {
		invariant.Check(m.env(), m.cfg.Stats, "mmanager", j.id, invariant.Pow2, j.size&(j.size-1) == 0,
			func() string { return fmt.Sprintf("job %s (%s) booked at %d processors", j.id, j.profile, j.size) })
	}
}

// checkCluster checks that what KOALA may hold in the cluster (booked sizes,
// grows in flight, starts being claimed) fits its capacity and its cap.
func (m *manager) checkCluster(c string) {
	st := m.status[c]
	if st == nil {
		return
	}
	h := m.holding(c)
	invariant.Check(m.env(), m.cfg.Stats, "mmanager", "", invariant.Capacity, h <= int(st.Capacity),
		func() string { return fmt.Sprintf("cluster %s: KOALA may hold %d of %d processors", c, h, st.Capacity) })
	v := pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(c)}
	invariant.Check(m.env(), m.cfg.Stats, "mmanager", "", invariant.Threshold, h <= v.Cap(),
		func() string { return fmt.Sprintf("cluster %s: KOALA may hold %d processors, cap %d", c, h, v.Cap()) })
}

// report emits one "cluster_util" event per cluster: the time series of
// utilisation.
func (m *manager) report() {
	waiting := len(m.queue)
	for _, c := range m.cfg.Order {
		st := m.status[c]
		if st == nil {
			continue
		}
		var mall, rigid, running, busy int
		for _, j := range m.jobs {
			if j.cluster != c {
				continue
			}
			if j.malleable {
				mall += j.size
				running++
			} else {
				rigid += j.size
			}
			if j.op != nil {
				busy++
			}
		}
		v := pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(c)}
		m.emit(msg.EventClusterUtil, "", map[string]string{"cluster": c}, map[string]float64{
			"capacity": float64(st.Capacity), "cap": float64(v.Cap()), "idle": float64(st.Idle),
			"local": float64(st.LocalBusy), "koala": float64(st.KoalaBusy),
			"malleable": float64(mall), "rigid": float64(rigid), "malleable_jobs": float64(running),
			"ops_in_flight": float64(busy), "waiting": float64(waiting),
		})
	}
}
