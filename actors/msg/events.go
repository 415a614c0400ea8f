package msg

import "strings"

// Event kinds: the Kind of every Event the actors emit, as the recorder
// (results) reads and counts them and events.jsonl spells them. The one list
// of them; an actor emits, and results matches, these names only.
const (
	// A job's life, from its runner (rigid or malleable), the scheduler or
	// the malleability manager.
	EventSubmit      = "submit"       // a runner submitted its job (fields app, request, malleable; value size)
	EventPlaced      = "placed"       // the job is placed (field components; values tries, clusters)
	EventRejected    = "rejected"     // placement failed for good (field reason; value tries)
	EventClaimFailed = "claim_failed" // a cluster refused a claim; the job waits again
	EventStart       = "start"        // every rank connected: the job runs
	EventEnd         = "end"          // the job ended (field status: completed, failed, interrupted; field cause when failed)
	EventResubmit    = "resubmit"     // a failed attempt is submitted again (fields cause, reason; value attempt)

	// Malleability (actors/mmanager, actors/mrunner, actors/node).
	EventGrow             = "grow"              // a malleable job grew (values from, to)
	EventShrink           = "shrink"            // a malleable job shrank (values from, to)
	EventProcs            = "procs"             // a malleable job's size changed (value size)
	EventResizeRequest    = "resize_request"    // the manager asked a job to grow or shrink
	EventResizeDeclined   = "resize_declined"   // the runner declined a request
	EventResizeTimeout    = "resize_timeout"    // the manager stopped waiting for a request's acknowledgement
	EventStartDeferred    = "start_deferred"    // a start no longer fits; the job waits again
	EventGrowFailed       = "grow_failed"       // a grow's new ranks did not start
	EventVoluntaryRelease = "voluntary_release" // a job gave processors back on its own
	EventRankResized      = "rank_resized"      // a node's rank resized (bytes moved)
	EventClusterUtil      = "cluster_util"      // one cluster's utilisation, every poll

	// The information service and the platform.
	EventProbe      = "probe"       // one network measurement between two clusters
	EventProbeError = "probe_error" // a network measurement failed
	EventNodeDown   = "node_down"   // a cluster manager marked a node down
	EventNodeLoad   = "node_load"   // a node's competing load changed (fields node, cluster, reason; values programs, factor)

	// Faults on purpose (the scenario's faults timeline, launch/wiring).
	EventFault       = "fault"       // a fault was applied (fields kind, target, peer; values latency_factor, bandwidth_factor)
	EventUnreachable = "unreachable" // the information service marked a cluster unreachable (partition)
	EventReachable   = "reachable"   // the information service marked a cluster reachable again (heal)

	// Batch clusters (actors/batch) and the reallocation middleware
	// (actors/realloc) of SPEC §5. Fields cluster and origin (local | grid)
	// on every batch event.
	EventBatchQueued  = "batch_queued"  // a batch cluster queued a job (values procs, walltime_s, runtime_s)
	EventBatchRefused = "batch_refused" // a batch cluster refused a job (field reason)
	EventBatchStart   = "batch_start"   // a queued job started (values procs, wait_s, reserved_s)
	EventBatchEnd     = "batch_end"     // a job ended before its walltime (values procs, run_s)
	EventBatchKill    = "batch_kill"    // a job still running at its walltime was killed (values procs, run_s)
	EventBatchCancel  = "batch_cancel"  // a waiting job was removed from the queue
	EventAgentMap     = "agent_map"     // the agent mapped a job to a cluster by MCT (field cluster; values procs, completion_s)
	EventAgentFailed  = "agent_failed"  // the agent could not map a job (field reason)
	EventReallocMove  = "realloc_move"  // a reallocation moved a waiting job (fields from, to; values old_s, new_s)
	EventReallocRound = "realloc_round" // one reallocation round (fields mode, heuristic; values waiting, decided, moved)

	// Migration (actors/runner's contract monitor, actors/rescheduler).
	EventContractViolation = "contract_violation"     // a job's phases ran persistently slower than predicted (values phase, ratio, average, upper)
	EventMigrationDecision = "migration_decision"     // the rescheduler answered a request (fields from, to, migrate, reason, cost_model, forced; values gain, here_s, there_s, cost_s)
	EventMigrationStop     = "migration_stop"         // a job's ranks stopped and checkpointed for a move (values phase, write_s)
	EventMigrated          = "migrated"               // a migrated job runs again (fields from, to, cost_model, trigger; values phase, gain, predicted_cost_s, measured_cost_s)
	EventOpportunistic     = "opportunistic_decision" // a job ended and freed nodes: which running job moves onto them, if any (fields freed_by, to, chosen, best, migrate, reason, cost_model; values gain, here_s, there_s, cost_s of the best candidate, candidates, skipped, nodes)

	// EventInvariantViolation: an invariant check failed (fields invariant,
	// detail; actors/invariant).
	EventInvariantViolation = "invariant_violation"
)

// CauseWalltime is the "cause" of the EventEnd of a batch job killed at its
// walltime (status failed), as results counts it.
const CauseWalltime = "walltime"

// CauseRefused is the "cause" of the EventEnd of a batch grid job that no
// cluster accepted (status failed).
const CauseRefused = "refused"

// ResizeKind is the event kind of a grow (true) or a shrink (false); it is
// also the "op" field of the resize events.
func ResizeKind(grow bool) string {
	if grow {
		return EventGrow
	}
	return EventShrink
}

// Fault kinds: the "kind" field of EventFault, as the scenario's faults
// timeline names them (heal and restore end a partition and a degrade).
const (
	FaultKill      = "kill"
	FaultPartition = "partition"
	FaultHeal      = "heal"
	FaultDegrade   = "degrade"
	FaultRestore   = "restore"
	FaultLoad      = "load"
	FaultUnload    = "unload"
)

// Name is the cause as results and events.jsonl spell it: the enum's name
// without its prefix, in lower case ("node_down"); "" for FAILURE_NONE.
func (c FailureCause) Name() string {
	if c == FailureCause_FAILURE_NONE {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(c.String(), "FAILURE_"))
}
