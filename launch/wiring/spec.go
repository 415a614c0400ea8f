package wiring

import (
	"time"

	"fmt"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Actor names. Every role actor has the same name on every backend, so
// that a PID is its host's address plus this name.
const (
	ActorScheduler = "scheduler" // the co-allocating scheduler or the malleability manager
	ActorKIS       = "kis"
	ActorRecorder  = "recorder"
)

// ClusterActor is the name of a cluster's manager.
func ClusterActor(cluster string) string { return "cluster-" + cluster }

// NodeActor is the name of a node actor.
func NodeActor(node string) string { return "node-" + node }

// RunnerActor is the name of a job's runner.
func RunnerActor(job string) string { return "runner-" + job }

// NodeName is the name of node i (0-based) of a cluster: vrije-n001.
func NodeName(cluster string, i int) string { return scenarios.NodeName(cluster, i) }

// Spec is what the role builders need of a run: the plan's clusters, links,
// policy, seed and time, without its workload (which only the submitter
// needs). It travels as JSON to the hosts of the grid backends.
type Spec struct {
	// Clusters in scenario order.
	Clusters []Cluster `json:"clusters"`
	// Links is the undilated link matrix over Clusters.
	Links netem.Matrix `json:"links"`
	// Seed, TimeScale, Dilation and Policy are the scenario's.
	Seed      int64            `json:"seed"`
	TimeScale float64          `json:"time_scale"`
	Dilation  float64          `json:"dilation"`
	Policy    scenarios.Policy `json:"policy"`
	// ProbeBytes is the message size of the information service's
	// bandwidth probes.
	ProbeBytes int `json:"probe_bytes"`
	// RankTimeout bounds how long a runner waits for its ranks (wall);
	// 0 is the runner's default.
	RankTimeout time.Duration `json:"rank_timeout,omitempty"`
	// Malleable holds the bounds of every malleable job by job ID: a
	// runner is started from a msg.JobSpec, which does not carry them.
	Malleable map[string]Bounds `json:"malleable,omitempty"`
}

// Bounds are a malleable job's size bounds in processors.
type Bounds struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Cluster is one cluster of a Spec.
type Cluster struct {
	Name       string               `json:"name"`
	Nodes      int                  `json:"nodes"`
	Processors int                  `json:"processors"`
	Speed      float64              `json:"speed"`
	Background scenarios.Background `json:"background"`
}

// SpecFromPlan builds the Spec of a plan.
func SpecFromPlan(plan *scenarios.Plan, probeBytes int) Spec {
	s := Spec{Links: plan.Links, Seed: plan.Seed, TimeScale: plan.TimeScale, Dilation: plan.Dilation,
		Policy: plan.Policy, ProbeBytes: probeBytes}
	for i, c := range plan.Clusters {
		sc := Cluster{Name: c.Name, Nodes: c.Nodes, Processors: c.Processors, Speed: c.Speed}
		if i < len(plan.Background) {
			sc.Background = plan.Background[i]
		}
		s.Clusters = append(s.Clusters, sc)
	}
	for _, j := range plan.Jobs {
		if j.Malleable {
			if s.Malleable == nil {
				s.Malleable = map[string]Bounds{}
			}
			s.Malleable[j.ID] = Bounds{Min: j.Min, Max: j.Max}
		}
	}
	return s
}

// Factor is scenario seconds per wall second.
func (s *Spec) Factor() float64 {
	d := s.Dilation
	if d <= 0 {
		d = 1
	}
	ts := s.TimeScale
	if ts <= 0 {
		ts = 1
	}
	return ts / d
}

// Cluster returns the cluster of that name and its index.
func (s *Spec) Cluster(name string) (Cluster, int, bool) {
	for i, c := range s.Clusters {
		if c.Name == name {
			return c, i, true
		}
	}
	return Cluster{}, -1, false
}

// Order returns the cluster names in scenario order.
func (s *Spec) Order() []string {
	out := make([]string, len(s.Clusters))
	for i, c := range s.Clusters {
		out[i] = c.Name
	}
	return out
}

// Unavailable returns the pairs no job may span (both orders).
func (s *Spec) Unavailable() map[[2]string]bool {
	u := map[[2]string]bool{}
	for i, a := range s.Links.Clusters {
		for j, b := range s.Links.Clusters {
			if s.Links.Links[i][j].Unavailable {
				u[[2]string{a, b}] = true
			}
		}
	}
	return u
}

// Check reports a Spec whose link matrix does not match its clusters.
func (s *Spec) Check() error {
	if len(s.Clusters) == 0 {
		return fmt.Errorf("no clusters")
	}
	if len(s.Links.Clusters) != len(s.Clusters) || len(s.Links.Links) != len(s.Clusters) {
		return fmt.Errorf("link matrix covers %d clusters, the spec has %d", len(s.Links.Clusters), len(s.Clusters))
	}
	for i, c := range s.Clusters {
		if s.Links.Clusters[i] != c.Name {
			return fmt.Errorf("link matrix cluster %d is %q, want %q", i, s.Links.Clusters[i], c.Name)
		}
		if len(s.Links.Links[i]) != len(s.Clusters) {
			return fmt.Errorf("link matrix row %d has %d entries, want %d", i, len(s.Links.Links[i]), len(s.Clusters))
		}
	}
	return nil
}
