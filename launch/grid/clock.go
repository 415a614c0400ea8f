package grid

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/koala-emu/koala-emu/clock"
)

// epochClock is the scaled wall clock of an actor host whose scenario time 0
// is set from outside: every container of a run reads the same kernel wall
// clock, and the launcher tells them all the same epoch (GridEpoch), so
// events from every container share one time line.
type epochClock struct {
	epoch  atomic.Pointer[time.Time]
	factor float64
}

var _ clock.Clock = (*epochClock)(nil)

func newEpochClock(factor float64) *epochClock {
	if factor <= 0 {
		factor = 1
	}
	c := &epochClock{factor: factor}
	c.SetEpoch(time.Now())
	return c
}

// SetEpoch makes t scenario time 0.
func (c *epochClock) SetEpoch(t time.Time) { c.epoch.Store(&t) }

// Epoch returns scenario time 0.
func (c *epochClock) Epoch() time.Time { return *c.epoch.Load() }

func (c *epochClock) Now() time.Duration {
	return time.Duration(float64(time.Since(*c.epoch.Load())) * c.factor)
}

func (c *epochClock) Wall() time.Duration { return time.Since(*c.epoch.Load()) }

func (c *epochClock) Factor() float64 { return c.factor }

func (c *epochClock) ToWall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.factor)
}

func (c *epochClock) Sleep(ctx context.Context, d time.Duration) error {
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
