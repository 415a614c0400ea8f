package mrunner

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
)

// fail aborts every rank still alive; the job ends once the running ones
// have reported.
func (r *mrunner) fail(ctx actor.Context, reason string) {
	if r.failure != "" || r.finished {
		return
	}
	r.failure = reason
	if r.cause == msg.FailureCause_FAILURE_NONE {
		r.cause = msg.FailureCause_FAILURE_RANK
	}
	if o := r.cur; o != nil && o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	for _, m := range r.members {
		switch m.state {
		case mStarting, mReady:
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
			m.state = mGone
		case mRunning, mDeparting:
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: reason})
		}
	}
	r.finishIfDone(ctx)
}

// finishIfDone ends the job once no rank of the application is alive; new
// ranks of an unfinished grow are aborted.
func (r *mrunner) finishIfDone(ctx actor.Context) {
	if r.finished {
		return
	}
	if !r.started && r.failure == "" {
		return
	}
	for _, m := range r.members {
		if m.state == mRunning || m.state == mDeparting {
			return
		}
	}
	for _, m := range r.members {
		if m.state == mStarting || m.state == mReady {
			ctx.Send(m.pid, &msg.AbortRank{JobId: r.cfg.Job.Id, Reason: "job ended"})
			m.state = mGone
		}
	}
	r.finish(ctx)
}

func (r *mrunner) finish(ctx actor.Context) {
	if r.finished {
		return
	}
	r.finished = true
	r.disarm()
	if o := r.cur; o != nil && o.cancel != nil {
		o.cancel()
	}
	r.queue = nil
	// Free every processor still held (members not yet released), each
	// once its node has let go.
	var held []*member
	for _, m := range r.members {
		if r.byNode[m.node] == m {
			held = append(held, m)
		}
	}
	r.release(ctx, held)
	fields := map[string]string{"status": "completed", "malleable": "true", "profile": r.cfg.Profile.Name}
	if r.failure != "" {
		fields["status"], fields["reason"] = "failed", r.failure
		if r.cause == msg.FailureCause_FAILURE_NONE {
			r.cause = msg.FailureCause_FAILURE_RANK
		}
		fields["cause"] = r.cause.Name()
	}
	vals := map[string]float64{}
	if r.placed {
		fields["clusters"] = r.cluster
		var bytes, msgs, comp, comm float64
		var fid [][]byte
		n := 0
		for _, m := range r.members {
			if m.done != nil {
				fid = append(fid, m.done.Fidelity)
				bytes += float64(m.done.BytesSent)
				msgs += float64(m.done.MsgsSent)
				comp += m.done.ComputeS
				comm += m.done.CommS
				n++
			}
		}
		vals["bytes_sent"], vals["msgs_sent"] = bytes, msgs
		if f, err := fidelity.MergeEncoded(fid); err != nil {
			fields["fidelity_error"] = err.Error()
		} else if f != "" {
			fields[fidelity.EventField] = f
		}
		if n > 0 {
			vals["rank_compute_wall_s"], vals["rank_comm_wall_s"] = comp/float64(n), comm/float64(n)
		}
		for _, m := range r.members {
			if m.done != nil && m.done.Ok && !m.released && m.rank == 0 {
				vals["value"], vals["iterations"] = m.done.Value, float64(m.done.Iterations)
			}
		}
	}
	if r.started {
		final := r.job.Size
		r.setSize(0)
		if span := r.lastT - r.startS; span > 0 {
			vals["avg_procs"] = r.area / span
		} else {
			vals["avg_procs"] = float64(final)
		}
		vals["max_procs"] = float64(r.maxSize)
		vals["final_procs"] = float64(final)
		vals["grows"] = float64(r.grows)
		vals["shrinks"] = float64(r.shrinks)
		vals["resize_s"] = r.resizeTotal
		vals["released"] = float64(r.released)
	}
	r.emit(msg.EventEnd, fields, vals)
	r.afterSettle(ctx)
}

// announce tells the manager the job left, once: after every processor it
// held was given back.
func (r *mrunner) announce(ctx actor.Context) {
	if r.announced {
		return
	}
	r.announced = true
	ctx.Send(r.cfg.Manager, &msg.JobFinished{JobId: r.cfg.Job.Id, Ok: r.failure == "", Reason: r.failure, Cause: r.cause})
}

// maybeStop stops the actor once it has finished, every processor it held
// is given back and no claim is outstanding (a late claim reply must still
// find it to free the processor).
func (r *mrunner) maybeStop(ctx actor.Context) {
	if r.finished && r.announced && r.claimsOut <= 0 && len(r.pending) == 0 {
		ctx.Stop(ctx.Self())
	}
}

func containsMember(ms []*member, m *member) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}
