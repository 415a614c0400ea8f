package batch

import (
	"cmp"
	"math/bits"
	"slices"
	"time"
)

// step says that free processors are idle from at until the next step's at
// (the last step lasts forever).
type step struct {
	at   time.Duration
	free int
}

// profile is the availability profile of a cluster from an origin (now) on:
// a step function of free processors. steps[0].at is the origin, the steps
// are in increasing time and the last one has every processor free, because
// every job ends.
type profile struct {
	capacity int
	steps    []step
}

// delta is a change of dfree free processors from instant at on.
type delta struct {
	at    time.Duration
	dfree int
}

// profileOfDeltas returns the profile from origin of a cluster of capacity
// processors, free of them at origin, changed by the deltas of a and b
// (those at or before origin count from origin), the same steps adding
// each hold in turn would give (no two neighbours equal), and the least
// number of free processors over it. It sorts b, and a unless a is sorted
// already (the reservations of a queue planned first come, first served
// are), and merges the two.
func profileOfDeltas(origin time.Duration, capacity, free int, a, b []delta) (*profile, int) {
	if !slices.IsSortedFunc(a, func(x, y delta) int { return cmp.Compare(x.at, y.at) }) {
		sortDeltas(a)
	}
	sortDeltas(b)
	i, j := 0, 0
	for ; i < len(a) && a[i].at <= origin; i++ {
		free += a[i].dfree
	}
	for ; j < len(b) && b[j].at <= origin; j++ {
		free += b[j].dfree
	}
	p := &profile{capacity: capacity, steps: make([]step, 1, (len(a)+len(b))/2+2)}
	p.steps[0] = step{at: origin, free: free}
	least := free
	for i < len(a) || j < len(b) {
		var at time.Duration
		switch {
		case j == len(b) || (i < len(a) && a[i].at <= b[j].at):
			at = a[i].at
		default:
			at = b[j].at
		}
		for ; i < len(a) && a[i].at == at; i++ {
			free += a[i].dfree
		}
		for ; j < len(b) && b[j].at == at; j++ {
			free += b[j].dfree
		}
		if free != p.steps[len(p.steps)-1].free {
			p.steps = append(p.steps, step{at: at, free: free})
			least = min(least, free)
		}
	}
	return p, least
}

// sortDeltas sorts ds by instant (deltas at the same instant in any order:
// they are summed): a quicksort on the instants, inlined, which the plans
// of a busy cluster spend much of their time in, falling back to the
// standard library's sort on a pathological input.
func sortDeltas(ds []delta) { quickDeltas(ds, 2*bits.Len(uint(len(ds)))) }

func quickDeltas(ds []delta, depth int) {
	for len(ds) > 12 {
		if depth == 0 {
			slices.SortFunc(ds, func(a, b delta) int { return cmp.Compare(a.at, b.at) })
			return
		}
		depth--
		// Median of three to ds[0], then Hoare partition around it.
		m := len(ds) / 2
		a, b, c := ds[1].at, ds[m].at, ds[len(ds)-1].at
		switch {
		case (a <= b && b <= c) || (c <= b && b <= a):
			ds[0], ds[m] = ds[m], ds[0]
		case (b <= a && a <= c) || (c <= a && a <= b):
			ds[0], ds[1] = ds[1], ds[0]
		default:
			ds[0], ds[len(ds)-1] = ds[len(ds)-1], ds[0]
		}
		pivot := ds[0].at
		i, j := 0, len(ds)
		for {
			for i++; i < len(ds) && ds[i].at < pivot; i++ {
			}
			for j--; ds[j].at > pivot; j-- {
			}
			if i >= j {
				break
			}
			ds[i], ds[j] = ds[j], ds[i]
		}
		ds[0], ds[j] = ds[j], ds[0]
		// Recurse into the smaller side, loop on the larger.
		if j < len(ds)-1-j {
			quickDeltas(ds[:j], depth)
			ds = ds[j+1:]
		} else {
			quickDeltas(ds[j+1:], depth)
			ds = ds[:j]
		}
	}
	for i := 1; i < len(ds); i++ {
		for k := i; k > 0 && ds[k].at < ds[k-1].at; k-- {
			ds[k], ds[k-1] = ds[k-1], ds[k]
		}
	}
}

