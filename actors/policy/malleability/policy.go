package malleability

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Policy is a malleability policy (SPEC §4): it decides, for the running
// malleable jobs of one cluster, who grows and who shrinks by how much.
//
// Both methods are pure: they do not modify jobs, and the same input always
// gives the same output. A job appears at most once in the result, changes
// with a zero delta are left out, and Grow never returns a negative delta nor
// Shrink a positive one: a policy never mixes grows and shrinks in one round.
type Policy interface {
	// Name is the policy's registry key.
	Name() string
	// Grow hands out at most free processors. Each job gets only what it
	// accepts (Job.Take: its maximum and, for FT, a power of two), so no
	// processor is handed back. After Grow no job accepts anything from the
	// processors left over: the policies place everything that can be placed.
	Grow(jobs []Job, free int) []Change
	// Shrink asks the jobs to release at least need processors, never taking
	// a job below its minimum. A power-of-two application shrinks to a power
	// of two and may release more than asked. If the jobs hold fewer than need
	// processors above their minimums, every job is taken to its minimum.
	Shrink(jobs []Job, need int) []Change
}

// Compile-time checks.
var (
	_ Policy = fpsma{}
	_ Policy = egs{}
)

// ErrUnknownPolicy reports a policy or approach name not in the registry.
var ErrUnknownPolicy = errors.New("malleability: unknown policy")

// Registry returns the malleability policies by name: "fpsma" and "egs".
// A fresh map is returned on every call.
func Registry() map[string]func() Policy {
	return map[string]func() Policy{
		"fpsma": FPSMA,
		"egs":   EGS,
	}
}

// New returns the policy registered under name (case-insensitive).
func New(name string) (Policy, error) {
	reg := Registry()
	if f, ok := reg[strings.ToLower(strings.TrimSpace(name))]; ok {
		return f(), nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPolicy, name, strings.Join(sortedKeys(reg), ", "))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FPSMA returns the Favour Previously Started Malleable Applications policy.
//
// Grow offers all the free processors to the earliest-started job, which takes
// what it accepts; what is left goes to the next job in increasing start
// order, until nothing is left or every job has been offered.
//
// Shrink asks the latest-started job to release everything still needed; it
// releases what it can (down to its minimum, or more than asked when it must
// land on a power of two); the rest is asked of the next job in decreasing
// start order, until enough is released.
//
// Changes are listed in the order the jobs were visited.
func FPSMA() Policy { return fpsma{} }

type fpsma struct{}

func (fpsma) Name() string { return "fpsma" }

func (fpsma) Grow(jobs []Job, free int) []Change {
	var out []Change
	for _, i := range byStart(jobs) {
		if free <= 0 {
			break
		}
		if d := jobs[i].Take(free); d > 0 {
			out = append(out, Change{JobID: jobs[i].ID, Delta: d})
			free -= d
		}
	}
	return out
}

func (fpsma) Shrink(jobs []Job, need int) []Change {
	var out []Change
	order := byStart(jobs)
	for k := len(order) - 1; k >= 0 && need > 0; k-- {
		i := order[k]
		if d := jobs[i].Release(need); d > 0 {
			out = append(out, Change{JobID: jobs[i].ID, Delta: -d})
			need -= d
		}
	}
	return out
}

// EGS returns the Equi-Grow & Shrink policy.
//
// Grow splits the free processors equally over the running jobs; the
// remainder of the division goes as a bonus of one processor to each of the
// earliest-started jobs. EGS equalises the increments, not the sizes.
//
// A job may take less than its share (its maximum, or FT's power of two). Our
// choice for the leftover: it is split again, in further rounds of the same
// kind, among the jobs that would still accept something from it. When a round
// places nothing (e.g. two FT jobs of 4 offered 3 each from 6 free), the
// latest-started job is dropped from the round and the round is repeated, so
// the leftover narrows towards the earliest-started jobs (FT of 4 first in
// line then takes 4 of the 6). Rounds stop when no job accepts anything from
// what is left. Hence free processors stay unused only if no job can use them.
//
// Shrink splits the processors to reclaim equally; the remainder is a malus
// of one processor on each of the latest-started jobs. A job that cannot give
// its whole share (it reaches its minimum) leaves a deficit that is split
// again in further rounds among the jobs that can still shrink; a job that
// gives more than its share (FT landing on a power of two) counts in full.
// Rounds stop once at least need processors are released or no job can shrink.
//
// A job appears once with its total over all rounds; changes are listed in
// increasing start order.
func EGS() Policy { return egs{} }

type egs struct{}

func (egs) Name() string { return "egs" }

func (egs) Grow(jobs []Job, free int) []Change {
	if free <= 0 || len(jobs) == 0 {
		return nil
	}
	order := byStart(jobs)
	cur := make([]Job, len(jobs)) // sizes as they evolve over the rounds
	copy(cur, jobs)
	for free > 0 {
		var active []int // in start order
		for _, i := range order {
			if cur[i].Take(free) > 0 {
				active = append(active, i)
			}
		}
		placed := 0
		for len(active) > 0 {
			share, bonus := free/len(active), free%len(active)
			for k, i := range active {
				offer := share
				if k < bonus {
					offer++
				}
				d := cur[i].Take(offer)
				cur[i].Size += d
				placed += d
			}
			if placed > 0 {
				break
			}
			active = active[:len(active)-1] // drop the latest-started, retry
		}
		if placed == 0 {
			break
		}
		free -= placed
	}
	return diff(jobs, cur, order)
}

func (egs) Shrink(jobs []Job, need int) []Change {
	if need <= 0 || len(jobs) == 0 {
		return nil
	}
	order := byStart(jobs)
	cur := make([]Job, len(jobs))
	copy(cur, jobs)
	for need > 0 {
		var active []int // in start order
		for _, i := range order {
			if cur[i].Release(1) > 0 {
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			break
		}
		share, malus := need/len(active), need%len(active)
		released := 0
		for k, i := range active {
			ask := share
			if k >= len(active)-malus {
				ask++
			}
			d := cur[i].Release(ask)
			cur[i].Size -= d
			released += d
		}
		if released == 0 { // cannot happen: every active job asked >= 1 releases >= 1
			break
		}
		need -= released
	}
	return diff(jobs, cur, order)
}

// diff lists the size changes from before to after in the given order.
func diff(before, after []Job, order []int) []Change {
	var out []Change
	for _, i := range order {
		if d := after[i].Size - before[i].Size; d != 0 {
			out = append(out, Change{JobID: before[i].ID, Delta: d})
		}
	}
	return out
}
