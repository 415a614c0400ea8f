package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/scenarios"
)

// calibration is the --json output of calibrate.
type calibration struct {
	Scenario string                   `json:"scenario"`
	Backend  string                   `json:"backend"`
	Shaper   string                   `json:"shaper"`
	Rows     []netem.CalibrationRow   `json:"rows"`
	Summary  netem.CalibrationSummary `json:"summary"`
	// Machine is the stall probe run after the measurements (see
	// probeMachine); empty where it could not run.
	Machine []ptimer.Stalls `json:"machine"`
}

// machineSpan is how long the stall probe spins on each CPU.
const machineSpan = 500 * time.Millisecond

// probeMachine measures how often this machine takes a CPU away from a
// thread that never sleeps (ptimer.ProbeStalls) and prints it: release
// lateness below what it finds cannot be had here, whatever the shaper
// does. A probe that cannot run is reported and skipped; it does not fail
// the calibration.
func probeMachine(ctx context.Context, stderr io.Writer) []ptimer.Stalls {
	st, err := ptimer.ProbeStalls(ctx, machineSpan)
	if err != nil {
		fmt.Fprintf(stderr, "machine: %v\n", err)
		return nil
	}
	fmt.Fprintf(stderr, "machine: %s\n", describeStalls(st))
	return st
}

// describeStalls is one line per probe: per CPU, the gaps of at least the
// lateness gate, and the p99 lateness they alone give a release.
func describeStalls(st []ptimer.Stalls) string {
	parts := make([]string, len(st))
	for i, s := range st {
		parts[i] = fmt.Sprintf("cpu%d away >=%v %.0f/s (%.2f%% of %v, longest %v), p99 lateness of a release that never sleeps %v",
			s.CPU, s.Over, s.PerSecond(), 100*s.Away.Seconds()/s.Span.Seconds(), s.Span.Round(time.Millisecond),
			s.Longest.Round(time.Microsecond), s.P99.Round(time.Microsecond))
	}
	return strings.Join(parts, "; ")
}

// worstStalls is the largest P99 of the CPUs (0 without any).
func worstStalls(st []ptimer.Stalls) time.Duration {
	var w time.Duration
	for _, s := range st {
		w = max(w, s.P99)
	}
	return w
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
	// After the measurements, so that a bad flag or a missing capability
	// still fails at once.
	stalls := probeMachine(ctx, stderr)
	sum := netem.SummarizeCalibration(rows)
	out := calibration{Scenario: plan.Name, Backend: *backend, Shaper: mech, Rows: rows, Summary: sum, Machine: stalls}
	machine := ""
	if w := worstStalls(stalls); len(stalls) > 0 {
		machine = fmt.Sprintf("this machine alone gives a releaser that never sleeps p99 release lateness %v on its worst CPU (gate %v)", w.Round(time.Microsecond), netem.MaxReleaseLateness)
	}
	if *asJSON {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		netem.PrintCalibration(stdout, rows, sum)
		if machine != "" {
			fmt.Fprintf(stdout, "machine: %s.\n", machine)
		}
	}
	if sum.Failed {
		if machine != "" {
			return fmt.Errorf("calibration failed: %s; %s", sum.Reason, machine)
		}
		return errors.New("calibration failed: " + sum.Reason)
	}
	return nil
}
