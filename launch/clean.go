package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// CleanOptions choose what Clean removes. By default only runs whose owner
// is gone (its process no longer exists, or its pid now belongs to another
// process): a live run, a run started on another host and a run without an
// owner record are kept.
type CleanOptions struct {
	// RunID removes that run (and only it) whatever its owner.
	RunID string
	// All removes every run whatever its owner (and, on netns, the scratch
	// links a crashed capability probe may have left).
	All bool
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
}

// CleanedRun is one run Clean looked at.
type CleanedRun struct {
	Backend string `json:"backend"`
	RunID   string `json:"run_id"`
	// Owner is the run's owner record (nil: none); Status what Clean found
	// of it; Why the reason it was removed or kept.
	Owner  *owner.Owner `json:"owner,omitempty"`
	Status owner.Status `json:"status"`
	Why    string       `json:"why"`
	// Items are what the run consists of: namespaces, containers,
	// networks, the owner record.
	Items []string `json:"items"`
}

// CleanReport lists the runs Clean removed (or, with DryRun, would remove)
// and those it kept.
type CleanReport struct {
	DryRun  bool         `json:"dry_run"`
	Removed []CleanedRun `json:"removed"`
	Kept    []CleanedRun `json:"kept"`
	// Extra lists what was removed that belongs to no run (scratch probe
	// links with All).
	Extra []string `json:"extra,omitempty"`
}

// Clean runs Clean on every backend and merges the reports; a backend that
// cannot be reached (no Docker daemon, not root for netns) is skipped with
// a note in skipped.
func Clean(ctx context.Context, opts CleanOptions) (rep *CleanReport, skipped []string, err error) {
	rep = &CleanReport{DryRun: opts.DryRun}
	var errs []error
	for _, b := range Backends() {
		r, err := b.Clean(ctx, opts)
		switch {
		case errors.Is(err, docker.ErrDaemon), errors.Is(err, errNotRoot):
			skipped = append(skipped, fmt.Sprintf("%s: %v", b.Name(), err))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
		}
		if r != nil {
			rep.Removed = append(rep.Removed, r.Removed...)
			rep.Kept = append(rep.Kept, r.Kept...)
			rep.Extra = append(rep.Extra, r.Extra...)
		}
	}
	return rep, skipped, errors.Join(errs...)
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

// decide files r under Removed or Kept (owner.Decide) and reports whether
// it is to be removed now (never with DryRun).
func (rep *CleanReport) decide(r CleanedRun, opts CleanOptions) bool {
	remove, why := owner.Decide(r.RunID, r.Status, opts.RunID, opts.All)
	r.Why = why
	if !remove {
		rep.Kept = append(rep.Kept, r)
		return false
	}
	rep.Removed = append(rep.Removed, r)
	return !opts.DryRun
}
