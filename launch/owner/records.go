package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// RunsDir is where netns runs record their owners, one RunID.json each.
const RunsDir = "/run/koala-emu/runs"

// runIDPattern is compiled when first used, not while the process starts.
var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.]{0,39}$`) })

// CheckRunID reports a run ID that cannot name a record file and a
// namespace prefix: 1-40 of [a-z0-9_.] (no '-', which separates the run ID
// from the host name in a namespace's name).
func CheckRunID(id string) error {
	if !runIDPattern().MatchString(id) {
		return fmt.Errorf("run ID %q: want 1-40 of [a-z0-9_.], starting with a letter or digit", id)
	}
	return nil
}

// Records is a directory of owner records.
type Records struct{ Dir string }

// Write records the owner of a run (replacing an earlier record).
func (r Records) Write(o Owner) error {
	if err := CheckRunID(o.RunID); err != nil {
		return err
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("owner records: %w", err)
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("owner record of run %s: %w", o.RunID, err)
	}
	tmp := filepath.Join(r.Dir, "."+o.RunID+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("owner record of run %s: %w", o.RunID, err)
	}
	if err := os.Rename(tmp, r.path(o.RunID)); err != nil {
		return fmt.Errorf("owner record of run %s: %w", o.RunID, err)
	}
	return nil
}

// Remove deletes a run's record; a missing one is no error.
func (r Records) Remove(runID string) error {
	if err := CheckRunID(runID); err != nil {
		return err
	}
	if err := os.Remove(r.path(runID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("owner record of run %s: %w", runID, err)
	}
	return nil
}

// Read returns the record of a run; nil without error when there is none.
func (r Records) Read(runID string) (*Owner, error) {
	if err := CheckRunID(runID); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(r.path(runID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("owner record of run %s: %w", runID, err)
	}
	var o Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("owner record %s: %w", r.path(runID), err)
	}
	return &o, nil
}

// List returns the run IDs that have a record, in directory order.
func (r Records) List() ([]string, error) {
	ents, err := os.ReadDir(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("owner records: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && CheckRunID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (r Records) path(runID string) string { return filepath.Join(r.Dir, runID+".json") }
