// Package realloc holds the pure decisions of the DIET-style middleware of
// SPEC §5, which spreads moldable jobs over batch clusters and reallocates
// the waiting ones every hour:
//   - moldable sizing (Size): a job's type (t1-t4, drawn from a per-job seed),
//     its processor count by binary search over Amdahl's speedup for the
//     earliest estimated completion, and its walltime and runtime scaled by
//     the cluster's speed;
//   - mapping (MinCompletion): the agent sends a request to the server with
//     the minimum estimated completion time (MCT);
//   - reallocation (Regular, AllCancellation) with the heuristics MCT and
//     MinMin, driven through an Estimator that the caller implements over
//     its view of the batch queues (package batch gives the estimates);
//   - the metrics of a run against the same run without reallocation
//     (Compare).
//
// Units: instants and lengths are time.Duration (instants are offsets from
// the run's epoch), as in package batch; processors are integers; shares are
// fractions in [0, 1] (reallocations per job may exceed 1). Nothing here
// reads a clock or a global random source.
//
// Heuristics and algorithms are found by name in Heuristics and Algorithms;
// nothing registers itself.
package realloc
