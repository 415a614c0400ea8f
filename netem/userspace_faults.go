package netem

import (
	"fmt"
	"time"
)

// This file holds the userspace shaper's runtime changes, for faults on
// purpose: a destination's link changed mid-run (SetLink), and a
// destination cut off and healed (Cut).

// SetLink changes the link towards dst from now on: l is undilated (the
// shaper dilates it as the plan's links). Segments already sent keep their
// delivery times; later writes, on connections open now and later, follow
// the new rate, delay, jitter and loss.
func (e *UserspaceEgress) SetLink(dst string, l Link) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.freeze()
	p, ok := e.paths[dst]
	if !ok {
		return fmt.Errorf("netem: %s has no link to %q", e.plan.Node, dst)
	}
	d := l.Dilate(e.dilation)
	e.plan.To[dst] = d
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(d, e.overhead())
	return nil
}

// Cut holds every write towards dst (cut) until the cut is healed (Cut
// with false): a write blocks before it books the link, as a stream stalls
// while a partition drops its packets, and goes on when the cut heals;
// nothing already sent is lost or held, and nothing is dropped. A blocked
// write ends on the connection's close or write deadline. Cutting an
// unknown destination is an error.
func (e *UserspaceEgress) Cut(dst string, cut bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.freeze()
	p, ok := e.paths[dst]
	if !ok {
		return fmt.Errorf("netem: %s has no link to %q", e.plan.Node, dst)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case cut && p.cut == nil:
		p.cut = make(chan struct{})
	case !cut && p.cut != nil:
		close(p.cut)
		p.cut = nil
	}
	return nil
}

// healed returns a channel closed when the path's cut heals, or nil when
// the path is not cut.
func (p *path) healed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// waitUncut blocks while the connection's destination is cut, until the
// cut heals, the connection closes or its write deadline passes.
func (c *shapedConn) waitUncut() error {
	for {
		healed := c.p.healed()
		if healed == nil {
			return nil
		}
		if err := c.wait(-1, healed, nil, onWrite); err != nil {
			return err
		}
	}
}

// holdTolerance is how late the delay line may wake a reader held for
// this path; SetLink changes it while readers hold frames.
func (p *path) holdTolerance() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tolerance
}

// set gives the path the (dilated) link l. Call with p.mu held, or before
// the path is shared.
func (p *path) set(l Link, o Overhead) {
	p.link, p.rate, p.delay, p.jitter = l, WireRate(l), o.DelayFor(l.Latency), l.Jitter
	p.loss, p.rtt = min(max(l.Loss, 0), 0.99), 2*l.Latency
	p.tolerance = time.Duration(HoldTolerance * float64(l.Latency))
	p.ahead = 0
	if p.rate > 0 {
		p.ahead = int64(p.delay) + int64(float64(backlogSlack)*1e9/p.rate)
	}
}
