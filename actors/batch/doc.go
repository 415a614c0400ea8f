// Package batch is the batch cluster manager of the reallocation study
// (SPEC §5): one cluster of Capacity processors with a batch queue planned
// by a pure policy of actors/policy/batch (FCFS or CBF). It queues the jobs
// submitted to it (msg.BatchSubmit: from its server, or straight from local
// users on a non-dedicated platform), starts a queued job when its
// reservation comes, runs it for its runtime, and kills it at its walltime
// if it is still running then. How a job runs is the Config's Execution:
// OnNodes, as compute-only processes on the cluster's node actors (one of
// one processor per processor), which report its end (nodes.go); or
// OnTimers, compute-only inside the manager, which holds its processors
// for its runtime on a timer (the sim backend). A waiting job can be
// cancelled (msg.BatchCancel), several at once. It sends its state
// (msg.BatchState) to whoever asks (StateRequest): its server, to estimate
// completion times on it or to hand it to the agent. A state is made only
// when asked for, as the cluster is then, never after every change.
//
// The planner is called again whenever the queue or the running set
// changes: a submission, a cancellation, a job ending early (queued jobs
// move forward) or at its walltime. Every job's life is an event
// (msg.EventBatch*). Time comes from the Env's clock only.
package batch
