package invariant

import (
	"sort"
	"sync"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
)

// Invariant names, fixed so results can count them.
const (
	// Capacity: the processors KOALA's jobs hold in a cluster, by the
	// manager's books, never exceed the cluster's capacity.
	Capacity = "cluster_capacity"
	// Threshold: nor the threshold's cap (floor(threshold x capacity)).
	Threshold = "threshold"
	// Bounds: every running malleable job's size is within [min, max].
	Bounds = "size_bounds"
	// Pow2: a power-of-two application (FT) always runs on a power of two.
	Pow2 = "ft_pow2"
	// Mandatory: a mandatory shrink is honoured at the first safe point
	// after the request reached the application.
	Mandatory = "mandatory_shrink"
)

// maxDetails bounds the violation details a Stats keeps.
const maxDetails = 50

// Stats counts the invariant checks of a run and their violations. It is
// safe for concurrent use: the manager and every MRunner of a run (of one
// process) share one.
// A nil *Stats counts nothing (checks still emit violation events).
type Stats struct {
	mu         sync.Mutex
	checks     map[string]int
	violations map[string]int
	details    []string
}

// NewStats returns an empty Stats.
func NewStats() *Stats {
	return &Stats{checks: map[string]int{}, violations: map[string]int{}}
}

// Summary is a snapshot of a Stats.
type Summary struct {
	Checks     map[string]int `json:"checks"`
	Violations map[string]int `json:"violations"`
	// Details of the first violations, in the order they happened.
	Details []string `json:"details,omitempty"`
}

// OK reports whether no check failed.
func (i Summary) OK() bool {
	for _, v := range i.Violations {
		if v > 0 {
			return false
		}
	}
	return true
}

// Names returns the invariants checked, sorted.
func (i Summary) Names() []string {
	out := make([]string, 0, len(i.Checks))
	for k := range i.Checks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Summary {
	out := Summary{Checks: map[string]int{}, Violations: map[string]int{}}
	if s == nil {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.checks {
		out.Checks[k] = v
	}
	for k, v := range s.violations {
		out.Violations[k] = v
	}
	out.Details = append([]string(nil), s.details...)
	return out
}

func (s *Stats) record(name string, ok bool, detail string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name]++
	if !ok {
		s.violations[name]++
		if len(s.details) < maxDetails {
			s.details = append(s.details, name+": "+detail)
		}
	}
}

// Check counts one check of the invariant name and, when it failed, emits
// an "invariant_violation" event from source about jobID (fields invariant,
// detail; detail is called only on failure). It returns ok.
func Check(env actors.Env, st *Stats, source, jobID, name string, ok bool, detail func() string) bool {
	d := ""
	if !ok {
		d = detail()
		ev := env.Event(msg.EventInvariantViolation, source, jobID)
		ev.Fields = map[string]string{"invariant": name, "detail": d}
		env.Emit(ev)
	}
	st.record(name, ok, d)
	return ok
}
