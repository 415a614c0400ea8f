// Package mrunner is the malleable runner (MRunner, SPEC §4), one actor per
// malleable job. It runs the adaptation loop of its job: it observes the
// malleability manager's (actors/mmanager) GrowRequest and ShrinkRequest
// messages (and the application's own release requests), decides what the
// application accepts (its profile from nodes/apps, handed in by the wiring,
// and its [min, max]), plans which processors to add or remove, and executes
// the change at the application's next safe point.
//
// A job is a set of single-processor allocations: on grow the runner claims
// the new processors one at a time at the cluster manager and starts ranks on
// them before asking the running ranks to resize; on shrink the departing
// ranks hand their data over and end first, and only then are their
// processors freed. Every processor is given back only once its node holds
// nothing of the job (the rank reported RankDone, also after an abort, or
// the node refused it), so a node is never handed to a second job while it
// still runs a rank of the first; JobFinished follows the last one. It
// replies with the accepted number, acknowledges the change with the new size
// and the time the application spent resizing, and reports voluntary
// releases.
//
// It checks, and counts in an invariant.Stats, that the job stays within
// [min, max], that FT runs on a power of two, and that every mandatory shrink
// is honoured at the first safe point.
package mrunner
