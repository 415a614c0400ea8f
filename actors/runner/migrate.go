package runner

// This file is the migrating runner's part (SPEC §6): the contract
// monitor over a checkpointable job's phases, the request to the
// rescheduler, the stop, and the restart of the job on the chosen cluster
// through the scheduler, from its checkpoint.

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/qr"
)

// Migration makes a runner a migrating runner: its job, when its
// application is checkpointable (qr), is watched by a contract monitor and
// may be moved.
type Migration struct {
	Rescheduler *actor.PID
	// Speeds are the clusters' relative compute rates, and Links the
	// latency and bandwidth (bytes/s) between two clusters: what the
	// performance model predicts each phase with.
	Speeds map[string]float64
	Links  func(a, b string) (time.Duration, float64)
	// Upper and Lower are the monitor's tolerance factors (0: SPEC §6's
	// 2.0 and 0.7).
	Upper, Lower float64
}

// migration is a runner's migration state.
type migration struct {
	monitor  migrate.Monitor
	model    *qr.Model
	cluster  string
	decision *msg.MigrationDecision // the move under way
	askT     float64                // when the stop was asked (scenario seconds)
	stopT    float64                // when every rank had stopped
	stopped  []*msg.RankStopped
	restart  *msg.RankRestart // for the next attempt's ranks
	from     string
	// resumed is when each restarted rank began its first phase (scenario
	// seconds), by rank, until every rank has.
	resumed map[int32]float64
}

// watching reports whether the runner monitors its job.
func (r *runner) watching() bool {
	if r.cfg.Migration == nil || r.cfg.Migration.Rescheduler == nil {
		return false
	}
	app, err := apps.Lookup(r.cfg.Job.App)
	if err != nil {
		return false
	}
	_, ok := app.(apps.Checkpointable)
	return ok
}

// contract starts a new contract for the attempt just started: the model
// on its process count, the monitor reset.
func (r *runner) contract() {
	if !r.watching() || len(r.members) == 0 {
		return
	}
	if r.mig == nil {
		r.mig = &migration{}
		r.mig.monitor = migrate.Monitor{Upper: r.cfg.Migration.Upper, Lower: r.cfg.Migration.Lower}
	}
	m, _, err := apps.QRModel(r.cfg.Job.Args, len(r.members))
	if err != nil {
		r.mig.model = nil
		return
	}
	r.mig.model, r.mig.cluster = m, r.members[0].cluster
	r.mig.monitor.Reset()
}

// phaseDone feeds rank 0's phase to the contract monitor and asks the
// rescheduler when it says so. The first phase after a restart records
// the move (resumed) and is not observed: its time holds the wait for the
// other ranks' checkpoint reads.
func (r *runner) phaseDone(ctx actor.Context, x *msg.PhaseDone) {
	if r.mig == nil || r.mig.model == nil || r.failure != "" {
		return
	}
	moving := r.mig.decision != nil
	if r.mig.restart != nil {
		r.resumed(x)
	}
	if x.Rank != 0 || moving {
		return
	}
	pred, err := r.predict(int(x.Phase))
	if err != nil {
		return
	}
	a := r.mig.monitor.Observe(time.Duration(x.TookS*float64(time.Second)), pred)
	figures := &msg.MigrationRequest{JobId: r.cfg.Job.Id, App: r.cfg.Job.App, Args: r.cfg.Job.Args, Cluster: r.mig.cluster,
		Size: int32(len(r.members)), Phase: x.Phase + 1, AverageRatio: a.Average, Ratio: a.Ratio, Runner: msg.FromPID(ctx.Self())}
	ctx.Send(r.cfg.Migration.Rescheduler, &msg.JobProgress{Figures: figures})
	if a.Kind != migrate.RequestMigration {
		return
	}
	ev := r.cfg.Env.Event(msg.EventContractViolation, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"cluster": r.mig.cluster, "reason": a.Reason}
	ev.Values = map[string]float64{"phase": float64(x.Phase), "ratio": a.Ratio, "average": a.Average, "upper": a.Upper}
	r.cfg.Env.Emit(ev)
	ctx.Send(r.cfg.Migration.Rescheduler, figures)
}

// ended tells the rescheduler that the job ended and which nodes it
// released (byCluster): a completion may let a running job move onto them
// (opportunistic migration). Every rigid runner of a plan with a
// rescheduler tells it, whatever its application.
func (r *runner) ended(ctx actor.Context, ok bool, byCluster map[string][]string) {
	if r.cfg.Migration == nil || r.cfg.Migration.Rescheduler == nil {
		return
	}
	x := &msg.JobEnded{JobId: r.cfg.Job.Id, Ok: ok}
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		x.Freed = append(x.Freed, &msg.FreedNodes{Cluster: c, Nodes: byCluster[c]})
	}
	ctx.Send(r.cfg.Migration.Rescheduler, x)
}

// predict is the model's time of phase k on the job's nodes.
func (r *runner) predict(k int) (time.Duration, error) {
	mc := r.cfg.Migration
	nodes := make([]qr.Node, len(r.members))
	_, rate, err := apps.QRModel(r.cfg.Job.Args, len(r.members))
	if err != nil {
		return 0, err
	}
	for i, m := range r.members {
		nodes[i] = qr.Node{Speed: rate * mc.Speeds[m.cluster]}
	}
	links := func(i, j int) (time.Duration, float64) { return mc.Links(r.members[i].cluster, r.members[j].cluster) }
	ts, err := r.mig.model.Predict(k, k+1, nodes, links)
	if err != nil {
		return 0, err
	}
	return ts[0], nil
}

