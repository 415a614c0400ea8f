package main

import (
	"context"
	"fmt"
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

// runNetns runs a plan with every actor host a process in its own network
// namespace, links shaped in the kernel (root only).
func runNetns(ctx context.Context, plan *scenarios.Plan, opts launch.Options) (*launch.Result, error) {
	return grid.Run(ctx, plan, opts, grid.Config{Platform: grid.NewNetnsPlatform(grid.NetnsOptions{})})
}

// runOn runs a plan on a backend: inproc, netns or docker.
func runOn(ctx context.Context, backend string, plan *scenarios.Plan, opts launch.Options) (*launch.Result, error) {
	switch backend {
	case "inproc":
		return launch.RunInproc(ctx, plan, opts)
	case "netns":
		return runNetns(ctx, plan, opts)
	case "docker":
		return runDocker(ctx, plan, opts)
	}
	return nil, usageError{fmt.Sprintf("unknown backend %q (known: inproc, netns, docker)", backend)}
}

// calibrateDocker runs the calibration between node containers.
func calibrateDocker(ctx context.Context, m netem.Matrix, dilation float64, shaper string, progress io.Writer) ([]netem.CalibrationRow, string, error) {
	rows, _, info, err := grid.Calibrate(ctx, m, shaper, grid.CalibrateOptions{Dilation: dilation, Log: progress})
	return rows, info.Mechanism, err
}
