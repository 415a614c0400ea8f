package scenarios

import (
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// Plan is a validated scenario with its defaults filled in, its overrides
// applied and its workload generated. Every duration is scenario time; the
// runtime divides by the time scale (and multiplies by the dilation) to get
// wall time.
type Plan struct {
	Name      string
	Seed      int64
	TimeScale float64
	Dilation  float64
	// Clusters are the included clusters, in file order.
	Clusters []Cluster
	// Links is the undilated link matrix over Clusters (same order): the
	// preset with the pair overrides applied.
	Links netem.Matrix
	// Jobs are sorted by Submit (ties: explicit jobs first, then file or
	// generation order); IDs follow that order.
	Jobs []Job
	// Background is the local load band of each cluster, same order as
	// Clusters; the zero value means no background load.
	Background []Background
	Policy     Policy
	// Duration is the end of the submission window: workload.duration_s, or
	// the latest explicit submission when duration_s is absent.
	Duration time.Duration
	// NetUtilization is the target net utilisation (0 when the arrivals give
	// an explicit mean inter-arrival time or there are no generated jobs).
	NetUtilization float64
	// MeanInterarrival of the generated Poisson arrivals (0: none).
	MeanInterarrival time.Duration
}

// Cluster is one included cluster.
type Cluster struct {
	Name       string
	Nodes      int
	Processors int // per node
	// Speed is the relative compute rate (Leiden 1.0).
	Speed        float64
	CPUGHz       float64
	Interconnect string // myri10g | gbe
}

// Job is one job to submit.
type Job struct {
	ID      string        // "j0001", in submission order
	Submit  time.Duration // scenario time from the start of the run
	App     string
	Args    map[string]float64
	Size    int    // nodes
	Request string // fixed | non-fixed | flexible
	// Components: for fixed, cluster and size of each; for non-fixed, sizes
	// with an empty Cluster; for flexible, empty.
	Components []Component
	Files      []File
}

// Component is one part of a job. Cluster is empty for non-fixed requests.
type Component struct {
	Cluster string
	Size    int // nodes
}

// File is an input file of a job.
type File struct {
	Name     string
	Size     int64 // bytes
	Replicas []string
}

// Background is the local users' load band of one cluster.
type Background struct {
	Min, Max    float64 // fraction of the cluster's nodes
	MeanJob     time.Duration
	MaxJobNodes int
}

// Policy is the scheduler's configuration.
type Policy struct {
	Placement      string
	MaxClusters    int // 0: no cap
	CAMetric       string
	ScanPeriod     time.Duration
	StartupDelay   time.Duration
	ProbePeriod    time.Duration
	PlacementTries int
}

// Request types.
const (
	Fixed    = "fixed"
	NonFixed = "non-fixed"
	Flexible = "flexible"
)

// Interconnects.
const (
	Myri10G = "myri10g"
	GbE     = "gbe"
)

// TotalNodes is the number of nodes over the included clusters.
func (p *Plan) TotalNodes() int {
	n := 0
	for _, c := range p.Clusters {
		n += c.Nodes
	}
	return n
}

// Cluster returns the included cluster of that name.
func (p *Plan) Cluster(name string) (Cluster, bool) {
	for _, c := range p.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return Cluster{}, false
}

// Env is what validation and expansion need to know about the rest of the
// emulator. A nil Apps or Policies list skips that check; Nominal is needed
// only by arrivals given as a net utilisation.
type Env struct {
	// Apps are the known application names.
	Apps []string
	// Policies are the known placement policy names.
	Policies []string
	// Nominal is an application's execution time on nodes nodes of one
	// cluster at speed 1, used to turn a net utilisation into a mean
	// inter-arrival time.
	Nominal func(app string, nodes int) (time.Duration, error)
}

// Overrides replace scenario values at expansion (command-line flags).
// Nil fields keep the scenario's value.
type Overrides struct {
	Seed      *int64
	TimeScale *float64
	Placement *string
	Dilation  *float64
}

// apply returns a copy of s with the overrides in place; s is not changed.
func (s *Scenario) apply(o Overrides) *Scenario {
	c := *s
	if o.Seed != nil {
		v := *o.Seed
		c.Seed = &v
	}
	if o.TimeScale != nil {
		v := *o.TimeScale
		c.TimeScale = &v
	}
	if o.Dilation != nil {
		v := *o.Dilation
		c.Dilation = &v
	}
	if o.Placement != nil {
		c.Policy.Placement = *o.Placement
	}
	return &c
}
