package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/scenarios"
)

const usage = `koala-emu: an emulator of multicluster grids (KOALA on DAS-3)

usage:
  koala-emu run SCENARIO [--backend inproc|netns|docker] [--out DIR] [--seed N] [--time-scale K] [--policy P] [--shaper S]
  koala-emu validate SCENARIO...
  koala-emu calibrate SCENARIO [--backend inproc|netns|docker] [--shaper auto|netem|htb|userspace] [--json]
  koala-emu study cluster-count [--backend inproc|netns|docker] [--apps a,b] [--interconnect myri10g|gbe|both] [--time-scale K] [--out DIR]
  koala-emu clean
  koala-emu scenarios
  koala-emu node --role R --name N --ip A [--cluster C]   (container entrypoint of the docker backend)

SCENARIO is a YAML file or the name of a built-in scenario (see 'koala-emu scenarios').
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprint(os.Stderr, usage)
			fmt.Fprintf(os.Stderr, "\nkoala-emu: %v\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "koala-emu: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout)
	case "calibrate":
		return cmdCalibrate(ctx, args[1:], stdout, stderr)
	case "study":
		return cmdStudy(ctx, args[1:], stdout, stderr)
	case "clean":
		return cmdClean(ctx, stdout)
	case "node":
		return cmdNode(ctx, args[1:], stderr)
	case "scenarios":
		for _, n := range scenarios.Builtins() {
			fmt.Fprintln(stdout, n)
		}
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// parse parses flags that may come before or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// env tells the scenarios package which applications and policies exist.
func env() scenarios.Env { return launch.ScenarioEnv() }

type overrideFlags struct {
	seed         int64
	timeScale    float64
	dilation     float64
	policy       string
	mallPolicy   string
	approach     string
	mallFraction float64
}

func (o *overrideFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&o.seed, "seed", 0, "override the scenario's seed")
	fs.Float64Var(&o.timeScale, "time-scale", 0, "override the scenario's time scale")
	fs.Float64Var(&o.dilation, "dilation", 0, "override the scenario's time dilation")
	fs.StringVar(&o.policy, "policy", "", "override the placement policy")
	fs.StringVar(&o.mallPolicy, "malleability-policy", "", "override the malleability policy (fpsma, egs)")
	fs.StringVar(&o.approach, "approach", "", "override the job-management approach (pra, pwa)")
	fs.Float64Var(&o.mallFraction, "malleable-fraction", 0, "override the share of malleable jobs (W_m 1, W_mr 0.5)")
}

func (o *overrideFlags) overrides(fs *flag.FlagSet) scenarios.Overrides {
	var ov scenarios.Overrides
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seed":
			ov.Seed = &o.seed
		case "time-scale":
			ov.TimeScale = &o.timeScale
		case "dilation":
			ov.Dilation = &o.dilation
		case "policy":
			ov.Placement = &o.policy
		case "malleability-policy":
			ov.MalleabilityPolicy = &o.mallPolicy
		case "approach":
			ov.Approach = &o.approach
		case "malleable-fraction":
			ov.MalleableFraction = &o.mallFraction
		}
	})
	return ov
}

func loadPlan(ref string, ov scenarios.Overrides) (*scenarios.Plan, error) {
	s, err := scenarios.Open(ref)
	if err != nil {
		return nil, err
	}
	plan, err := s.Expand(env(), ov)
	if err != nil {
		return nil, fmt.Errorf("scenario %s:\n%w", ref, err)
	}
	return plan, nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	backend := fs.String("backend", "inproc", "where the actors run: inproc, netns (a network namespace per host, root) or docker")
	out := fs.String("out", "", "results directory (default runs/<scenario>-<time>)")
	shaper := fs.String("shaper", "auto", "link shaping mechanism: auto, netem, htb or userspace")
	quiet := fs.Bool("quiet", false, "no progress lines")
	var o overrideFlags
	o.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"run takes exactly one SCENARIO"}
	}
	plan, err := loadPlan(pos[0], o.overrides(fs))
	if err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join("runs", fmt.Sprintf("%s-%s", plan.Name, time.Now().Format("20060102-150405")))
	}
	opts := launch.Options{Out: dir, Shaper: *shaper, Progress: stderr}
	if *quiet {
		opts.Progress = nil
	}
	switch *backend {
	case "inproc", "netns", "docker":
	default:
		return usageError{fmt.Sprintf("run: unknown backend %q (known: inproc, netns, docker)", *backend)}
	}
	res, err := runOn(ctx, *backend, plan, opts)
	if res != nil {
		res.Summary.Print(stdout)
		fmt.Fprintf(stdout, "results in %s (results.json, jobs.csv, events.jsonl, manifest.json)\n", dir)
	}
	return err
}

func cmdValidate(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"validate takes one or more SCENARIO"}
	}
	var failed []string
	for _, ref := range args {
		if _, err := loadPlan(ref, scenarios.Overrides{}); err != nil {
			fmt.Fprintf(stdout, "%v\n", err)
			failed = append(failed, ref)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", ref)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d scenarios are invalid: %s", len(failed), len(args), strings.Join(failed, ", "))
	}
	return nil
}