// decided applies the rescheduler's answer: a refusal widens the
// monitor's limits; a migration stops every rank at its next safe point.
func (r *runner) decided(ctx actor.Context, x *msg.MigrationDecision) {
	if r.mig == nil || r.finished || r.failure != "" || r.mig.decision != nil {
		return // a move under way takes no other decision
	}
	if !x.Migrate {
		r.mig.monitor.Declined()
		return
	}
	r.mig.decision, r.mig.askT, r.mig.stopped, r.mig.resumed = x, r.cfg.Env.Now(), nil, nil
	for _, m := range r.members {
		ctx.Send(m.pid, &msg.StopRank{JobId: r.cfg.Job.Id, Reason: fmt.Sprintf("migrate to %s", x.Cluster)})
	}
}

// rankStopped records a rank's checkpoint.
func (r *runner) rankStopped(x *msg.RankStopped) {
	if r.mig != nil && r.mig.decision != nil && r.member(x.Rank) != nil && r.member(x.Rank).node == x.Node {
		r.mig.stopped = append(r.mig.stopped, x)
	}
}

// moveOn restarts a job every rank of which stopped with its checkpoint:
// the scheduler forgets the attempt and gets the job again as a fixed
// request for the chosen cluster; its next ranks restart from the
// checkpoint. False when the attempt did not stop whole (it then ends as
// it would have).
func (r *runner) moveOn(ctx actor.Context) bool {
	if r.mig == nil || r.mig.decision == nil || r.failure != "" || len(r.mig.stopped) != len(r.members) {
		return false
	}
	d, st := r.mig.decision, r.mig.stopped
	rs := &msg.RankRestart{JobId: r.cfg.Job.Id, Phase: st[0].Phase, Layout: st[0].Layout}
	var write float64
	for _, s := range st {
		if s.Phase != rs.Phase {
			return false
		}
		rs.Sources = append(rs.Sources, &msg.CheckpointSource{Rank: s.Rank, DepotAddr: s.DepotAddr, Cluster: s.Cluster})
		write = max(write, s.WriteS)
	}
	ev := r.cfg.Env.Event(msg.EventMigrationStop, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"from": r.mig.cluster, "to": d.Cluster}
	ev.Values = map[string]float64{"phase": float64(rs.Phase), "write_s": write}
	r.cfg.Env.Emit(ev)
	r.mig.restart, r.mig.from, r.mig.stopT = rs, r.mig.cluster, r.cfg.Env.Now()
	job := proto.Clone(r.cfg.Job).(*msg.JobSpec)
	job.Request, job.Size = "fixed", d.Size
	job.Components = []*msg.Component{{Cluster: d.Cluster, Size: d.Size}}
	r.cfg.Job = job
	ctx.Send(r.cfg.Scheduler, &msg.JobFinished{JobId: job.Id, Ok: true, Reason: "migrating to " + d.Cluster})
	r.placed, r.members = nil, nil
	r.readyN, r.connN, r.doneN = 0, 0, 0
	r.started = false
	ctx.Send(r.cfg.Scheduler, &msg.SubmitJob{Job: r.cfg.Job, Runner: msg.FromPID(ctx.Self())})
	return true
}

// resumed records when a restarted rank began its first phase (the
// phase's report, less its time); once every rank has, the move is
// recorded.
func (r *runner) resumed(x *msg.PhaseDone) {
	if _, seen := r.mig.resumed[x.Rank]; seen || r.member(x.Rank) == nil {
		return
	}
	if r.mig.resumed == nil {
		r.mig.resumed = map[int32]float64{}
	}
	r.mig.resumed[x.Rank] = r.cfg.Env.Now() - x.TookS
	if len(r.mig.resumed) == len(r.members) {
		r.restarted()
	}
}

// restarted records a migration once the job runs again: from where to
// where, the predicted cost and the measured one, from every rank stopped
// (checkpoint written) to the last restarted rank beginning its first
// phase: the scheduler's placement, the start-up, and the checkpoint's read
// and redistribution, which every restarted rank does before its first
// phase (the phase's exchanges make the ranks that read theirs sooner wait
// for the last). The wait for the safe point (stop_wait_s) is not in it:
// the job progressed meanwhile. A job that ends with no phase reported
// after its restart (it restarted for its last phase) is measured to its
// end: an upper bound.
func (r *runner) restarted() {
	if r.mig == nil || r.mig.restart == nil || r.mig.decision == nil {
		return
	}
	d := r.mig.decision
	resumed := r.cfg.Env.Now()
	if len(r.mig.resumed) > 0 {
		resumed = slices.Max(slices.Collect(maps.Values(r.mig.resumed)))
	}
	ev := r.cfg.Env.Event(msg.EventMigrated, "runner", r.cfg.Job.Id)
	ev.Fields = map[string]string{"from": r.mig.from, "to": d.Cluster, "cost_model": d.CostModel, "forced": fmt.Sprint(d.Forced),
		"trigger": trigger(d)}
	ev.Values = map[string]float64{"phase": float64(r.mig.restart.Phase), "gain": d.Gain, "predicted_cost_s": d.CostS,
		"measured_cost_s": resumed - r.mig.stopT, "stop_wait_s": r.mig.stopT - r.mig.askT,
		"here_s": d.HereS, "there_s": d.ThereS}
	r.cfg.Env.Emit(ev)
	r.mig.decision, r.mig.restart, r.mig.resumed = nil, nil, nil
}

// Triggers of a migration, as the migrated event records them.
const (
	TriggerRequest       = "request"       // the contract monitor asked
	TriggerOpportunistic = "opportunistic" // a job ended and freed better nodes
)

func trigger(d *msg.MigrationDecision) string {
	if d.Opportunistic {
		return TriggerOpportunistic
	}
	return TriggerRequest
}
