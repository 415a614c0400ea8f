// Package ptimer releases work at precise deadlines.
//
// Go timers round short waits up to about a millisecond on the machines this
// project runs on, which is far coarser than the link latencies it emulates
// (DAS-3 one-way latencies of 30 µs to 1.45 ms). A Line is one dedicated
// goroutine locked to its own OS thread, with the thread's timer slack set to
// 1 ns. On Linux it sleeps on a timerfd armed with an absolute
// CLOCK_MONOTONIC deadline, together with an eventfd that interrupts the sleep
// when an earlier deadline arrives, and spins only the last few microseconds
// before each deadline. The spin margin adapts to the wake-up overshoot the
// thread observes, so an idle machine spins a few µs and a loaded one spins
// up to MaxSpin.
//
// Callers register callbacks with At (they run on the timer thread and must
// not block) or wait in their own goroutine with SleepUntil and Sleep. New
// deadlines reach the thread through a lock-free inbox, so a caller that the
// operating system deschedules never holds up the thread. Each Line keeps a
// bounded histogram of release lateness (actual release time minus
// deadline), reported by Lateness.
//
// Limits. The thread is a Go thread: after each sleep it needs a P of the Go
// scheduler, so a process whose goroutines keep every P busy delays it (up
// to the scheduler's 10 ms preemption period). A Line therefore holds a
// spare P while it exists (ReserveP raises GOMAXPROCS by one, measured here
// to bring a 400 µs sleep's p99 overshoot with one busy goroutine from
// 3.5 ms to 31 µs); the garbage collector's stop-the-world pauses still
// hold the thread up. The Default line asks for
// SCHED_FIFO so that other processes do not; without CAP_SYS_NICE it runs
// as a normal thread and its tail lateness follows the machine's load.
// Goroutines woken by SleepUntil resume only when the Go scheduler runs them,
// tens of µs after the release on small virtual machines; callbacks given to
// At run at the release itself.
//
// ProbeStalls measures the floor under all of this: how often the machine
// takes a CPU away from a thread that never sleeps (on a virtual machine,
// the hypervisor does so unseen by the guest), and IdealLateness turns the
// gaps into the lateness percentile they alone impose on releases.
package ptimer
