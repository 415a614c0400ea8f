package scenarios

import (
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// Plan is a validated scenario with its defaults filled in, its overrides
// applied and its workload generated. Every duration is scenario time; the
// runtime divides by the time scale (and multiplies by the dilation) to get
// wall time.
type Plan struct {
	Name string
	Seed int64
	// TimeScale is the scenario's time scale; 1 while WallBudget is set and
	// the launcher has not resolved it (see Resolve).
	TimeScale float64
	// Dilation is the dilation factor; 1 while DilationAuto is set and the
	// launcher has not resolved it (see Resolve).
	Dilation float64
	// DilationAuto: the scenario (or the command line) asks the launcher to
	// choose the dilation the host can carry. The launcher resolves it with
	// Resolve before the run starts.
	DilationAuto bool
	// WallBudget, when greater than 0, is the wall time the run may take,
	// given in place of a time scale: the launcher derives the time scale
	// from it (and the dilation) and sets it with Resolve.
	WallBudget time.Duration
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
	// Faults is the faults timeline, sorted by time: the scenario's
	// entries plus the heals and restores their durations imply.
	Faults []Fault
	// Batch is the batch grid of a trace replay (nil for a KOALA grid). Its
	// jobs are also in Jobs (application "swf", request "grid" or "local",
	// size the trace's processors), so every backend counts them alike;
	// Clusters are its clusters (one processor per node), and Duration is
	// not the submission window but a generous bound on the replay's end
	// (the last submission plus ten times every trace walltime), so that
	// the deadline never cuts a replay short.
	Batch *BatchPlan
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
	// Malleable jobs grow and shrink between Min and Max processors (the
	// scenario's bounds intersected with the application's profile, rounded
	// inwards to powers of two for a power-of-two application); Size is the
	// initial size. Min and Max are 0 for rigid jobs.
	Malleable bool
	Min, Max  int
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
	// Resubmits is how many times a job that failed after its placement is
	// submitted again (policy.on_failure: resubmit(N)); 0: it fails.
	Resubmits int
	// Malleability is the malleability manager's configuration; nil: no
	// malleability manager (the co-allocating scheduler runs).
	Malleability *Malleability
	// Migration is the rescheduler's configuration; nil: no rescheduler,
	// no job migrates.
	Migration *Migration
}

// Malleability configures the malleability manager (SPEC §4).
type Malleability struct {
	Approach string // pra | pwa
	Policy   string // fpsma | egs
	// Threshold is the fraction of every cluster's processors KOALA may hold
	// (1: no cap); Thresholds overrides it for the clusters it names (nil
	// when none does).
	Threshold  float64
	Thresholds map[string]float64
	PollPeriod time.Duration
	// OpTimeout: how long the manager waits for a grow or shrink to be
	// acknowledged.
	OpTimeout time.Duration
	// MaxTries: rounds a waiting job may wait before it fails (0: never).
	MaxTries int
}

// ThresholdOf returns the threshold of a cluster.
func (m *Malleability) ThresholdOf(cluster string) float64 {
	if t, ok := m.Thresholds[cluster]; ok {
		return t
	}
	return m.Threshold
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

// NodeCluster returns the included cluster a node name (NodeName) belongs
// to.
func (p *Plan) NodeCluster(node string) (string, bool) {
	c, why := nodeOf(p.Clusters, node)
	return c, why == ""
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
// emulator. A nil list (or map) skips the checks that use it; Nominal is
// needed only by arrivals given as a net utilisation.
type Env struct {
	// Apps are the known application names.
	Apps []string
	// Policies are the known placement policy names.
	Policies []string
	// MalleableApps are the applications that can resize (ft, nbody).
	MalleableApps []string
	// Profiles are the malleability profiles' size bounds by application.
	// Without a profile (nil map), a malleable application's bounds must be
	// given in the scenario.
	Profiles map[string]ProfileBounds
	// Approaches are the malleability manager's job-management approaches
	// (pra, pwa); MalleabilityPolicies its policies (fpsma, egs).
	Approaches           []string
	MalleabilityPolicies []string
	// CostModels are the rescheduler's migration cost models (nil: the
	// built-in names, predicted and worst-case).
	CostModels []string
	// Nominal is an application's execution time on nodes nodes of one
	// cluster at speed 1, used to turn a net utilisation into a mean
	// inter-arrival time.
	Nominal func(app string, nodes int) (time.Duration, error)
}

// ProfileBounds is what validation needs of an application's malleability
// profile: the sizes it runs on.
type ProfileBounds struct {
	Min, Max   int
	PowerOfTwo bool // FT: powers of two only
}

// Overrides replace scenario values at expansion (command-line flags).
// Nil fields keep the scenario's value. The malleability overrides need the
// block they change (policy.malleability, workload.malleable) in the
// scenario; Expand reports an error otherwise.
type Overrides struct {
	Seed *int64
	// TimeScale replaces time_scale, and drops a wall_budget of the
	// scenario: a time scale on the command line wins.
	TimeScale *float64
	// WallBudget replaces wall_budget and drops the scenario's time_scale
	// (the time scale then follows from the dilation); giving both it and
	// TimeScale is an error.
	WallBudget *WallBudget
	Placement  *string
	// Application replaces workload.application: the application of the
	// generated arrivals (explicit jobs keep their own).
	Application *string
	// Dilation replaces the scenario's dilation with a factor (>= 1), and
	// DilationAuto with auto; giving both is an error. The Dilation type's
	// Set method (a flag.Value) and ParseDilation read "auto" or a number
	// for a command line: see Dilation.Override.
	Dilation     *float64
	DilationAuto bool
	// MalleabilityPolicy replaces policy.malleability.policy.
	MalleabilityPolicy *string
	// Approach replaces policy.malleability.approach.
	Approach *string
	// MalleableFraction replaces workload.malleable.fraction (W_mr: 0.5).
	MalleableFraction *float64
	// ReallocMode and ReallocHeuristic replace batch.realloc.mode and
	// batch.realloc.heuristic of a batch grid.
	ReallocMode      *string
	ReallocHeuristic *string
}

// apply returns a copy of s with the overrides in place, and the overrides
// that have nothing to change; s is not changed.
func (s *Scenario) apply(o Overrides) (*Scenario, Errors) {
	c := *s
	var errs Errors
	if o.MalleabilityPolicy != nil || o.Approach != nil {
		if s.Policy.Malleability == nil {
			errs = append(errs, FieldError{Path: "policy.malleability",
				Msg: "the approach and malleability policy overrides need a policy.malleability block in the scenario"})
		} else {
			m := *s.Policy.Malleability
			if o.MalleabilityPolicy != nil {
				m.Policy = *o.MalleabilityPolicy
			}
			if o.Approach != nil {
				m.Approach = *o.Approach
			}
			c.Policy.Malleability = &m
		}
	}
	if o.MalleableFraction != nil {
		if s.Workload.Malleable == nil {
			errs = append(errs, FieldError{Path: "workload.malleable",
				Msg: "the malleable fraction override needs a workload.malleable block in the scenario"})
		} else {
			m := *s.Workload.Malleable
			v := *o.MalleableFraction
			m.Fraction = &v
			c.Workload.Malleable = &m
		}
	}
	if o.ReallocMode != nil || o.ReallocHeuristic != nil {
		if s.Batch == nil {
			errs = append(errs, FieldError{Path: "batch",
				Msg: "the reallocation overrides need a batch section in the scenario"})
		} else {
			b := *s.Batch
			if o.ReallocMode != nil {
				b.Realloc.Mode = *o.ReallocMode
			}
			if o.ReallocHeuristic != nil {
				b.Realloc.Heuristic = *o.ReallocHeuristic
			}
			c.Batch = &b
		}
	}
	if o.Seed != nil {
		v := *o.Seed
		c.Seed = &v
	}
	if o.TimeScale != nil {
		v := *o.TimeScale
		c.TimeScale = &v
	}
	switch {
	case o.Dilation != nil && o.DilationAuto:
		errs = append(errs, FieldError{Path: "dilation",
			Msg: fmt.Sprintf("the overrides give both a dilation factor (%g) and auto; give one", *o.Dilation)})
	case o.Dilation != nil:
		c.Dilation = &Dilation{Factor: *o.Dilation}
	case o.DilationAuto:
		c.Dilation = &Dilation{Auto: true}
	}
	if o.TimeScale != nil {
		c.WallBudget = nil
	}
	switch {
	case o.WallBudget != nil && o.TimeScale != nil:
		errs = append(errs, FieldError{Path: "wall_budget",
			Msg: "the overrides give both a time scale and a wall budget; give one"})
	case o.WallBudget != nil:
		v := *o.WallBudget
		c.WallBudget, c.TimeScale = &v, nil
	}
	if o.Placement != nil {
		c.Policy.Placement = *o.Placement
	}
	if o.Application != nil {
		c.Workload.Application = *o.Application
	}
	return &c, errs
}
