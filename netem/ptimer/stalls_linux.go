//go:build linux

package ptimer

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProbeStalls spins span on each CPU this process may run on, one CPU at a
// time, on a thread bound to that CPU with the delay lines' scheduling
// (SCHED_FIFO priority 1 where allowed, so that only interrupts and the
// hypervisor take the CPU away, and the wake-up latency request held), and
// reports each CPU's gaps (see Stalls). span should stay well under a
// second: the kernel throttles a realtime thread that spins for 950 ms of
// any second.
func ProbeStalls(ctx context.Context, span time.Duration) ([]Stalls, error) {
	if span <= 0 || span >= 900*time.Millisecond {
		return nil, fmt.Errorf("stall probe: span %v outside (0, 900ms)", span)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("stall probe: CPU affinity: %w", err)
	}
	defer HoldWakeLatency()()
	var out []Stalls
	gaps := make([]time.Duration, 0, maxGaps)
	for cpu := range 8 * int(unsafe.Sizeof(set)) {
		if !set.IsSet(cpu) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("stall probe: %w", err)
		}
		type result struct {
			gaps []time.Duration
			span time.Duration
			err  error
		}
		done := make(chan result, 1)
		go func() {
			// The thread's affinity and policy change: it is not unlocked,
			// so the runtime discards it when this goroutine ends.
			runtime.LockOSThread()
			var one unix.CPUSet
			one.Set(cpu)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				done <- result{err: fmt.Errorf("stall probe: bind to CPU %d: %w", cpu, err)}
				return
			}
			setupThread(true) // best effort, as the delay lines
			g, s := spin(gaps[:0], span)
			done <- result{gaps: g, span: s}
		}()
		r := <-done
		if r.err != nil {
			return out, r.err
		}
		out = append(out, summarize(cpu, r.span, r.gaps))
		gaps = r.gaps
	}
	return out, nil
}

// spin reads the monotonic clock in a loop for span and records every gap
// of at least minGap between two readings. Each reading is a system call,
// as each turn of a delay line's spin is (a zero-timeout ppoll): the
// goroutine is then never preempted by the Go scheduler in its user code,
// and what it records is the machine's.
func spin(gaps []time.Duration, span time.Duration) ([]time.Duration, time.Duration) {
	var ts unix.Timespec
	read := func() int64 {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	start := read()
	prev, end := start, start+int64(span)
	for prev < end {
		now := read()
		if g := time.Duration(now - prev); g >= minGap && len(gaps) < cap(gaps) {
			gaps = append(gaps, g)
		}
		prev = now
	}
	return gaps, time.Duration(prev - start)
}
