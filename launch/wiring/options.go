package wiring

import (
	"io"
	"sort"
	"time"

	"github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Options control a run on any backend.
type Options struct {
	// Out is the results directory; empty writes nothing.
	Out string
	// Shaper is the shaping mechanism asked for: auto, userspace, netem or
	// htb (the backend's capabilities say which it can install).
	Shaper string
	// Progress receives progress lines and the manifest; nil is silent.
	Progress io.Writer
	// ProgressEvery is the wall time between progress lines (default 10 s).
	ProgressEvery time.Duration
	// Drain bounds, in scenario time after the workload ends, how long the
	// run waits for jobs still queued or running; they then end failed with
	// ReasonDeadline. Default 4 h.
	Drain time.Duration
	// ProbeBytes is the message size of bandwidth probes (default 256 KiB).
	ProbeBytes int
	// RequireFaithful makes a run whose fidelity verdict is not faithful
	// end with an error (after its results are written).
	RequireFaithful bool
	// KeepDilation: a wall budget never lowers an auto dilation; a run that
	// cannot fit its budget at the dilation the host needs takes longer
	// (studies set it: their figures must be faithful). Without it the
	// budget wins and the run says it is degraded (a smoke run).
	KeepDilation bool
	// HostShare is how many runs share the host at once (a study's or a
	// sweep's cells run side by side); auto dilation carries this run's
	// demand on its share of the host's capacity (fidelity.Capacity.Shared).
	// 0 or 1: the run has the host to itself.
	HostShare int
	// Host, when set, is the host's capacity measured once for runs that
	// share it (launch.ShareHost): auto dilation uses it instead of the
	// kept figures, so that runs started together never measure each other
	// (figures of a busy machine are not kept, so they would).
	Host *fidelity.Capacity
	// Dilation is how the run's dilation was chosen (launch.Prepare sets
	// it); it is reported in results.json's fidelity section.
	Dilation *fidelity.Choice
	// SimModel is the sim backend's model file: empty or "typed" for the
	// applications' typed Traffic alone, "shipped" for the file learnt on
	// inproc (launch/sim/models/inproc.json), else a path (written by
	// koala-emu model learn).
	SimModel string
}

// Defaults of Options.
const (
	DefaultProgressEvery = 10 * time.Second
	DefaultDrain         = 4 * time.Hour
	DefaultProbeBytes    = 256 << 10
)

// WithDefaults returns o with every unset field at its default; Progress
// becomes io.Discard when nil.
func (o Options) WithDefaults() Options {
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	if o.Drain <= 0 {
		o.Drain = DefaultDrain
	}
	if o.ProbeBytes == 0 {
		o.ProbeBytes = DefaultProbeBytes
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// ReasonDeadline is the failure reason of jobs still unfinished when the
// run's drain time ran out.
const ReasonDeadline = "run ended before the job finished"

// Result is what a run produced.
type Result struct {
	Summary  results.Summary
	Jobs     []results.Job
	Manifest netem.Manifest
}

// Nominal is a job's single-cluster execution time in scenario seconds.
func Nominal(app string, size int) float64 {
	a, err := apps.Lookup(app)
	if err != nil {
		return 0
	}
	return a.Nominal(size).Seconds()
}

// ScenarioEnv tells the scenarios package which applications and placement
// policies exist and how long an application takes on one cluster.
func ScenarioEnv() scenarios.Env {
	env := scenarios.Env{
		Apps:          apps.Names(),
		Policies:      placement.Names(),
		MalleableApps: apps.MalleableNames(),
		CostModels:    migrate.CostModelNames(),
		Nominal: func(app string, nodes int) (time.Duration, error) {
			a, err := apps.Lookup(app)
			if err != nil {
				return 0, err
			}
			return a.Nominal(nodes), nil
		},
		Profiles: map[string]scenarios.ProfileBounds{},
	}
	for _, n := range apps.ProfileNames() {
		if p, ok := apps.LookupProfile(n); ok {
			env.Profiles[n] = scenarios.ProfileBounds{Min: p.Min, Max: p.Max, PowerOfTwo: p.PowerOfTwo}
		}
	}
	for n := range malleability.Approaches() {
		env.Approaches = append(env.Approaches, n)
	}
	for n := range malleability.Registry() {
		env.MalleabilityPolicies = append(env.MalleabilityPolicies, n)
	}
	sort.Strings(env.Approaches)
	sort.Strings(env.MalleabilityPolicies)
	return env
}
