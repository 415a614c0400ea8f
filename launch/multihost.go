//go:build !simonly

package launch

// The backends whose actors run on hosts of their own: netns and docker
// (launch/grid drives both). A binary built with the simonly tag (koala-sim,
// `make build`) leaves them out, and with them Docker's client, netlink and
// nftables: see multihost_off.go.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe/kernelprobe"
	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/scenarios"
)

var _ Backend = gridBackend{}

// multihostBackends are netns and docker.
func multihostBackends() []Backend { return []Backend{gridBackend{netns: true}, gridBackend{}} }

// LeftOut is what this binary was built without (nothing), for the
// unknown-backend error.
const LeftOut = ""

// measurer is how a backend's capacity is measured: through the shaper its
// runs use. inproc: in process, through the userspace shaper. netns and
// docker: through the kernel shaper between network namespaces
// (kernelprobe), each rank's node a namespace with its own delay line, as
// on those backends; what a container adds beside its namespace (its own
// process and runtime per node) is not in the figures, and each run's
// monitor judges it. The kernel probe needs root; docker without root falls
// back to the userspace figures and says so in the figures' path (they
// overstate what the kernel path carries).
func measurer(backend string) hostprobe.Measurer {
	switch {
	case backend == "netns" || (backend == "docker" && os.Geteuid() == 0):
		return kernelprobe.Measure
	case backend == "docker":
		return func(ctx context.Context, opts hostprobe.Options) (fidelity.Capacity, error) {
			c, err := hostprobe.MeasureInproc(ctx, opts)
			c.Path += "; not root, so not the kernel shaper docker's nodes use, which carries less"
			return c, err
		}
	}
	return hostprobe.MeasureInproc
}

// probeTime is about how long measurer takes.
func probeTime(backend string) string {
	if backend == "netns" || (backend == "docker" && os.Geteuid() == 0) {
		return "32 network namespaces, about 1-2 minutes"
	}
	return "about 10 s"
}

// unreachable says a backend's Clean could not look (no Docker daemon, not
// root for netns): Clean skips it with a note.
func unreachable(err error) bool {
	return errors.Is(err, docker.ErrDaemon) || errors.Is(err, errNotRoot)
}

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

// errNotRoot: the netns backend's runs can be looked at only as root.
var errNotRoot = errors.New("not root: network namespaces left alone")

// cleanNetns cleans netns runs: namespaces named koala-<run>-..., the
// run's launcher veth and its owner record in recs.
func cleanNetns(opts CleanOptions, recs owner.Records) (*CleanReport, error) {
	if os.Geteuid() != 0 {
		return nil, errNotRoot
	}
	runs, err := netnsRuns(recs)
	if err != nil {
		return nil, err
	}
	rep := &CleanReport{DryRun: opts.DryRun}
	var errs []error
	for _, r := range runs {
		if rep.decide(r, opts) {
			errs = append(errs, removeNetnsRun(r.RunID, recs))
		}
	}
	if opts.All && opts.RunID == "" && !opts.DryRun {
		links, err := kernel.CleanProbeLinks()
		rep.Extra = append(rep.Extra, links...)
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// netnsRuns groups the project's namespaces by run ID and joins the owner
// records (a record without namespaces is a run too: its record is left).
func netnsRuns(recs owner.Records) ([]CleanedRun, error) {
	names, err := netns.List(netns.NamePrefix)
	if err != nil {
		return nil, err
	}
	byID := map[string]*CleanedRun{}
	run := func(id string) *CleanedRun {
		if byID[id] == nil {
			byID[id] = &CleanedRun{Backend: "netns", RunID: id}
		}
		return byID[id]
	}
	for _, n := range names {
		id, _, ok := strings.Cut(strings.TrimPrefix(n, netns.NamePrefix), "-")
		if ok && id != "" {
			r := run(id)
			r.Items = append(r.Items, "namespace "+n)
		}
	}
	ids, err := recs.List()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		r := run(id)
		if r.Owner, err = recs.Read(id); err != nil {
			return nil, err
		}
		r.Items = append(r.Items, "record "+id+".json")
	}
	out := make([]CleanedRun, 0, len(byID))
	for _, r := range byID {
		r.Status = owner.CheckHere(r.Owner)
		sort.Strings(r.Items)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}

// removeNetnsRun removes a netns run's namespaces, its launcher veth (gone
// with the switch namespace, unless that lingered) and its owner record.
func removeNetnsRun(id string, recs owner.Records) error {
	var errs []error
	if _, err := netns.Clean(netns.NamePrefix + id + "-"); err != nil {
		errs = append(errs, err)
	}
	if l, err := netlink.LinkByName(grid.LauncherVeth(id)); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", grid.LauncherVeth(id), err))
		}
	}
	if owner.CheckRunID(id) == nil {
		errs = append(errs, recs.Remove(id))
	}
	return errors.Join(errs...)
}

// cleanDocker cleans docker runs: containers and networks labelled
// koala-emu.run, the owner read from their labels.
func cleanDocker(ctx context.Context, opts CleanOptions) (*CleanReport, error) {
	runs, err := docker.ListRuns(ctx)
	if err != nil {
		return nil, err
	}
	rep := &CleanReport{DryRun: opts.DryRun}
	var errs []error
	for _, ri := range runs {
		r := CleanedRun{Backend: "docker", RunID: ri.ID, Owner: owner.FromLabels(ri.ID, ri.Labels)}
		r.Status = owner.CheckHere(r.Owner)
		for _, c := range ri.Containers {
			r.Items = append(r.Items, "container "+c)
		}
		for _, n := range ri.Networks {
			r.Items = append(r.Items, "network "+n)
		}
		if rep.decide(r, opts) {
			if _, err := docker.CleanRun(ctx, ri.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return rep, errors.Join(errs...)
}
