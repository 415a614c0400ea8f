package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Compile-time checks that every backend implements Backend.
var (
	_ Backend = inproc{}
	_ Backend = gridBackend{}
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

// gridBackend is the netns backend (every actor host a process in its own
// network namespace) or the docker backend (every actor host in its own
// container); launch/grid drives both.
type gridBackend struct{ netns bool }

func (b gridBackend) Name() string {
	if b.netns {
		return "netns"
	}
	return "docker"
}

func (b gridBackend) Capabilities() Capabilities {
	return Capabilities{Shapers: []string{netem.Auto, "netem", "htb", "userspace"}, KernelShaping: true, Malleability: true,
		Membership: true, Isolation: true, NeedsRoot: b.netns, NeedsDocker: !b.netns, Faults: grid.FaultKinds}
}

func (b gridBackend) Run(ctx context.Context, plan *scenarios.Plan, opts Options) (*Result, error) {
	if err := Check(b, plan, opts); err != nil {
		return nil, err
	}
	opts, err := Prepare(ctx, b.Name(), plan, opts)
	if err != nil {
		return nil, err
	}
	cfg := grid.Config{}
	if b.netns {
		cfg.Platform = grid.NewNetnsPlatform(grid.NetnsOptions{})
	}
	return grid.Run(ctx, plan, opts, cfg)
}

func (b gridBackend) Calibrate(ctx context.Context, req CalibrateRequest) (*Calibration, error) {
	if err := checkShaper(b.Name(), b.Capabilities(), req.Shaper); err != nil {
		return nil, err
	}
	if b.netns {
		return calibrateNetns(ctx, req)
	}
	rows, sum, info, err := grid.Calibrate(ctx, req.Links, req.Shaper, grid.CalibrateOptions{Dilation: req.Dilation, Log: req.Progress})
	return &Calibration{Mechanism: info.Mechanism, Rows: rows, Summary: sum}, err
}

func (b gridBackend) Clean(ctx context.Context, opts CleanOptions) (*CleanReport, error) {
	if b.netns {
		return cleanNetns(opts, owner.Records{Dir: owner.RunsDir})
	}
	return cleanDocker(ctx, opts)
}

// calibrateNetns runs the calibration with one network namespace per
// emulated node (netem/netns), its owner recorded while it runs.
func calibrateNetns(ctx context.Context, req CalibrateRequest) (_ *Calibration, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("backend netns creates network namespaces and needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
	}
	id := netns.RandomRunID()
	own, err := owner.Self(id, "netns")
	if err != nil {
		return nil, err
	}
	recs := owner.Records{Dir: owner.RunsDir}
	if err := recs.Write(own); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, recs.Remove(id)) }()
	progress := progressOf(req.Progress)
	rows, sum, info, err := netns.CalibrateNetns(ctx, req.Links, req.Shaper, netns.CalibrateOptions{RunID: id, Dilation: req.Dilation, Log: progress})
	if err == nil {
		fmt.Fprintf(progress, "mechanism %s: %s\nfloor one-way %v, %.0f MB/s", info.Mechanism, info.Reason, info.Floor, info.FloorBandwidth/1e6)
		if len(info.Overhead) > 0 {
			fmt.Fprintf(progress, "; delay line overhead at delay:overhead %v, %v per 1 MB message", info.Overhead, info.LineMsgOverhead)
		}
		fmt.Fprintln(progress)
	}
	return &Calibration{Mechanism: info.Mechanism, Rows: rows, Summary: sum}, err
}

func progressOf(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
