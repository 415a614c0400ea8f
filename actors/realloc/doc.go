// Package realloc holds the actors of the DIET-style middleware of SPEC §5
// over batch clusters (actors/batch): one Server per cluster and the Agent.
//
//   - A server fronts one batch cluster: it asks the cluster for its state
//     (a msg.BatchState, made when asked) for every estimate, sizes a
//     moldable job for its cluster and estimates its completion time
//     (SizeOn: the cluster's batch policy plus realloc.Size), and submits
//     and cancels on the cluster.
//   - The agent maps every job to the server of minimum estimated
//     completion time (MCT) and, every period (an hour), reallocates the
//     waiting jobs: it gathers every cluster's state, lets the pure
//     algorithm of actors/policy/realloc (regular or all-cancellation, with
//     MCT or MinMin) decide the moves over copies of the queues (Copies),
//     cancels the jobs to move, every cluster at once, then submits those
//     whose cancellation succeeded, in the order decided.
//
// The decisions are the pure functions of actors/policy/realloc and
// actors/policy/batch; these actors only gather their inputs and apply
// their plans. Time comes from the Env's clock only.
package realloc
