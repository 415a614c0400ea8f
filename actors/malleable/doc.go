// Package malleable holds the two actor kinds of KOALA's malleability support
// (SPEC §4): the malleable runner (MRunner, one per malleable job) and the
// malleability manager (the scheduler-side part that grows, shrinks and
// starts jobs).
//
// The MRunner runs the adaptation loop of its job: it observes the manager's
// GrowRequest and ShrinkRequest messages (and the application's own release
// requests), decides what the application accepts (its profile in
// actors/policy/malleability and its [min, max]), plans which processors to
// add or remove, and executes the change at the application's next safe
// point. A job is a set of single-processor allocations: on grow the runner
// claims the new processors one at a time at the cluster manager and starts
// ranks on them before asking the running ranks to resize; on shrink the
// departing ranks hand their data over and end first, and only then are their
// processors freed. Every processor is given back only once its node holds
// nothing of the job (the rank reported RankDone, also after an abort, or
// the node refused it), so a node is never handed to a second job while it
// still runs a rank of the first; JobFinished follows the last one. It
// replies with the accepted number, acknowledges the change with the new
// size and the time the application spent resizing, and reports voluntary
// releases.
//
// The manager receives the information service's view, keeps the running
// jobs per cluster, and every poll period (and on every submission) applies a
// job-management approach (PRA or PWA) with a malleability policy (FPSMA or
// EGS) per cluster, under a threshold that leaves room for local users. It
// places waiting jobs by Worst Fit on one cluster (no co-allocation), rigid
// ones included, and tracks grows, shrinks and starts in flight so that no
// processor is counted twice (see Manager).
//
// Both actors check the run's invariants as they go and count them in a
// Stats: never more processors than a cluster has, every malleable job within
// [min, max], FT always on a power of two, every mandatory shrink honoured at
// the first safe point. A failed check is also emitted as an
// "invariant_violation" event.
package malleable
