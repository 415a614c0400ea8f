package wiring

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/kis"
	"github.com/koala-emu/koala-emu/actors/mmanager"
	"github.com/koala-emu/koala-emu/actors/mrunner"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
	"github.com/koala-emu/koala-emu/actors/runner"
	"github.com/koala-emu/koala-emu/actors/scheduler"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Peers are the PIDs a role needs of the others. How they are found is the
// backend's business (a local PID in one process, a member's address plus
// the actor's name on the grid backends); what each role gets is decided
// here.
type Peers struct {
	Scheduler *actor.PID
	KIS       *actor.PID
	// Clusters are the cluster managers by cluster name.
	Clusters map[string]*actor.PID
	// Rescheduler is the rescheduler (nil: none; migration.go).
	Rescheduler *actor.PID
}

// Scheduler builds the scheduler role: the malleability manager when the
// plan has a malleability policy (it takes the scheduler's place and name,
// so the information service and rigid runners reach it unchanged),
// otherwise the co-allocating scheduler. stats counts the manager's
// invariant checks (nil: counted only as violation events).
func (s *Spec) Scheduler(env actors.Env, p Peers, stats *invariant.Stats) (*actor.Props, error) {
	order := s.Order()
	if m := s.Policy.Malleability; m != nil {
		props, err := mmanager.Props(mmanager.Config{
			Approach: m.Approach, Policy: m.Policy, Threshold: m.Threshold, Thresholds: m.Thresholds,
			PollPeriod: m.PollPeriod, MaxTries: m.MaxTries, OpTimeout: m.OpTimeout,
			Clusters: p.Clusters, Order: order, Stats: stats, Env: env,
		})
		if err != nil {
			return nil, fmt.Errorf("policy.malleability: %w", err)
		}
		return props, nil
	}
	policy, err := placement.New(s.Policy.Placement)
	if err != nil {
		return nil, fmt.Errorf("policy.placement: %w", err)
	}
	return scheduler.Props(scheduler.Config{
		Policy: policy, Options: placement.Options{MaxClusters: s.Policy.MaxClusters, CAMetric: s.Policy.CAMetric},
		ScanPeriod: s.Policy.ScanPeriod, MaxTries: s.Policy.PlacementTries, Clusters: p.Clusters, Order: order, Env: env,
	}), nil
}

// KIS builds the information service; ready is closed after its first
// probe round.
func (s *Spec) KIS(env actors.Env, p Peers, ready chan<- struct{}) *actor.Props {
	return kis.Props(kis.Config{Order: s.Order(), Clusters: p.Clusters, Unavailable: s.Unavailable(),
		Scheduler: p.Scheduler, Rescheduler: p.Rescheduler, ProbePeriod: s.Policy.ProbePeriod, BandwidthBytes: s.ProbeBytes, Ready: ready, Env: env})
}

// SpawnCentral spawns the central roles of a run whose actors share one
// actor system, through spawn: the scheduler (Scheduler: or the
// malleability manager) and the information service (KIS), which closes
// ready after its first probe round. The grid backends spawn each in the
// host that holds it.
func (s *Spec) SpawnCentral(env actors.Env, p Peers, stats *invariant.Stats, ready chan<- struct{}, spawn func(*actor.Props, string) error) error {
	props, err := s.Scheduler(env, p, stats)
	if err != nil {
		return err
	}
	if err := spawn(props, ActorScheduler); err != nil {
		return err
	}
	return spawn(s.KIS(env, p, ready), ActorKIS)
}

