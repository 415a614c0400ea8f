package comm

import (
	"math"
	"sync/atomic"
)

// Load is the competing load on a node, as the factor by which it
// stretches the node's computation (1: none). The node sets it; every
// Compute of the node's rank reads it. The emulated load spins no CPU: it
// only lengthens the waits Compute makes. Safe for concurrent use; a nil
// *Load is a factor of 1.
type Load struct{ bits atomic.Uint64 }

// NewLoad returns a load of factor 1.
func NewLoad() *Load {
	l := &Load{}
	l.Set(1)
	return l
}

// Set makes f the factor; f below 1 (or not a number) counts as 1.
func (l *Load) Set(f float64) {
	if math.IsNaN(f) || f < 1 {
		f = 1
	}
	l.bits.Store(math.Float64bits(f))
}

// Factor is the current factor.
func (l *Load) Factor() float64 {
	if l == nil {
		return 1
	}
	f := math.Float64frombits(l.bits.Load())
	if f < 1 {
		return 1
	}
	return f
}

// ShareFactor is the stretch a node of processors processors gives each
// of its job's processors processes when programs loading programs (busy
// loops) share it: a time-shared processor gives every runnable process
// an equal share, so the job's processes get processors / (processors +
// programs) of a processor each instead of one, a factor of (processors +
// programs) / processors (one processor and 10 programs: 11, SPEC §6).
func ShareFactor(processors, programs int) float64 {
	if processors < 1 {
		processors = 1
	}
	return float64(processors+max(programs, 0)) / float64(processors)
}
