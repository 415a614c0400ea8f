package mrunner

import (
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// observe queues a request; mandatory ones go before voluntary ones. The
// runner acts on one request at a time, when the previous change is done.
func (r *mrunner) observe(ctx actor.Context, q request) {
	if !r.started || r.finished || r.failure != "" {
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Reason: "job not running"})
		}
		return
	}
	if q.n <= 0 {
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Reason: "no processors asked"})
		}
		return
	}
	if q.mandatory {
		i := 0
		for i < len(r.queue) && r.queue[i].mandatory {
			i++
		}
		r.queue = append(r.queue[:i], append([]request{q}, r.queue[i:]...)...)
	} else {
		r.queue = append(r.queue, q)
	}
	r.next(ctx)
}

// decide returns how many processors the job accepts to add or remove, and
// why fewer than asked.
//
// A grow accepts what the application can use (Job.Take: its maximum and,
// for FT, the largest power of two). A mandatory shrink releases what the
// application must (Job.Release: never below the minimum; FT lands on a
// power of two and may give more). A voluntary shrink is accepted only when
// it does not make the application slower by its profile (past the best
// size); otherwise it is declined. Unknown profiles accept any count.
func (r *mrunner) decide(q request) (int, string) {
	if q.grow {
		a := r.job.Take(q.n)
		if a < q.n {
			return a, fmt.Sprintf("accepts %d of %d (size %d, profile %s)", a, q.n, r.job.Size, r.cfg.Profile.Name)
		}
		return a, ""
	}
	a := r.job.Release(q.n)
	if a == 0 {
		return 0, fmt.Sprintf("at its minimum (size %d)", r.job.Size)
	}
	if !q.mandatory && q.initiator == ByScheduler && r.cfg.Profile.Name != "" && r.cfg.Profile.Exec(r.job.Size-a) > r.cfg.Profile.Exec(r.job.Size) {
		return 0, fmt.Sprintf("voluntary shrink to %d would slow the application down", r.job.Size-a)
	}
	if a != q.n {
		return a, fmt.Sprintf("releases %d of %d asked (size %d, profile %s)", a, q.n, r.job.Size, r.cfg.Profile.Name)
	}
	return a, ""
}

// next starts the next queued request when no change is under way.
func (r *mrunner) next(ctx actor.Context) {
	for r.cur == nil && len(r.queue) > 0 && r.started && !r.finished && r.failure == "" {
		q := r.queue[0]
		r.queue = r.queue[1:]
		acc, why := r.decide(q)
		if r.ending {
			acc, why = 0, "the application is ending"
		}
		if q.id != 0 {
			ctx.Send(r.cfg.Manager, &msg.ResizeReply{JobId: r.cfg.Job.Id, RequestId: q.id, Accepted: int32(acc), Reason: why})
		}
		if acc == 0 {
			r.emit(msg.EventResizeDeclined, map[string]string{"op": msg.ResizeKind(q.grow), "initiator": q.initiator,
				"mandatory": strconv.FormatBool(q.mandatory), "reason": why},
				map[string]float64{"requested": float64(q.n), "size": float64(r.job.Size)})
			continue
		}
		r.nextID++
		r.cur = &op{req: q, resizeID: r.nextID, from: r.job.Size, accepted: acc, startedAt: r.env().Now(), safeMin: -1}
		if q.grow {
			r.planGrow(ctx)
		} else {
			r.planShrink(ctx)
		}
	}
}
