package main

import (
	"context"
	"io"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// cmdNode is the entrypoint of every container of the docker backend.
func cmdNode(ctx context.Context, args []string, stderr io.Writer) error {
	return grid.NodeMain(ctx, args, stderr)
}

// runDocker runs a plan with every actor in its own container.
func runDocker(ctx context.Context, plan *scenarios.Plan, opts launch.Options) (*launch.Result, error) {
	return grid.Run(ctx, plan, opts, grid.Config{})
}

// calibrateDocker runs the calibration between node containers.
func calibrateDocker(ctx context.Context, m netem.Matrix, dilation float64, shaper string, progress io.Writer) ([]netem.CalibrationRow, string, error) {
	rows, _, info, err := grid.Calibrate(ctx, m, shaper, grid.CalibrateOptions{Dilation: dilation, Log: progress})
	return rows, info.Mechanism, err
}
