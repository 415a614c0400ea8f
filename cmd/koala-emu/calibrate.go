package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/scenarios"
)

// calibration is calibrate --json.
type calibration struct {
	Scenario string                   `json:"scenario"`
	Backend  string                   `json:"backend"`
	Shaper   string                   `json:"shaper"`
	Rows     []netem.CalibrationRow   `json:"rows"`
	Summary  netem.CalibrationSummary `json:"summary"`
	// Machine is the stall probe run after the measurements (see
	// probeMachine); empty where it could not run.
	Machine []ptimer.Stalls `json:"machine"`
	// Error is set when the calibration failed or could not run.
	Error string `json:"error,omitempty"`
}

func (c *calibration) setError(err error) { c.Error = errorText(err) }

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

func newCalibrateCmd(a *app) *cobra.Command {
	var (
		backendName string
		shaper      string
		asJSON      bool
		dilation    dilationValue
	)
	cmd := &cobra.Command{
		Use:   "calibrate SCENARIO",
		Short: "measure every link of a scenario against its target",
		Long: `Measure every cluster pair of a scenario with a TCP ping-pong through links
shaped as a run shapes them (dilated by the scenario's dilation), and print
target and measured bandwidth and latency with a verdict per pair: PASS, FLOOR
(the unshaped floor is above the target) or FAIL. Then probe how often this
machine takes a CPU away (the lateness floor no shaper can beat). The exit code
is 1 when a pair fails. See docs/shaping.md.` + a.backendsSection(),
		Example: `  koala-emu calibrate das3-coalloc
  koala-emu calibrate das3-coalloc --backend netns --shaper htb --json`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeScenario(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := &calibration{Scenario: args[0], Backend: backendName}
			var ov scenarios.Overrides
			if cmd.Flags().Changed("dilation") {
				dilation.d.Override(&ov)
			}
			return finishJSON(a, asJSON, out, calibrate(cmd.Context(), a, out, shaper, ov, asJSON))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&backendName, "backend", defaultBackend, "where the links are shaped: "+a.backendHelp())
	fs.StringVar(&shaper, "shaper", "auto", "shaping mechanism: auto, netem, htb or userspace (see Backends above for each backend's)")
	fs.Var(&dilation, "dilation", "replace the scenario's dilation: a number >= 1, or auto, the one a run would choose on this machine now (default: the scenario's)")
	addJSONFlag(cmd, &asJSON, "the rows, summary and machine probe")
	return cmd
}

// calibrate measures the links of the scenario out names on out's backend,
// fills out, and prints the table to stdout unless asJSON.
func calibrate(ctx context.Context, a *app, out *calibration, shaper string, ov scenarios.Overrides, asJSON bool) error {
	b, err := a.lookupBackend(out.Backend)
	if err != nil {
		return err
	}
	plan, err := loadPlan(out.Scenario, ov)
	if err != nil {
		return err
	}
	out.Scenario = plan.Name
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
	// A scenario with `dilation: auto` is calibrated at the dilation a run
	// of it would choose on this machine now.
	if plan.DilationAuto {
		if _, err := launch.Prepare(ctx, b.Name(), plan, launch.Options{Progress: a.stderr}); err != nil {
			return err
		}
	}
	if plan.Dilation > 1 {
		fmt.Fprintf(a.stderr, "dilation %g: targets are the scenario's links dilated (latency x %g, bandwidth / %g); a pair may be p99 %.0f%% of its latency late\n",
			plan.Dilation, plan.Dilation, plan.Dilation, 100*netem.LatenessShare)
	}
	cal, err := b.Calibrate(ctx, launch.CalibrateRequest{Links: plan.Links, Dilation: plan.Dilation, Shaper: shaper, Progress: a.stderr})
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	// After the measurements, so that a bad flag or a missing capability
	// still fails at once.
	stalls := a.probe(ctx, a.stderr)
	rows, sum := cal.Rows, cal.Summary
	machine := ""
	if w := worstStalls(stalls); len(stalls) > 0 {
		machine = fmt.Sprintf("this machine alone gives a releaser that never sleeps p99 release lateness %v on its worst CPU (quiet-machine reference %v; each pair is judged against %.0f%% of its dilated latency)", w.Round(time.Microsecond), netem.MaxReleaseLateness, 100*netem.LatenessShare)
	}
	out.Shaper, out.Rows, out.Summary, out.Machine = cal.Mechanism, rows, sum, stalls
	if !asJSON {
		netem.PrintCalibration(a.stdout, rows, sum)
		if machine != "" {
			fmt.Fprintf(a.stdout, "machine: %s.\n", machine)
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
