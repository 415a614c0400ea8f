package fidelity

import (
	"math"
	"sync"
	"time"
)

// Target is a link as a sender's model sees it: its one-way latency and its
// wire rate in bytes/s (0: unlimited), both already dilated.
type Target struct {
	Latency time.Duration
	Rate    float64
}

// LinkModel is one node's model of its outgoing links: per destination
// cluster a zero-depth token bucket at the link's rate followed by its
// latency, the same model the shapers implement. A frame of n bytes asked
// to leave at now starts at max(now, free), finishes n/rate later, and is
// due latency after that. It is safe for concurrent use.
type LinkModel struct {
	mu    sync.Mutex
	links map[string]*modelLink
}

type modelLink struct {
	Target
	free int64
}

// NewLinkModel returns the model of the given links by destination
// cluster; nil or empty means no model (Stamp reports no target).
func NewLinkModel(targets map[string]Target) *LinkModel {
	if len(targets) == 0 {
		return nil
	}
	m := &LinkModel{links: make(map[string]*modelLink, len(targets))}
	for dst, t := range targets {
		m.links[dst] = &modelLink{Target: t}
	}
	return m
}

// Stamp returns when a frame of n bytes to a node of cluster dst, sent at
// now (Mono), is due at the receiver, and whether it measures the link's
// rate: it queued behind earlier frames and its time on the wire (the wait
// plus its own serialisation) is at least the link's latency, so that its
// arrival is set by the rate the link delivers more than by the latency.
// (The second 8-byte boundary value of a lock-step exchange waits a few µs
// behind the first; its arrival says nothing of the rate.) ok is false when
// the model has no such link.
func (m *LinkModel) Stamp(dst string, n int, now int64) (due int64, backlogged, ok bool) {
	if m == nil {
		return 0, false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.links[dst]
	if l == nil {
		return 0, false, false
	}
	start := max(now, l.free)
	finish := start
	if l.Rate > 0 {
		finish += int64(math.Ceil(float64(n) * 1e9 / l.Rate))
		l.free = finish
	}
	backlogged = start > now && finish-now >= int64(l.Latency)
	return finish + int64(l.Latency), backlogged, true
}
