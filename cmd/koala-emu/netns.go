package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// calibrateNetns runs the calibration on the project's own test hosts: one
// network namespace per emulated node, the chosen mechanism installed in
// each, removed again before it returns.
func calibrateNetns(ctx context.Context, m netem.Matrix, dilation float64, shaper string, progress io.Writer) ([]netem.CalibrationRow, string, error) {
	if os.Geteuid() != 0 {
		return nil, "", fmt.Errorf("backend netns creates network namespaces and needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
	}
	rows, _, info, err := netns.CalibrateNetns(ctx, m, shaper, netns.CalibrateOptions{Dilation: dilation, Log: progress})
	if err != nil {
		return rows, info.Mechanism, err
	}
	fmt.Fprintf(progress, "mechanism %s: %s\nfloor one-way %v, %.0f MB/s", info.Mechanism, info.Reason, info.Floor, info.FloorBandwidth/1e6)
	if len(info.Overhead) > 0 {
		fmt.Fprintf(progress, "; delay line overhead at delay:overhead %v, %v per 1 MB message", info.Overhead, info.LineMsgOverhead)
	}
	fmt.Fprintln(progress)
	return rows, info.Mechanism, nil
}
