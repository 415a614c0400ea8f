package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// calibration is the --json output of calibrate.
type calibration struct {
	Scenario string                   `json:"scenario"`
	Backend  string                   `json:"backend"`
	Shaper   string                   `json:"shaper"`
	Rows     []netem.CalibrationRow   `json:"rows"`
	Summary  netem.CalibrationSummary `json:"summary"`
}

func cmdCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	backend := fs.String("backend", "inproc", "inproc, netns or docker")
	shaper := fs.String("shaper", "auto", "auto, netem, htb or userspace")
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"calibrate takes exactly one SCENARIO"}
	}
	plan, err := loadPlan(pos[0], scenarios.Overrides{})
	if err != nil {
		return err
	}
	// The calibration judges timing precision to tens of microseconds, and
	// the delay lines' threads of this process need a P of the Go scheduler
	// to resume after each sleep: every stop-the-world pause of the garbage
	// collector holds them up. Measured here, 25 collections during a 6 s
	// netns calibration made 1-4% of the lines' timed wake-ups late and
	// failed the lateness gate on pairs that passed with the collector off.
	// The command allocates little: collect only near 1 GiB.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	// Every backend measures the links as a run shapes them: dilated by the
	// scenario's dilation (latency x d, bandwidth / d; see netem.Link.Dilate).
	if plan.Dilation > 1 {
		fmt.Fprintf(stderr, "dilation %g: targets are the scenario's links dilated (latency x %g, bandwidth / %g)\n", plan.Dilation, plan.Dilation, plan.Dilation)
	}
	var rows []netem.CalibrationRow
	mech := *shaper
	switch *backend {
	case "inproc":
		if *shaper != "auto" && *shaper != "userspace" {
			return fmt.Errorf("calibrate: shaper %q is not available on the inproc backend: only userspace applies in one process (use --backend netns for kernel shaping)", *shaper)
		}
		mech = "userspace"
		fmt.Fprintf(stderr, "calibrating %d clusters in process (userspace shaper)...\n", len(plan.Clusters))
		rows, err = netem.CalibrateInproc(ctx, plan.Links, netem.CalibrateOptions{Dilation: plan.Dilation})
	case "netns":
		rows, mech, err = calibrateNetns(ctx, plan.Links, plan.Dilation, *shaper, stderr)
	case "docker":
		rows, mech, err = calibrateDocker(ctx, plan.Links, plan.Dilation, *shaper, stderr)
	default:
		return usageError{fmt.Sprintf("calibrate: unknown backend %q (known: inproc, netns, docker)", *backend)}
	}
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	sum := netem.SummarizeCalibration(rows)
	if *asJSON {
		b, err := json.MarshalIndent(calibration{Scenario: plan.Name, Backend: *backend, Shaper: mech, Rows: rows, Summary: sum}, "", "  ")
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		netem.PrintCalibration(stdout, rows, sum)
	}
	if sum.Failed {
		return errors.New("calibration failed: " + sum.Reason)
	}
	return nil
}
