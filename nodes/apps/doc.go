// Package apps holds the SPMD applications the emulated jobs run: prime,
// poisson, wave, allgather and ccr (SPEC §7), and the malleable ft and
// nbody (SPEC §4, see malleable.go: they implement Malleable and are
// resized at safe points between the steps of their iterations; their
// profiles, the counts they accept and their execution time by count, are
// in profile.go and are handed to the malleability policies as data). Each is a real program over
// nodes/comm: its messages are real bytes through the shaped links, its
// results are computed for real on a scaled-down problem (so they can be
// checked), and the bulk of its computation is emulated with Comm.Compute,
// calibrated so that a single-cluster run takes the application's Nominal
// time. Registry: Names and Lookup (explicit, no init). Lookup also finds
// Compute (compute.go), the compute-only process of a batch grid's trace
// job, which no workload names. RunLocal runs a job in one process for
// tests, calibration and the in-process backend.
//
// The problems as the papers state them. Each application's computation and
// its messages describe the same problem: wave's string, poisson's grid,
// allgather's million 10 KB all-gathers, prime's limit, ccr's split, ft's
// hypercube transposes and nbody's ring halos per profile step. No
// application pads its computation to slow its message rate down to what
// the host carries; a run that asks more of the host than it has is slowed
// as a whole by its dilation (latency x d, bandwidth / d, computation x d;
// `dilation: auto` chooses d from the host's measured capacity and each
// application's Traffic), and its fidelity monitor says whether the host
// kept up.
//
// Work is given in reference-processor time (a Leiden processor, speed 1.0)
// and a rank (one per node) computes with NodeProcessors processors at its
// cluster's speed. Nominal times are computed from the per-iteration
// computation plus the ideal cost of the messages on the critical path
// over the reference Myri-10G link (0.03 ms, 560 MB/s); each application's
// doc comment gives its derivation.
//
// Time scale. A time scale k divides every iteration count (and prime's
// total work) by k. Work a job does once must cost the same scenario time
// at every time scale: the data a malleable application redistributes at a
// resize shrinks by k with its iterations (ScaledData); the ideal cost of
// prime's, poisson's and wave's final gathers, broadcasts and reductions
// over the job's links comes off their computation (Params.Credit),
// so that each costs its own time once, not k times. The malleable
// applications' final reductions are still counted k times.
package apps
