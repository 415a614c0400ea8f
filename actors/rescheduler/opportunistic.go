package rescheduler

// This file is opportunistic migration (SPEC §6): when a job completes and
// frees nodes, would a running job gain by moving onto them?

import (
	"fmt"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
)

// ReasonCandidateSkipped prefixes the reason of an opportunistic decision
// when some running job could not be weighed (its figures or the model
// failed); the rest of the reason is migrate.Opportunistic's.
const ReasonCandidateSkipped = "candidates skipped: "

// opportunistic weighs, for each cluster where the ended job freed nodes,
// every running watched job elsewhere against moving onto those nodes
// (migrate.Opportunistic), records the decision and sends the chosen job's
// runner its migration. A job chosen for one cluster's nodes is not
// weighed for the next.
//
// Choices where the SPEC is silent:
//   - The candidates are the watched jobs that reported a phase (their
//     contract monitor's figures) and are not moving already; a job on the
//     freed nodes' own cluster is not one (its restart would be a request
//     for the cluster it is on, not for the freed nodes).
//   - Here is the model's remaining time on the job's nodes at the pace of
//     its last phase, as for a request; there is the phase under way here
//     at that pace, then the model's time of the phases after it on the
//     freed nodes, each under the load the information service last
//     reported; the cost is the configured cost model's, as for a request,
//     for new nodes that are idle (they were just freed, whatever the
//     information service's status says yet).
//   - The job moves onto as many nodes as were freed there (a fixed
//     request for that cluster and size); the scheduler may give it other
//     idle nodes of the cluster, or make it wait if another job took them.
//   - Config.Invert does not apply: the forced runs compare requested
//     decisions.
func (r *rescheduler) opportunistic(ctx actor.Context, x *msg.JobEnded) {
	chosen := map[string]bool{}
	for _, fr := range x.Freed {
		c, ok := r.cluster(fr.Cluster)
		if !ok || len(fr.Nodes) == 0 {
			continue
		}
		factors := r.nodeFactors(c.Name, fr.Nodes)
		var figs []*msg.MigrationRequest
		var cands []migrate.Candidate
		skipped := 0
		for _, id := range r.candidateJobs(c.Name, chosen) {
			f := r.jobs[id]
			cur, ok := r.cluster(f.Cluster)
			if !ok {
				skipped++
				continue
			}
			here, there, cost, err := r.estimate(f, cur, c, factors, false)
			if err != nil {
				skipped++
				continue
			}
			figs = append(figs, f)
			cands = append(cands, migrate.Candidate{Job: id, Here: here, There: there, Cost: cost})
		}
		ch, err := migrate.Opportunistic(cands, r.cfg.Threshold)
		if err != nil {
			ch = migrate.Choice{Index: -1, Reason: err.Error()}
		}
		if skipped > 0 {
			ch.Reason = fmt.Sprintf("%s%d; %s", ReasonCandidateSkipped, skipped, ch.Reason)
		}
		d := &msg.MigrationDecision{Cluster: c.Name, Size: int32(len(fr.Nodes)), CostModel: r.cfg.Cost.Name(),
			Reason: ch.Reason, Opportunistic: true, FreedBy: x.JobId}
		best := bestIndex(ch)
		if best >= 0 {
			bd := ch.Decisions[best]
			d.Gain, d.HereS, d.ThereS, d.CostS = bd.Gain, bd.Here.Seconds(), bd.There.Seconds(), bd.Cost.Seconds()
		}
		if ch.Index >= 0 {
			d.JobId, d.Migrate = ch.Job, true
			chosen[ch.Job] = true
		}
		r.emitOpportunistic(d, cands, best, skipped)
		if ch.Index >= 0 {
			r.send(ctx, figs[ch.Index].Runner, d)
		}
	}
}

// bestIndex is the chosen candidate, or when none is, the one of largest
// gain (the figures an opportunistic decision reports); -1 without
// candidates.
func bestIndex(ch migrate.Choice) int {
	if ch.Index >= 0 {
		return ch.Index
	}
	best := -1
	for i, d := range ch.Decisions {
		if best < 0 || d.Gain > ch.Decisions[best].Gain {
			best = i
		}
	}
	return best
}

// candidateJobs are the watched jobs that may move onto nodes of cluster
// c, sorted by job (Opportunistic gives equal gains to the first listed).
func (r *rescheduler) candidateJobs(c string, chosen map[string]bool) []string {
	var ids []string
	for id, f := range r.jobs {
		if _, moving := r.moving[id]; moving || chosen[id] || f.Cluster == c {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// emitOpportunistic records an opportunistic decision: the job whose end
// freed the nodes, the cluster, the chosen job ("" for none), the best
// candidate (chosen or not) with its figures, and how many jobs were
// weighed and skipped.
func (r *rescheduler) emitOpportunistic(d *msg.MigrationDecision, cands []migrate.Candidate, best, skipped int) {
	ev := r.cfg.Env.Event(msg.EventOpportunistic, "rescheduler", d.JobId)
	ev.Fields = map[string]string{"freed_by": d.FreedBy, "to": d.Cluster, "chosen": d.JobId, "migrate": fmt.Sprint(d.Migrate),
		"reason": d.Reason, "cost_model": d.CostModel}
	if best >= 0 {
		ev.Fields["best"] = cands[best].Job
	}
	ev.Values = map[string]float64{"gain": d.Gain, "here_s": d.HereS, "there_s": d.ThereS, "cost_s": d.CostS,
		"candidates": float64(len(cands)), "skipped": float64(skipped), "nodes": float64(d.Size)}
	r.cfg.Env.Emit(ev)
}
