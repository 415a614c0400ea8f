// Package fidelity says whether a run can be trusted: whether the host kept
// up with the grid it emulates.
//
// Every rank measures, on the real operations of its application:
//   - computation: each Comm.Compute's requested wait against the time it
//     actually took (the stretch), and how much lateness was paid back on
//     later calls (the compensation, never silent);
//   - links: each message's one-way delay against the link's (dilated)
//     target. The sender stamps every frame with its send time and the
//     arrival time its link model gives (latency + size / rate behind the
//     frames already queued on that link); the receiver compares the real
//     arrival with it. Frames that queued behind earlier ones measure the
//     delivered rate of a backlogged link.
//
// The stamps use CLOCK_MONOTONIC, which every process on one kernel shares
// (inproc, netns and docker all run on one machine), so one code path serves
// every backend. The launcher adds the host's own figures (Go scheduler
// latency from runtime/metrics, CPU saturation from /proc/stat), merges the
// ranks' histograms per job and per run, and gives a verdict: faithful or
// degraded, with the figures that decided it.
//
// The package also chooses a run's dilation from the host's measured
// capacity and the scenario's demand (Choose).
package fidelity
