package ptimer

import (
	"time"

	"golang.org/x/sys/unix"
)

// The process's offset between Go's monotonic clock and the kernel's
// CLOCK_MONOTONIC, taken once: Mono then costs what time.Since costs (no
// system call) and agrees across the processes of one kernel to within the
// few hundred nanoseconds the two reads below are apart.
var (
	monoStart = time.Now()
	monoZero  = kernelMono()
)

func kernelMono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// Mono returns CLOCK_MONOTONIC in nanoseconds, the clock every process on
// this kernel shares (inproc ranks, netns hosts and containers alike).
func Mono() int64 { return monoZero + int64(time.Since(monoStart)) }

// MonoTime converts a Mono reading into a time.Time of this process (with
// its monotonic reading), for deadlines given to a Line or a Go timer.
func MonoTime(ns int64) time.Time { return monoStart.Add(time.Duration(ns - monoZero)) }
