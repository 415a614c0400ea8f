package batch

import (
	"fmt"
	"time"
)

// KillTime is the kill rule as data: a job started at start with the given
// walltime is killed by its cluster at start + walltime if it is still
// running, so the planner treats that instant as the job's end.
func KillTime(start, walltime time.Duration) time.Duration { return start + walltime }

// Running is a job holding processors of the cluster.
type Running struct {
	// ID names the job in errors.
	ID string
	// Procs is the number of processors the job holds, at least 1.
	Procs int
	// Start is the instant the job started.
	Start time.Duration
	// Walltime is the requested run time, more than 0; the job is killed at
	// Start + Walltime.
	Walltime time.Duration
}

// End is the instant the job releases its processors at the latest
// (KillTime of its start and walltime); the planner uses it as the job's end.
func (r Running) End() time.Duration { return KillTime(r.Start, r.Walltime) }

// Queued is a job waiting in the batch queue. The queue slice is in queue
// (submission) order.
type Queued struct {
	// ID names the job in the Plan and in errors; IDs are unique in a queue.
	ID string
	// Procs is the number of processors the job asks for, 1 to the capacity.
	Procs int
	// Walltime is the requested run time, more than 0.
	Walltime time.Duration
	// Held says the job holds a reservation from an earlier Plan: the
	// planner keeps that promise (the job never starts later than Reserved)
	// and only moves the job forward. A job queued since the last plan has
	// Held false and gets its first reservation behind every held one.
	Held bool
	// Reserved is the planned start of a held job (ignored when Held is
	// false). A reservation in the past counts as now.
	Reserved time.Duration
}

// Reservation is the planned start of one queued job.
type Reservation struct {
	ID string
	// Start is the planned start; End = Start + walltime, the latest instant
	// the job may hold its processors.
	Start, End time.Duration
	// Broken is true when the job held a reservation that could not be kept
	// and Start is later than it. The planner never breaks a promise it made
	// itself; Broken reveals an inconsistent input, e.g. a job started later
	// than its reservation or a running job the planner did not schedule.
	Broken bool
}

// Plan is the outcome of one call to Policy.Schedule.
type Plan struct {
	// Start lists the queued jobs to start now, in queue order: exactly the
	// jobs whose reservation is now. The actor starts them (after killing
	// any running job whose End is now) and marks the others Held with
	// their reservation.
	Start []string
	// Reservations has one entry per queued job, in queue order.
	Reservations []Reservation

	// The availability profile after every reservation, and the lower bound
	// of a new job's start under the policy (the last reservation for FCFS,
	// now for CBF): what Completion needs.
	prof *profile
	next time.Duration
	// What the next plan needs to start from this one (ScheduleFrom); nil
	// when its held reservations did not settle.
	from *inputs
}

// Completion returns the completion time (reservation + walltime) that a job
// of procs processors and the given walltime would get if it were appended
// to the queue this plan was made for. It equals EstimateCompletion on the
// same inputs, without recomputing the schedule, so a server can estimate
// many candidates (one per processor count) from one plan.
func (p Plan) Completion(procs int, walltime time.Duration) (time.Duration, error) {
	if p.prof == nil {
		return 0, fmt.Errorf("plan: no schedule (the plan was not made by Schedule)")
	}
	if err := checkJob(procs, walltime, p.prof.capacity); err != nil {
		return 0, fmt.Errorf("candidate: %w", err)
	}
	return p.prof.earliest(p.next, procs, walltime) + walltime, nil
}

func checkJob(procs int, walltime time.Duration, capacity int) error {
	if procs < 1 {
		return fmt.Errorf("procs %d is less than 1", procs)
	}
	if procs > capacity {
		return fmt.Errorf("procs %d exceeds the cluster's capacity %d", procs, capacity)
	}
	if walltime <= 0 {
		return fmt.Errorf("walltime %v is not positive", walltime)
	}
	return nil
}
