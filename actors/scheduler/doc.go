// Package scheduler is KOALA's central scheduler: the placement queue scanned
// head to tail every scan period, the co-allocator that asks the configured
// placement policy for a plan against the information service's latest view,
// and the processor claimer that claims every component at its cluster
// manager atomically (all components or none). A job whose placement or claim
// fails goes to the tail of the queue; past the placement-try threshold, or
// when the policy says it can never fit, the submission fails with a reason.
package scheduler