// index returns the index of the step holding t (t >= origin): a binary
// search for the first step after t, written out (the planner's hottest
// loop; sort.Search's closure costs a call per probe).
func (p *profile) index(t time.Duration) int {
	lo, hi := 0, len(p.steps)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.steps[m].at > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo - 1
}

// split makes sure a step begins at t and returns its index.
func (p *profile) split(t time.Duration) int {
	i := p.index(t)
	if p.steps[i].at == t {
		return i
	}
	p.steps = append(p.steps, step{})
	copy(p.steps[i+2:], p.steps[i+1:])
	p.steps[i+1] = step{at: t, free: p.steps[i].free}
	return i + 1
}

// add changes the free processors on [from, to) by delta (negative to
// occupy, positive to release) and merges steps left equal.
func (p *profile) add(from, to time.Duration, delta int) {
	if to <= from {
		return
	}
	i := p.split(from)
	// The steps from i to the one holding to change; to's own step, split
	// off after them (no second search), keeps what the step before had.
	j := i
	for ; j < len(p.steps) && p.steps[j].at < to; j++ {
		p.steps[j].free += delta
	}
	if j == len(p.steps) || p.steps[j].at != to {
		p.steps = append(p.steps, step{})
		copy(p.steps[j+1:], p.steps[j:])
		p.steps[j] = step{at: to, free: p.steps[j-1].free - delta}
	}
	// Steps inside [i, j) moved together and stay distinct; only the two
	// boundaries may now separate equal steps.
	if j < len(p.steps) && p.steps[j].free == p.steps[j-1].free {
		p.steps = append(p.steps[:j], p.steps[j+1:]...)
	}
	if i > 0 && p.steps[i].free == p.steps[i-1].free {
		p.steps = append(p.steps[:i], p.steps[i+1:]...)
	}
}

// minFree returns the least number of free processors on [from, to).
func (p *profile) minFree(from, to time.Duration) int {
	m := p.capacity
	for k := p.index(from); k < len(p.steps) && p.steps[k].at < to; k++ {
		m = min(m, p.steps[k].free)
	}
	return m
}

// fitBefore reports whether a job of procs processors held on [s, s+d)
// could start earlier, at some t in [lb, s): whether procs processors are
// free on [t, min(t+d, s)) for such a t, and returns the first such t. Its
// own hold covers the rest of [t, t+d), so with the profile nowhere below 0
// t is what earliest returns after taking the job out (from lb <= s), and
// there is no t when earliest would return s.
func (p *profile) fitBefore(lb, s time.Duration, procs int, d time.Duration) (time.Duration, bool) {
	if lb >= s { // no instant in [lb, s)
		return 0, false
	}
	i := p.index(lb)
	for i < len(p.steps) && p.steps[i].at < s {
		t := max(lb, p.steps[i].at)
		end := min(t+d, s)
		j := i
		for j < len(p.steps) && p.steps[j].at < end && p.steps[j].free >= procs {
			j++
		}
		if j == len(p.steps) || p.steps[j].at >= end {
			return t, true
		}
		i = j + 1
	}
	return 0, false
}

// move moves a hold of procs processors from [os, oe) to [ns, ne): the
// profile of taking it out and putting it back, changed only where the two
// places differ.
func (p *profile) move(os, oe, ns, ne time.Duration, procs int) {
	if ne <= os || oe <= ns { // apart
		p.add(os, oe, procs)
		p.add(ns, ne, -procs)
		return
	}
	if ns < os {
		p.add(ns, os, -procs)
	} else {
		p.add(os, ns, procs)
	}
	if ne < oe {
		p.add(ne, oe, procs)
	} else {
		p.add(oe, ne, -procs)
	}
}

// earliest returns the earliest instant s >= lb (lb >= origin) such that
// procs processors are free during [s, s+d). It always exists when procs
// does not exceed the capacity, since the last step has everything free.
func (p *profile) earliest(lb time.Duration, procs int, d time.Duration) time.Duration {
	i := p.index(lb)
	for i < len(p.steps) {
		s := max(lb, p.steps[i].at)
		j := i
		for j < len(p.steps) && p.steps[j].at < s+d && p.steps[j].free >= procs {
			j++
		}
		if j == len(p.steps) || p.steps[j].at >= s+d {
			return s
		}
		i = j + 1 // step j is too full: no start before its end fits
	}
	// Unreachable for procs <= capacity: the last step is fully free.
	return p.steps[len(p.steps)-1].at
}
