// Package clock is the one source of time for actors, runners and applications.
//
// A run's scenario time advances Factor times faster than the wall clock:
// Factor = time_scale / dilation. time_scale shortens a run by scaling
// arrivals, durations and iteration counts; dilation slows the emulated
// hardware down (latency x d, bandwidth / d, compute x d) so a small host can
// keep up with many fast links. Results are reported in scenario seconds.
// Scaled is the clock of emulation; Virtual, the clock of simulation, jumps
// to the next event whenever every actor is idle.
package clock
