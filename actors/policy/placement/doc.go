// Package placement holds the co-allocator's placement policies of the KOALA
// scheduler (SPEC §3): Worst Fit (wf), Close-to-Files (cf), Cluster
// Minimization (cm), Flexible Cluster Minimization (fcm) and
// Communication-Aware (ca).
//
// A policy is a pure function: it takes a job's request, a snapshot of the
// grid (idle and total nodes per cluster, the network as the information
// service measured it) and options (cluster cap, CA metric), and returns an
// Outcome: Placed with one Assignment per cluster, NoFitNow (requeue the
// job), NeverFits (fail the job; even a fully idle grid could not hold it) or
// Internal (the snapshot or the options are malformed). Reasons are fixed
// strings (the Reason* constants) so results can count them. The unit of
// allocation is the node.
//
// Rules shared by every policy (see Place's helpers in place.go):
//   - Placement is atomic: every component is placed or none is.
//   - Components of one job may share a cluster; they are then merged into one
//     Assignment per cluster. Assignments are listed in the order the policy
//     first used each cluster.
//   - A job never spans a pair of clusters the network view reports as
//     unavailable (Net.Latency or Net.Bandwidth ok=false, either direction),
//     and never spans more than Options.MaxClusters clusters.
//   - Fixed requests are placed identically by every policy.
//   - A policy's rule defines a preference order; the placement returned is
//     the first one, in that order, that respects the constraints (a
//     depth-first search). When the plain greedy rule of SPEC §3 succeeds
//     this is exactly the greedy placement; the search only matters when the
//     greedy choice runs into a constraint or a fragmentation dead end.
//   - NoFitNow versus NeverFits is decided by running the same policy on the
//     snapshot with every cluster fully idle.
//
// Policies are found by name in Registry; nothing registers itself.
package placement
