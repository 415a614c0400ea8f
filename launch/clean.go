package launch

import (
	"context"
	"errors"
	"fmt"

	"github.com/koala-emu/koala-emu/launch/owner"
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
		case unreachable(err):
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
