package malleability

import (
	"fmt"
	"math"
	"strings"
)

// ClusterView is what the malleability manager knows of one cluster when it
// decides: the information service's idle count and KOALA's own usage.
type ClusterView struct {
	Name string
	// Idle is the number of idle processors as the information service sees
	// them; background load of local users is already subtracted.
	Idle int
	// Capacity is the cluster's total number of processors.
	Capacity int
	// KoalaUsed is the number of processors KOALA's jobs hold in the cluster
	// (malleable and rigid).
	KoalaUsed int
	// Threshold is the fraction of Capacity KOALA may hold, e.g. 0.8, leaving
	// the rest to local users. 0 (unset), negative values and values above 1
	// mean no cap (1.0).
	Threshold float64
}

// Cap returns the most processors KOALA may hold in the cluster:
// floor(Threshold * Capacity).
func (c ClusterView) Cap() int {
	t := c.Threshold
	if t <= 0 || t > 1 {
		t = 1
	}
	// The small epsilon keeps 0.8*100 from flooring to 79.
	return int(math.Floor(t*float64(c.Capacity) + 1e-9))
}

// room is min(Idle, Cap-KoalaUsed), possibly negative.
func (c ClusterView) room() int { return min(c.Idle, c.Cap()-c.KoalaUsed) }

// Available returns the processors KOALA may use now:
// min(Idle, Cap - KoalaUsed), clamped at 0.
func (c ClusterView) Available() int { return max(c.room(), 0) }

// Waiting is a job in the placement queue that this cluster could start.
type Waiting struct {
	ID string
	// Size is the number of processors the job starts on (its initial, for
	// a malleable job its minimum, size).
	Size int
}

// Start orders a waiting job to start on a cluster.
type Start struct {
	JobID, Cluster string
	Size           int
	// AfterShrink marks a start that relies on the decision's shrinks: the
	// processors it needs are free only once the running jobs have released
	// them, so the job may be claimed only after that.
	AfterShrink bool
}

// Decision is a job-management decision for one cluster. Grow and Shrink are
// never both non-empty.
type Decision struct {
	Grow, Shrink []Change
	Start        []Start
}

// Approach is a job-management approach (PRA or PWA). running holds only the
// cluster's running malleable jobs; queue holds the waiting jobs in queue order.
type Approach func(pol Policy, c ClusterView, running []Job, queue []Waiting) Decision

// Approaches returns the job-management approaches by name: "pra" and "pwa".
// A fresh map is returned on every call.
func Approaches() map[string]Approach {
	return map[string]Approach{"pra": PRA, "pwa": PWA}
}

// NewApproach returns the approach registered under name (case-insensitive).
func NewApproach(name string) (Approach, error) {
	reg := Approaches()
	if a, ok := reg[strings.ToLower(strings.TrimSpace(name))]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("%w: approach %q (known: %s)", ErrUnknownPolicy, name, strings.Join(sortedKeys(reg), ", "))
}

// PRA gives precedence to running applications. The available processors
// (Available: idle and within the threshold) first go to the running
// malleable jobs through pol.Grow. Waiting jobs are considered only with what
// is left, i.e. when no running job can grow any more (the policies place all
// they can): the queue is scanned in order and every job that fits in what is
// left is started; a job that does not fit is skipped and stays queued. PRA
// never shrinks.
func PRA(pol Policy, c ClusterView, running []Job, queue []Waiting) Decision {
	var d Decision
	avail := c.Available()
	if avail > 0 && len(running) > 0 {
		d.Grow = pol.Grow(running, avail)
		avail -= total(d.Grow)
	}
	for _, w := range queue {
		if w.Size > 0 && w.Size <= avail {
			d.Start = append(d.Start, Start{JobID: w.ID, Cluster: c.Name, Size: w.Size})
			avail -= w.Size
		}
	}
	return d
}

// PWA gives precedence to waiting applications. The queue is scanned in order
// and every job that fits in the available processors is started. The first
// job that does not fit is the head PWA fights for:
//   - if shrinking the running malleable jobs can make room for it (their
//     processors above the minimum cover what is missing, threshold
//     included), pol.Shrink asks for the missing processors (mandatory) and
//     the head is started with AfterShrink set; the scan stops there (later
//     jobs wait, no grow);
//   - otherwise (even every job at its minimum would not fit it) the head is
//     skipped and the scan goes on; later jobs that fit are still started.
//
// Processors left after the scan (no shrink issued; queue empty, or nothing
// left in it fits) grow the running jobs through pol.Grow: this is the "grow
// the running jobs instead" case, and it also lets malleable jobs grow when
// nobody waits.
func PWA(pol Policy, c ClusterView, running []Job, queue []Waiting) Decision {
	var d Decision
	room := c.room() // may be negative when KOALA already exceeds its cap
	headSeen := false
	for _, w := range queue {
		if w.Size <= 0 {
			continue
		}
		if w.Size <= room {
			d.Start = append(d.Start, Start{JobID: w.ID, Cluster: c.Name, Size: w.Size})
			room -= w.Size
			continue
		}
		if headSeen {
			continue
		}
		headSeen = true
		// A release of r processors raises both Idle and Cap-KoalaUsed by r.
		need := w.Size - room
		if Releasable(running) >= need {
			d.Shrink = pol.Shrink(running, need)
			d.Start = append(d.Start, Start{JobID: w.ID, Cluster: c.Name, Size: w.Size, AfterShrink: true})
			return d
		}
	}
	if room > 0 && len(running) > 0 {
		d.Grow = pol.Grow(running, room)
	}
	return d
}

// total sums the deltas of changes.
func total(cs []Change) int {
	t := 0
	for _, c := range cs {
		t += c.Delta
	}
	return t
}
