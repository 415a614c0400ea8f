package ptimer

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A timer thread is a goroutine locked to its OS thread, and the Go
// scheduler preempts a goroutine that has run on one P for 10 ms without
// passing through the scheduler (sysmon's forced preemption). A timer
// thread never does: it sleeps and spins in system calls. So sysmon
// preempts it every 10 ms or so, and also soon after it wakes from a
// long sleep on an idle P whose last scheduling sysmon saw long ago.
// A preempted locked goroutine stops its thread until another thread of
// the runtime takes the goroutine from the run queue and hands the P back
// (two thread wake-ups). That happens at whatever moment sysmon chooses,
// typically in the spin before a release.
//
// Traced on the Delft netns calibration, this was the largest source of
// release lateness: the delay line's thread went to sleep in the middle of
// a spin and came back 60-300 µs later. 50-100 releases out of 2000 on the
// 5.8 ms pair were late by more than 50 µs, and the pair's p99 lateness
// was 72-129 µs. Late timer wake-ups were rarer.
//
// A Yielder makes the thread pass through the scheduler itself at a moment
// of its choosing, when the next deadline is far enough away to absorb the
// hand-off (measured here: p50 20-40 µs, p99 90-150 µs). It does so at
// least every Every, which keeps the P's scheduling tick fresh so that
// sysmon leaves the thread alone. With it, the same calibration's p99
// lateness on that pair was 30-46 µs.
type Yielder struct {
	// Every is the longest the thread goes between yields while it has
	// room for them; keep it well under the runtime's 10 ms.
	Every time.Duration
	// Slack is how far the next deadline must be for a yield.
	Slack time.Duration

	last  int64 // thread only: clock reading after the last yield
	count atomic.Int64
	cost  Histogram
}

// Default yield period and slack of the timer threads.
const (
	YieldEvery = 4 * time.Millisecond
	YieldSlack = 500 * time.Microsecond
)

// NewYielder returns a Yielder with the default period and slack.
func NewYielder() *Yielder { return &Yielder{Every: YieldEvery, Slack: YieldSlack} }

// Maybe yields the processor to the Go scheduler when the last yield is at
// least Every ago and the next deadline (untilNext ns from now; negative:
// none) is at least Slack away. It reports whether it yielded; the caller
// should then read its clock again. now and clock are in the same time
// base. Call it only from the thread that owns the Yielder.
func (y *Yielder) Maybe(now, untilNext int64, clock func() int64) bool {
	if now-y.last < int64(y.Every) || (untilNext >= 0 && untilNext < int64(y.Slack)) {
		return false
	}
	runtime.Gosched()
	t := clock()
	y.cost.Record(time.Duration(t - now))
	y.count.Add(1)
	y.last = t
	return true
}

// Count is the number of yields so far.
func (y *Yielder) Count() int64 { return y.count.Load() }

// Cost is the distribution of the time a yield took.
func (y *Yielder) Cost() Stats { return y.cost.Stats() }
