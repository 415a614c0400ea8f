package fidelity

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Probe is one rank's fidelity recorder. Compute and frame observations
// come from the rank's own goroutines (the application and one reader per
// connection); a mutex keeps them apart. A nil *Probe records nothing.
type Probe struct {
	mu sync.Mutex
	s  Stats
}

// NewProbe returns an empty probe.
func NewProbe() *Probe { return &Probe{} }

// Stats is what one rank (or, merged, one job or run) measured.
type Stats struct {
	// Computation: calls, the wait asked for in total (after dilation),
	// the time the waits took, and the lateness of earlier calls paid back
	// by shortening later ones (Compensated).
	ComputeCalls  int64         `json:"compute_calls"`
	ComputeAsked  time.Duration `json:"compute_asked_ns"`
	ComputeActual time.Duration `json:"compute_actual_ns"`
	Compensated   time.Duration `json:"compensated_ns"`
	// ComputeLate holds each call's lateness relative to the wait asked
	// for: (actual - due) / asked, where due is the wait after paying back
	// earlier lateness.
	ComputeLate Hist `json:"compute_late"`
	// Links by "src>dst" cluster pair: each frame's lateness relative to
	// its target delay.
	Links map[string]*LinkStats `json:"links,omitempty"`
}

// LinkStats is one cluster pair's frames.
type LinkStats struct {
	// Late: frames that found the link idle: (arrival - due) / target,
	// the target being latency + size / rate.
	Late Hist `json:"late"`
	// Backlog: frames that queued behind earlier ones on the sender's link:
	// the same ratio, which a link that delivers less than its rate drives
	// up. It is the delivered-rate check.
	Backlog Hist `json:"backlog"`
	// Early: the frames, idle or backlogged, that arrived before the
	// model's time, by how much: (due - arrival) / target. A shaper that
	// lets a message through faster than the link's latency and rate (a
	// token bucket deeper than the model's) drives it up.
	Early Hist `json:"early"`
	// TargetNs is the sum of the frames' target delays, WorstNs the largest
	// lateness in nanoseconds.
	Frames  int64         `json:"frames"`
	Target  time.Duration `json:"target_ns"`
	WorstNs time.Duration `json:"worst_ns"`
}

// Compute records one Compute call: asked is the wait the work needs, due
// the wait after paying back earlier lateness (<= asked), actual what the
// wait took.
func (p *Probe) Compute(asked, due, actual time.Duration) {
	if p == nil || asked <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.ComputeCalls++
	p.s.ComputeAsked += asked
	p.s.ComputeActual += actual
	if due < asked {
		p.s.Compensated += asked - max(due, 0)
	}
	p.s.ComputeLate.Add(float64(actual-max(due, 0)) / float64(asked))
}

// Frame records one received frame of the pair src>dst: sent and due are
// the sender's stamps (Mono), arrived the receiver's Mono after the last
// byte; backlogged says the frame queued behind earlier ones on the
// sender's link.
func (p *Probe) Frame(pair string, sent, due, arrived int64, backlogged bool) {
	if p == nil {
		return
	}
	target := due - sent
	if target <= 0 {
		return // the sender had no model of this link
	}
	late := arrived - due
	ratio := float64(late) / float64(target)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s.Links == nil {
		p.s.Links = map[string]*LinkStats{}
	}
	l := p.s.Links[pair]
	if l == nil {
		l = &LinkStats{}
		p.s.Links[pair] = l
	}
	l.Frames++
	l.Target += time.Duration(target)
	if time.Duration(late) > l.WorstNs {
		l.WorstNs = time.Duration(late)
	}
	if ratio < 0 {
		l.Early.Add(-ratio)
	}
	if backlogged {
		l.Backlog.Add(ratio)
	} else {
		l.Late.Add(ratio)
	}
}

// Snapshot returns a copy of what the probe recorded.
func (p *Probe) Snapshot() Stats {
	if p == nil {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out Stats
	out.Merge(&p.s)
	return out
}

// Merge adds o's figures to s.
func (s *Stats) Merge(o *Stats) {
	if o == nil {
		return
	}
	s.ComputeCalls += o.ComputeCalls
	s.ComputeAsked += o.ComputeAsked
	s.ComputeActual += o.ComputeActual
	s.Compensated += o.Compensated
	s.ComputeLate.Merge(&o.ComputeLate)
	for _, k := range sortedKeys(o.Links) {
		ol := o.Links[k]
		if s.Links == nil {
			s.Links = map[string]*LinkStats{}
		}
		l := s.Links[k]
		if l == nil {
			l = &LinkStats{}
			s.Links[k] = l
		}
		l.Frames += ol.Frames
		l.Target += ol.Target
		l.WorstNs = max(l.WorstNs, ol.WorstNs)
		l.Late.Merge(&ol.Late)
		l.Backlog.Merge(&ol.Backlog)
		l.Early.Merge(&ol.Early)
	}
}

// Stretch is the computation's actual time over the time asked for, in
// total (1 when nothing was computed).
func (s *Stats) Stretch() float64 {
	if s.ComputeAsked <= 0 {
		return 1
	}
	return float64(s.ComputeActual) / float64(s.ComputeAsked)
}

// LinkLate merges every pair's idle-link lateness.
func (s *Stats) LinkLate() *Hist {
	var h Hist
	for _, l := range s.Links {
		h.Merge(&l.Late)
	}
	return &h
}

// LinkEarly merges every pair's earliness (of the early frames only; the
// frames of LinkLate and BacklogLate are all of them).
func (s *Stats) LinkEarly() *Hist {
	var h Hist
	for _, l := range s.Links {
		h.Merge(&l.Early)
	}
	return &h
}

// BacklogLate merges every pair's backlogged lateness.
func (s *Stats) BacklogLate() *Hist {
	var h Hist
	for _, l := range s.Links {
		h.Merge(&l.Backlog)
	}
	return &h
}

// EventField is the field of a job's end event that carries the job's
// stats, encoded.
const EventField = "fidelity"

// Encode returns s as the JSON the ranks send with their results.
func (s *Stats) Encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		return nil // Stats holds only numbers and maps of them
	}
	return b
}

// MergeEncoded merges the encoded stats of a job's ranks (empty blobs are
// skipped) and returns the job's stats encoded; "" when no rank sent any.
func MergeEncoded(blobs [][]byte) (string, error) {
	var all Stats
	n := 0
	for i, b := range blobs {
		if len(b) == 0 {
			continue
		}
		var s Stats
		if err := json.Unmarshal(b, &s); err != nil {
			return "", fmt.Errorf("fidelity: rank %d's figures: %w", i, err)
		}
		all.Merge(&s)
		n++
	}
	if n == 0 {
		return "", nil
	}
	return string(all.Encode()), nil
}

// Decode parses stats encoded by Encode or MergeEncoded.
func Decode(s string) (*Stats, error) {
	var out Stats
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	return &out, nil
}
