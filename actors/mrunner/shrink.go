package mrunner

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// planShrink picks the departing ranks (the highest) and asks every rank to
// resize at its next safe point; the processors are freed once the departing
// ranks are gone.
func (r *mrunner) planShrink(ctx actor.Context) {
	o := r.cur
	running := r.running()
	keep := len(running) - o.accepted
	o.phase = phResizing
	o.departing = running[keep:]
	table := make([]*msg.RankPeer, 0, keep)
	for _, m := range running[:keep] {
		table = append(table, &msg.RankPeer{Rank: m.rank, Addr: m.addr, Cluster: r.cluster})
	}
	o.expect = map[*member]bool{}
	for _, m := range running[:keep] {
		o.expect[m] = true
	}
	for _, m := range running {
		self := m.rank
		if int(m.rank) >= keep {
			self = -1
			m.state = mDeparting
		}
		ctx.Send(m.pid, &msg.ResizeRanks{JobId: r.cfg.Job.Id, ResizeId: o.resizeID, Peers: table,
			OldSize: int32(len(running)), Self: self, Mandatory: o.req.mandatory})
	}
}
