// Package qr is the performance model of the QR factorisation application
// of the migration experiments (SPEC §6): ScaLAPACK's PDGEQRF of an N x N
// matrix plus its right-hand side, block-cyclically distributed over a
// P x Q process grid, one process per node. It splits the factorisation
// into phases (groups of panels), counts each phase's flops exactly and its
// communication (panel broadcasts along process rows, reductions along
// process columns), and predicts each phase's time on a given set of nodes
// (speed, load) and links. It also gives the data layout and size the
// stop/restart library (nodes/srs) and the migration cost predictor use.
// Pure: no clock, no network.
package qr
