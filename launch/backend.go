package launch

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Backend is where a run's actors live: a value found by name in the
// registry (Backends, LookupBackend).
type Backend interface {
	// Name is the backend's name (--backend).
	Name() string
	// Capabilities say what the backend can do; Check refuses the rest.
	Capabilities() Capabilities
	// Run runs a plan. The plan has been checked against the capabilities
	// (Check) by the registry's callers; Run checks again.
	Run(ctx context.Context, plan *scenarios.Plan, opts Options) (*Result, error)
	// Calibrate measures every cluster pair of a link matrix as a run on
	// this backend shapes it.
	Calibrate(ctx context.Context, req CalibrateRequest) (*Calibration, error)
	// Clean removes what runs of this backend left whose owner is gone
	// (or the runs named by opts), and lists what it removed.
	Clean(ctx context.Context, opts CleanOptions) (*CleanReport, error)
}

// Capabilities are what a backend can do.
type Capabilities struct {
	// Shapers are the shaping mechanisms Options.Shaper may ask for ("" and
	// "auto" let the backend choose).
	Shapers []string `json:"shapers"`
	// KernelShaping: links are shaped by the kernel (netem qdisc, HTB and
	// the delay line), each host shaping its own egress.
	KernelShaping bool `json:"kernel_shaping"`
	// Malleability: the malleability manager and malleable runners run.
	Malleability bool `json:"malleability"`
	// Membership: hosts find each other through a gossip membership and
	// node failures are detected and reported.
	Membership bool `json:"membership"`
	// Isolation: every actor host has its own network stack.
	Isolation bool `json:"isolation"`
	// NeedsRoot and NeedsDocker: what the machine must give.
	NeedsRoot   bool `json:"needs_root"`
	NeedsDocker bool `json:"needs_docker"`
	// Faults are the kinds of the scenario's faults timeline the backend
	// applies (kill, partition, heal, degrade, restore, load, unload);
	// Check refuses a plan with any other.
	Faults []string `json:"faults,omitempty"`
	// Migration: the rescheduler runs and checkpointable jobs migrate
	// (policy.migration): ranks stop, checkpoints cross the links, jobs
	// restart elsewhere.
	Migration bool `json:"migration"`
	// Simulated: nothing real runs; a virtual clock jumps from event to
	// event and a performance model predicts jobs' executions from the
	// link matrix (links are modelled, not shaped).
	Simulated bool `json:"simulated"`
	// BatchGrid: the backend runs a batch grid (scenario batch: batch
	// clusters, servers and the agent of SPEC §5, jobs replayed from SWF
	// traces).
	BatchGrid bool `json:"batch_grid"`
}

// Check is the one place a backend refuses what it cannot do: a shaper it
// cannot install, a performance model (Options.SimModel) on a backend that
// simulates nothing, a model file that does not load, a malleable plan (a
// malleability policy or a malleable application) without malleability,
// or a fault it cannot apply. plan may be nil: then only the options are
// checked.
func Check(b Backend, plan *scenarios.Plan, opts Options) error {
	c := b.Capabilities()
	if err := checkShaper(b.Name(), c, opts.Shaper); err != nil {
		return err
	}
	if err := checkModel(b.Name(), c, opts.SimModel); err != nil {
		return err
	}
	if plan != nil {
		for _, f := range plan.Faults {
			if !slices.Contains(c.Faults, f.Kind) {
				return fmt.Errorf("faults[%d]: the %s backend cannot apply %s faults (it applies: %s; the inproc backend applies them all)",
					f.Entry, b.Name(), f.Kind, orNone(c.Faults))
			}
		}
	}
	if plan != nil && plan.Batch != nil && !c.BatchGrid {
		return fmt.Errorf("batch: the %s backend cannot run a batch grid (batch clusters fed by SWF traces); use --backend sim or inproc", b.Name())
	}
	if plan != nil && plan.Policy.Migration != nil && !c.Migration {
		return fmt.Errorf("policy.migration: the %s backend cannot migrate running jobs (stop, checkpoint transfer and restart run on inproc only)", b.Name())
	}
	if plan != nil && plan.Policy.Malleability != nil && !c.Malleability {
		return fmt.Errorf("policy.malleability: the %s backend cannot run the malleability manager and malleable runners", b.Name())
	}
	if plan != nil && !c.Malleability {
		malleable := apps.MalleableNames()
		for _, j := range plan.Jobs {
			if slices.Contains(malleable, j.App) {
				return fmt.Errorf("workload: job %s runs the malleable application %s, which the %s backend cannot run (its execution time depends on its resizes)",
					j.ID, j.App, b.Name())
			}
		}
	}
	return nil
}

// checkModel refuses a model on a backend that runs jobs for real, and a
// model that does not load (a file that is missing or malformed: the error
// names it).
func checkModel(name string, c Capabilities, model string) error {
	if model == "" {
		return nil
	}
	if !c.Simulated {
		return fmt.Errorf("model %q: the %s backend runs its jobs, it predicts none (a model is the sim backend's)", model, name)
	}
	_, _, err := simModelFile(model)
	return err
}

func checkShaper(name string, c Capabilities, shaper string) error {
	if shaper == "" || shaper == netem.Auto || slices.Contains(c.Shapers, shaper) {
		return nil
	}
	hint := ""
	if !c.KernelShaping {
		hint = " (use --backend netns or docker for kernel shaping)"
	}
	return fmt.Errorf("shaper %q is not available on the %s backend: it can install %s%s", shaper, name, strings.Join(c.Shapers, ", "), hint)
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// checkPlan is Check for a backend's own Run.
func checkPlan(b Backend, plan *scenarios.Plan, opts Options) error { return Check(b, plan, opts) }

// CalibrateRequest is what Calibrate measures.
type CalibrateRequest struct {
	// Links is the undilated link matrix; Dilation is applied to every
	// link (<= 1: none).
	Links    netem.Matrix
	Dilation float64
	// Shaper is the mechanism asked for (auto or one of the capabilities'
	// Shapers).
	Shaper string
	// Progress receives progress lines; nil discards.
	Progress io.Writer
}

// Calibration is what Calibrate measured.
type Calibration struct {
	// Mechanism is the shaping mechanism in effect.
	Mechanism string
	Rows      []netem.CalibrationRow
	Summary   netem.CalibrationSummary
}

// Backends returns every backend, sorted by name. It is the only place
// where backends are listed.
func Backends() []Backend {
	bs := append([]Backend{inproc{}, simBackend{}}, multihostBackends()...)
	sort.Slice(bs, func(i, j int) bool { return bs[i].Name() < bs[j].Name() })
	return bs
}

// BackendNames lists the backends' names, sorted.
func BackendNames() []string {
	var names []string
	for _, b := range Backends() {
		names = append(names, b.Name())
	}
	return names
}

// LookupBackend returns the backend of that name.
func LookupBackend(name string) (Backend, error) {
	for _, b := range Backends() {
		if b.Name() == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("unknown backend %q (known: %s%s)", name, strings.Join(BackendNames(), ", "), LeftOut)
}
