package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/results"
)

// runOutput is run --json: one object on stdout, also when the run failed
// (then error is set and the exit code is 1).
type runOutput struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"`
	// Out is the results directory (results.json, jobs.csv, events.jsonl,
	// manifest.json).
	Out string `json:"out"`
	// Summary is results.json's content; null when the run produced no
	// results.
	Summary *results.Summary `json:"summary"`
	Error   string           `json:"error,omitempty"`
}

func (o *runOutput) setError(err error) { o.Error = errorText(err) }

// runCmdFlags are the flags of run.
type runCmdFlags struct {
	runFlags
	shaper string
	quiet  bool
	// cpuProfile is where run writes a CPU profile of its own process.
	cpuProfile string
}

func newRunCmd(a *app) *cobra.Command {
	f := &runCmdFlags{}
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "run a scenario and write its results",
		Long: `Run a scenario on a backend: start the actors, shape the links, replay the
workload, and write results.json, jobs.csv, events.jsonl and manifest.json to
--out. Progress lines go to stderr, the summary to stdout.` + a.backendsSection(),
		Example: `  koala-emu run das3-smoke
  koala-emu run das3-smoke --backend netns --out runs/smoke-netns
  koala-emu run das3-malleable-pra --malleability-policy egs --malleable-fraction 0.5`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeScenario(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ro := &runOutput{Scenario: args[0], Backend: f.backend}
			return finishJSON(a, f.asJSON, ro, runScenario(cmd, a, f, ro))
		},
	}
	fs := cmd.Flags()
	f.register(fs, a)
	fs.StringVar(&f.out, "out", "", "results directory (default runs/<scenario>-<yyyymmdd-hhmmss>)")
	fs.StringVar(&f.shaper, "shaper", "auto", "link shaping mechanism: auto, netem, htb or userspace (see Backends above for each backend's)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of this process to the file: every actor on inproc and sim, the launcher only on netns and docker")
	addJSONFlag(cmd, &f.asJSON, "the run's summary")
	f.o.register(fs)
	return cmd
}

// runScenario is run: expand the scenario, run it on the backend, print
// the summary (to stderr with --json) and fill ro.
func runScenario(cmd *cobra.Command, a *app, f *runCmdFlags, ro *runOutput) error {
	b, err := a.lookupBackend(f.backend)
	if err != nil {
		return err
	}
	plan, err := loadPlan(ro.Scenario, f.o.overrides(cmd.Flags()))
	if err != nil {
		return err
	}
	ro.Scenario, ro.Out = plan.Name, f.out
	if ro.Out == "" {
		ro.Out = filepath.Join("runs", fmt.Sprintf("%s-%s", plan.Name, time.Now().Format("20060102-150405")))
	}
	opts := launch.Options{Out: ro.Out, Shaper: f.shaper, Progress: a.stderr, RequireFaithful: f.requireFaithful, SimModel: f.model}
	if f.quiet {
		opts.Progress = nil
	}
	if err := launch.Check(b, plan, opts); err != nil {
		return err
	}
	stop, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	res, err := b.Run(cmd.Context(), plan, opts)
	err = errors.Join(err, stop())
	if res != nil {
		ro.Summary = &res.Summary
		w := a.stdout
		if f.asJSON {
			w = a.stderr
		}
		res.Summary.Print(w)
		fmt.Fprintf(w, "results in %s (results.json, jobs.csv, events.jsonl, manifest.json)\n", ro.Out)
	}
	return err
}

// startCPUProfile starts profiling this process's CPU into path (nothing
// when path is empty); stop ends the profile and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	file, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		file.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := file.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}
