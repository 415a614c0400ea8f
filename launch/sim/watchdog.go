package sim

import (
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/clock"
)

// Watch calls stuck once, with the reason, when clk has fired no event for
// after of wall time while something is active: a message whose handler
// never returned (a handler that blocks, or one that panicked, whose
// message is then never ended) would otherwise hold the simulation forever.
// A simulation that is merely busy fires events many times a second. The
// returned function stops the watch.
func Watch(clk *clock.Virtual, after time.Duration, stuck func(reason string)) (stop func()) {
	done := make(chan struct{})
	go func() {
		period := max(after/10, time.Millisecond)
		t := time.NewTicker(period)
		defer t.Stop()
		last, since := clk.Fired(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if n := clk.Fired(); n != last || clk.Active() == 0 {
				last, since = n, time.Now()
				continue
			}
			if time.Since(since) >= after {
				stuck(fmt.Sprintf("simulation stuck at scenario time %s: no event for %s of wall time with %d messages or steps unfinished (an actor's handler blocked or panicked)",
					clk.Now(), after, clk.Active()))
				return
			}
		}
	}()
	var closed bool
	return func() {
		if !closed {
			closed = true
			close(done)
		}
	}
}
