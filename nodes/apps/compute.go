package apps

import (
	"context"
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// ComputeName is the name Lookup finds Compute under.
const ComputeName = "compute"

// Compute is one process of a batch grid's trace job (SPEC §5, package
// actors/batch): it computes for Arg "runtime_s" seconds of scenario time
// on its node (default 60; 0 computes nothing) and sends nothing. runtime_s is the job's
// runtime on its cluster, already scaled by the cluster's speed (the
// trace gives it), so the process computes the reference-processor work
// that takes that long at its node's speed and processors
// (Comm.WorkFor), divided by the time scale, in one call of
// Comm.Compute: it waits runtime_s / time scale x dilation of wall time,
// and an abort (a kill at the job's walltime) ends the wait at once.
//
// Compute is not among Names: no workload names it (a trace job's runtime
// comes from its trace, not from a nominal time); a batch cluster manager
// starts it on its node actors. Nominal(n) = runtime_s on any number of
// nodes: every process computes the whole runtime side by side.
type Compute struct{}

// Name implements App.
func (Compute) Name() string { return ComputeName }

// Args implements ArgApp.
func (Compute) Args() map[string]float64 { return map[string]float64{"runtime_s": 60} }

// Nominal implements App.
func (a Compute) Nominal(nodes int) time.Duration {
	d, _ := a.NominalArgs(nodes, nil)
	return d
}

// NominalArgs implements ArgApp.
func (a Compute) NominalArgs(_ int, args map[string]float64) (time.Duration, error) {
	r, err := resolve(a.Name(), a.Args(), args)
	if err != nil {
		return 0, err
	}
	return time.Duration(r["runtime_s"] * float64(time.Second)), nil
}

// Run implements App.
func (a Compute) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	r, err := resolve(a.Name(), a.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if r["runtime_s"] < 0 {
		return Result{}, fmt.Errorf("apps: %s: argument runtime_s must be >= 0 (got %v)", a.Name(), r["runtime_s"])
	}
	d := time.Duration(r["runtime_s"] / p.scale() * float64(time.Second))
	if err := c.Compute(ctx, c.WorkFor(d)); err != nil {
		return Result{}, fmt.Errorf("%s: %w", ComputeName, err)
	}
	return Result{Iterations: 1, Value: r["runtime_s"]}, nil
}
