// Package wiring builds every role of a run once, from the scenario plan,
// for every backend: the scheduler or the malleability manager, the
// information service, the cluster managers with their background load, the
// compute nodes and the rigid or malleable runners (Spec and its builders),
// the conversion of scenario jobs into msg.JobSpec, and the results
// directory, opened at the start of a run and finished by one function
// (Results.Finish) at its end. A batch grid (plan.Batch: batch clusters,
// their servers and the agent of SPEC §5) is built by StartBatch, its books
// closed by NewBatchBooks. Backends (launch, launch/grid) differ only in
// where an actor lives and how its PID is found (Peers).
package wiring
