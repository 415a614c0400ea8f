// Package rescheduler is the rescheduler of GrADS-style migration (SPEC
// §6), beside the scheduler: a running checkpointable job's runner asks it
// (migration on request, when the job's contract monitor sees its phases
// persistently slower than predicted) whether to move the job; it predicts
// the job's remaining time where it runs and on every other cluster
// (nodes/qr's performance model), the cost of the move (the configured
// migrate.CostModel over the checkpoint's redistribution bytes, nodes/srs,
// and the link between the clusters), and answers with the pure
// migrate.Decide's decision for the best cluster. The runner stops the
// job, and it restarts there through the scheduler.
package rescheduler
