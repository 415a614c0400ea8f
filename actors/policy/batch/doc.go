// Package batch holds the batch queue of one cluster as a pure planner (SPEC
// §5): given the time, the cluster's processor count, the running jobs and the
// queue, a Policy returns a Plan saying which queued jobs start now and the
// reservation (planned start) of every queued job. Two policies are
// registered: "fcfs" (first come, first served, no backfilling) and "cbf"
// (Conservative Backfilling). EstimateCompletion gives the completion time a
// new job would get if it were queued now; the servers of the reallocation
// study (package realloc) call it to size and map moldable jobs.
//
// ScheduleFrom (Incremental) gives Schedule's plan from the plan made on the
// cluster's previous call: the previous plan is one more input, only read,
// so a policy stays a pure function; when the inputs follow from it (time
// passed, jobs ended, started, were cancelled or arrived) the planner starts
// from its profile instead of rebuilding one, and leaves the held
// reservations where they are when no processor was freed early. A spare
// plan, one the caller reads no more, lends its memory to the new one; it
// makes no difference to the plan.
//
// Units: processors are integers; every instant and every length is a
// time.Duration, instants being offsets from the run's epoch (the start of
// the emulated or simulated run). Integer nanoseconds keep schedules exact:
// no float rounding can make two reservations overlap.
//
// Kill rule: a running job holds its processors until Running.End, that is
// start + walltime (KillTime). The planner never looks at actual run times;
// the cluster actor kills a job that is still running at its walltime and
// calls the planner again whenever a job ends, early or at its walltime.
//
// Policies are found by name in Registry; nothing registers itself.
package batch
