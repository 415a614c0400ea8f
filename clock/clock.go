package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock reads scenario time. Actors and policies never call time.Now.
type Clock interface {
	// Now is the scenario time elapsed since the run started.
	Now() time.Duration
	// Wall is the wall time elapsed since the run started.
	Wall() time.Duration
	// Factor is scenario seconds per wall second.
	Factor() float64
	// ToWall converts a scenario duration to the wall duration it takes.
	ToWall(d time.Duration) time.Duration
	// Sleep waits for a scenario duration or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

// Scaled is a wall clock scaled by a constant factor.
type Scaled struct {
	start  atomic.Pointer[time.Time]
	factor float64
}

// NewScaled returns a clock that starts now and runs factor times faster than
// the wall clock. A factor <= 0 means 1.
func NewScaled(factor float64) *Scaled {
	if factor <= 0 {
		factor = 1
	}
	c := &Scaled{factor: factor}
	c.Restart()
	return c
}

// Restart makes scenario and wall time start again from zero now, for every
// holder of the clock (a run restarts it when its workload begins).
func (c *Scaled) Restart() { c.RestartAt(time.Now()) }

// RestartAt makes t scenario time 0. Hosts of one run that read the same
// kernel wall clock and are told the same t share one time line.
func (c *Scaled) RestartAt(t time.Time) { c.start.Store(&t) }

// Now implements Clock.
func (c *Scaled) Now() time.Duration {
	return time.Duration(float64(time.Since(*c.start.Load())) * c.factor)
}

// Wall implements Clock.
func (c *Scaled) Wall() time.Duration { return time.Since(*c.start.Load()) }

// Factor implements Clock.
func (c *Scaled) Factor() float64 { return c.factor }

// ToWall implements Clock.
func (c *Scaled) ToWall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.factor)
}

// Sleep implements Clock.
func (c *Scaled) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(c.ToWall(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
