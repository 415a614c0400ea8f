package launch

import (
	"context"
	"fmt"
	"io"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Compile-time checks that every backend implements Backend.
var (
	_ Backend = inproc{}
	_ Backend = simBackend{}
)

// inproc is the backend with every actor in this process, links shaped in
// userspace on every rank connection.
type inproc struct{}

func (inproc) Name() string { return "inproc" }

func (inproc) Capabilities() Capabilities {
	return Capabilities{Shapers: []string{"userspace"}, Malleability: true, BatchGrid: true, Migration: true,
		Faults: scenarios.AllFaultKinds()}
}

func (b inproc) Run(ctx context.Context, plan *scenarios.Plan, opts Options) (*Result, error) {
	return RunInproc(ctx, plan, opts)
}

func (b inproc) Calibrate(ctx context.Context, req CalibrateRequest) (*Calibration, error) {
	if err := checkShaper(b.Name(), b.Capabilities(), req.Shaper); err != nil {
		return nil, err
	}
	fmt.Fprintf(progressOf(req.Progress), "calibrating %d clusters in process (userspace shaper)...\n", len(req.Links.Clusters))
	rows, err := netem.CalibrateInproc(ctx, req.Links, netem.CalibrateOptions{Dilation: req.Dilation})
	return &Calibration{Mechanism: "userspace", Rows: rows, Summary: netem.SummarizeCalibration(rows)}, err
}

// Clean has nothing to remove: an inproc run leaves nothing behind.
func (inproc) Clean(context.Context, CleanOptions) (*CleanReport, error) { return &CleanReport{}, nil }

func progressOf(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
