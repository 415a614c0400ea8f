// Package apps holds the SPMD applications the emulated jobs run: prime,
// poisson, wave, allgather and ccr (SPEC §7), and the malleable ft and
// nbody (SPEC §4, see malleable.go: they implement Malleable and are
// resized at safe points between iterations). Each is a real program over
// nodes/comm: its messages are real bytes through the shaped links, its
// results are computed for real on a scaled-down problem (so they can be
// checked), and the bulk of its computation is emulated with Comm.Compute,
// calibrated so that a single-cluster run takes the application's Nominal
// time. Registry: Names and Lookup (explicit, no init). RunLocal runs a job
// in one process for tests, calibration and the in-process backend.
//
// Calibration model. Work is given in reference-processor time and a rank
// (one per node) computes with NodeProcessors processors at its cluster's
// speed. Nominal times are computed from the per-iteration compute plus the
// ideal cost of the messages on the critical path over the reference
// Myri-10G link (0.03 ms, 560 MB/s). The emulator adds what the host costs
// per message (about 15 µs of CPU each on the 2-core reference machine), so
// measured single-cluster times exceed Nominal by the share of that cost;
// time dilation shrinks it. The per-iteration compute was chosen so that
// (1) the sensitivity to inter-cluster latency and bandwidth ranks prime <
// poisson < wave < allgather (per message sent, allgather pays the
// inter-cluster latency most often, then wave, then poisson), (2) a
// 32-node job stays below about 20k messages/s at dilation 1 and (3) each
// iteration computes for at least 4 ms on 32 nodes.
package apps
