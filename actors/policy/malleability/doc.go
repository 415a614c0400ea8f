// Package malleability holds the pure decisions KOALA takes about malleable
// jobs (SPEC §4): the application profiles of FT and GADGET-2 (execution time
// as a function of the processor count, and which counts each application
// accepts), the per-cluster malleability policies FPSMA and EGS (who grows and
// who shrinks by how much), and the job-management approaches PRA and PWA (what
// to do with a cluster's free processors: grow running jobs, start waiting
// jobs, or shrink running jobs to make room).
//
// Everything here is a deterministic function of its arguments: no clocks, no
// randomness, no actors. The scheduler's malleability manager feeds snapshots
// in and applies the returned changes; the malleable runner and applications
// use the profiles.
//
// Malleable jobs are never co-allocated: every decision is about one cluster.
package malleability
