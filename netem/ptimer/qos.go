package ptimer

import (
	"sync"
)

// A virtual CPU with nothing to run halts, and a timer that ends a sleep on
// a halted virtual CPU is delivered through the hypervisor: measured here
// (2-core virtual machine, haltpoll idle driver, SCHED_FIFO, 1 ns slack),
// 100 µs - 3.4 ms sleeps woke p50 33-56 µs and p99 70-115 µs late; with a
// zero CPU wake-up latency request in force (/dev/cpu_dma_latency, the
// kernel's PM QoS) the idle loop polls instead of halting and the same
// sleeps woke p50 14-31 µs and p99 24-59 µs late. HoldWakeLatency makes that
// request for the life of a precision timer thread: idle CPUs then poll
// (they burn host CPU while the emulator shapes links), which is the price
// of sub-50 µs releases. Without root, or where the device does not exist
// (containers), the request is not made and the thread's precision is what
// the machine gives (see WakeLatencyHeld).

var qos struct {
	mu   sync.Mutex
	n    int
	held bool
	rel  func()
}

// HoldWakeLatency requests zero CPU wake-up latency for as long as any
// holder keeps it and returns the function that gives the hold back. It is
// best effort: when the request cannot be made it returns a release that
// does nothing, and WakeLatencyHeld reports false.
func HoldWakeLatency() (release func()) {
	qos.mu.Lock()
	defer qos.mu.Unlock()
	if qos.n == 0 {
		qos.rel, qos.held = requestWakeLatency()
	}
	qos.n++
	return releaseOnce(&qos.mu, func() {
		qos.n--
		if qos.n == 0 {
			qos.rel()
			qos.rel, qos.held = nil, false
		}
	})
}

// WakeLatencyHeld reports whether a zero wake-up latency request is in
// force for this process.
func WakeLatencyHeld() bool {
	qos.mu.Lock()
	defer qos.mu.Unlock()
	return qos.held
}

// ThreadResources takes what a precision timer thread needs while it lives,
// a spare P (ReserveP) and the wake-up latency request (HoldWakeLatency),
// and returns the function that gives both back.
func ThreadResources() (release func()) {
	unreserve, unhold := ReserveP(), HoldWakeLatency()
	return func() {
		unreserve()
		unhold()
	}
}
