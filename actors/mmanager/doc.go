// Package mmanager is KOALA's malleability manager (SPEC §4): the
// scheduler-side actor of a malleable scenario, standing in for the rigid
// scheduler (actors/scheduler). It receives the information service's view,
// keeps the running jobs per cluster, and every poll period (and on every
// submission) applies a job-management approach (PRA or PWA) with a
// malleability policy (FPSMA or EGS) per cluster, under a threshold that
// leaves room for local users. The decisions are the pure policies of
// actors/policy/malleability; the manager applies them through messages.
//
// It places waiting jobs, rigid ones included, on one cluster (no
// co-allocation) with a placement policy of the registry in
// actors/policy/placement (Worst Fit, as SPEC §4's experiments do), and
// tracks grows, shrinks and starts in flight so that no processor is counted
// twice (see Props). The malleable runners it grows and shrinks are
// actors/mrunner. It checks the run's invariants as it goes (actors/invariant):
// never more processors than a cluster has, never more than the threshold's
// cap, every running malleable job within its bounds and, for FT, on a power
// of two.
package mmanager