// ClusterManager builds the manager of cluster name over its nodes, with
// the cluster's background load seeded from the scenario's seed and the
// cluster's index (seed + index + 1), so every backend replays the same
// local users.
func (s *Spec) ClusterManager(env actors.Env, name string, nodes []cluster.NodeInfo, p Peers, prober cluster.Prober) (*actor.Props, error) {
	c, ci, ok := s.Cluster(name)
	if !ok {
		return nil, fmt.Errorf("cluster manager: unknown cluster %q", name)
	}
	var bg *cluster.Background
	if b := c.Background; b.Max > 0 {
		bg = cluster.NewBackground(b.Min, b.Max, b.MeanJob, b.MaxJobNodes, uint64(s.Seed)+uint64(ci)+1)
	}
	perLink, _ := s.ProbeTimeouts()
	return cluster.Props(cluster.Config{Name: c.Name, Nodes: nodes, KIS: p.KIS, Background: bg, Prober: prober, ProbeTimeout: perLink,
		Processors: c.Processors, Env: env}), nil
}

// NodeConfig is the one place a node actor's configuration is built, on
// every backend: node name of cluster, its egress (the shaper of its
// outgoing rank traffic) and the address its ranks listen on ("" is the
// node actor's default).
func (s *Spec) NodeConfig(env actors.Env, clusterName, name string, egress netem.Egress, listenHost string) (node.Config, error) {
	c, _, ok := s.Cluster(clusterName)
	if !ok {
		return node.Config{}, fmt.Errorf("node %s: unknown cluster %q", name, clusterName)
	}
	if s.Links.Index(c.Name) < 0 {
		return node.Config{}, fmt.Errorf("node %s: netem: unknown cluster %q", name, c.Name)
	}
	return node.Config{Name: name, Cluster: c.Name, Speed: c.Speed, Processors: c.Processors,
		Dilation: s.Dilation, Egress: egress, Links: s.Links, ListenHost: listenHost, Env: env}, nil
}

// Runner builds a job's runner: a malleable runner when the job is
// malleable (Spec.Malleable), the rigid runner otherwise.
func (s *Spec) Runner(env actors.Env, job *msg.JobSpec, p Peers, stats *invariant.Stats) *actor.Props {
	if b, ok := s.Malleable[job.GetId()]; ok {
		// Validation gave every malleable job an application with a
		// profile; the zero Profile (any count in [Min, Max]) is never used.
		prof, _ := apps.LookupProfile(job.GetApp())
		return mrunner.Props(mrunner.Config{Job: job, Min: b.Min, Max: b.Max, Profile: prof,
			Manager: p.Scheduler, Clusters: p.Clusters, TimeScale: s.TimeScale, StartupDelay: s.Policy.StartupDelay,
			RankTimeout: s.RankTimeout, Stats: stats, Env: env})
	}
	return runner.Props(runner.Config{Job: job, Scheduler: p.Scheduler, Clusters: p.Clusters, TimeScale: s.TimeScale,
		StartupDelay: s.Policy.StartupDelay, RankTimeout: s.RankTimeout, Resubmits: s.Policy.Resubmits, Migration: s.runnerMigration(p), Env: env})
}

// JobSpec converts a scenario job into its wire form; site is the runner
// site that starts it ("" in one process).
func JobSpec(j scenarios.Job, site string) *msg.JobSpec {
	spec := &msg.JobSpec{Id: j.ID, App: j.App, Args: j.Args, Size: int32(j.Size), Request: j.Request,
		SubmitS: j.Submit.Seconds(), Site: site}
	for _, c := range j.Components {
		spec.Components = append(spec.Components, &msg.Component{Cluster: c.Cluster, Size: int32(c.Size)})
	}
	for _, f := range j.Files {
		spec.Files = append(spec.Files, &msg.File{Name: f.Name, Size: f.Size, Replicas: f.Replicas})
	}
	return spec
}

// FailJob emits the end of a job that could not be started (source
// "launcher"), so the recorder counts it failed with reason.
func FailJob(env actors.Env, jobID, reason string) {
	ev := env.Event(msg.EventEnd, "launcher", jobID)
	ev.Fields = map[string]string{"status": "failed", "reason": reason, "cause": msg.FailureCause_FAILURE_LAUNCH.Name()}
	env.Emit(ev)
}
