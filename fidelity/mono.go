package fidelity

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
	monoBase  = kernelMono()
)

func kernelMono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// Mono returns CLOCK_MONOTONIC in nanoseconds, the clock every process on
// this kernel shares.
func Mono() int64 { return monoBase + int64(time.Since(monoStart)) }
