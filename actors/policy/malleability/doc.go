// Package malleability holds the pure decisions KOALA takes about malleable
// jobs (SPEC §4): the sizes a job accepts (Job: its bounds and whether its
// application runs only on powers of two), the per-cluster malleability
// policies FPSMA and EGS (who grows and who shrinks by how much), and the
// job-management approaches PRA and PWA (what to do with a cluster's free
// processors: grow running jobs, start waiting jobs, or shrink running jobs
// to make room).
//
// Everything here is a deterministic function of its arguments: no clocks, no
// randomness, no actors. The scheduler's malleability manager feeds snapshots
// in and applies the returned changes. The applications' profiles (FT and
// GADGET-2: execution time by processor count, accepted counts) live with the
// applications in nodes/apps; the actors hand what a policy needs of them
// (bounds, powers of two) in as data.
//
// Malleable jobs are never co-allocated: every decision is about one cluster.
package malleability
