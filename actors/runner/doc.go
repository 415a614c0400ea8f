// Package runner is KOALA's user-facing runner for rigid and moldable jobs:
// one actor per job submits it to the scheduler, and once the job is placed
// and claimed waits for the local resource managers to start it, starts one
// rank per claimed node, hands every rank the address table, records start
// (all components ready) and end, releases the nodes and reports to the
// scheduler. A failure of any rank fails the whole job with a reason.
package runner
