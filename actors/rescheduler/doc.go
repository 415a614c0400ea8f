// Package rescheduler is the rescheduler of GrADS-style migration (SPEC
// §6), beside the scheduler. It keeps the information service's cluster
// statuses (each node's load) and the running watched jobs' contract
// monitor figures (JobProgress), and decides in two cases:
//   - migration on request: a running checkpointable job's runner asks
//     (its contract monitor sees its phases persistently slower than
//     predicted) whether to move the job; the rescheduler predicts the
//     job's remaining time where it runs and on every other cluster under
//     that cluster's reported load (nodes/qr's performance model), the cost
//     of the move (the configured migrate.CostModel over the checkpoint's
//     redistribution bytes, nodes/srs, and the link between the clusters),
//     and answers with the pure migrate.Decide's decision for the best
//     cluster;
//   - opportunistic migration: a job completes (JobEnded) and frees nodes;
//     the pure migrate.Opportunistic picks the running job, if any, that
//     gains most by moving onto them (opportunistic.go), and the
//     rescheduler sends that job's runner the migration.
//
// The runner stops the job, and it restarts on the target through the
// scheduler.
package rescheduler
