// Package migrate holds the decisions of GrADS-style migration of running
// jobs (SPEC §6), as pure functions over small value types:
//   - Decide: the rescheduler's rule, gain = (remaining here - (remaining
//     there + cost)) / remaining here, migrate when the gain exceeds the
//     threshold (30 %);
//   - CostModel: the migration cost, either the worst-case constant
//     (WorstCase, 900 s in SPEC §6's named parts) or a prediction from the
//     bytes the redistribution moves between each (old, new) pair of
//     processes and the links between them, plus what the grid pays
//     besides (Predicted with a Grid: the scheduler's wait, the start-up);
//   - Monitor: the contract monitor, a state machine over the ratios of
//     measured to predicted phase times;
//   - Opportunistic: when a job frees nodes, which running job (if any)
//     gains most by moving onto them.
//
// Reasons are fixed strings (the Reason* constants) so results can count
// them. Cost models are found by name in CostModels; nothing registers
// itself. The package imports only the standard library: the caller
// computes the redistribution's byte matrix (nodes/srs) and the remaining
// times (nodes/qr).
package migrate
