package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Allgather is the synthetic all-gather application of SPEC §7: one
// million MPI_Allgather of 10 KB per process on 32 nodes (64 processes), no
// computation. A rank stands for a node and its NodeProcessors processes,
// so it contributes their "msg_bytes" blocks together (2 x 10 KB = 20 KB by
// default); every iteration each rank receives everybody's block and checks
// each block's header (origin rank and iteration). Its execution time comes
// from the links alone.
//
// Algorithm ("algorithm": 2, the default, is comm's choice, MPICH's rule:
// Bruck below 512 KB in total, the ring from there; 0 forces the ring, 1
// Bruck). On 32 nodes the total is 32 x 20 KB = 640 KB: the ring, 31 steps
// of one 20 KB block each, every step waiting for the previous one: on one
// Myri-10G cluster 31 x (0.03 ms + 20 KB / 560 MB/s) = 2.06 ms per call,
// 2,064 s for the million calls; across clusters each step is paced by the
// slowest link of the ring, so the time follows the links' latency and
// bandwidth.
//
// Demand on the host: a 32-node job moves 19.8 MB per call, about 10 GB/s
// at dilation 1; `dilation: auto` slows time until the host carries it.
// "iters" (default 1,000,000) is divided by the time scale. "compute_ms"
// (default 0) adds computation per call for experiments; the SPEC's
// benchmark has none. Value counts the blocks verified on the rank
// (iterations x ranks).
type Allgather struct{}

// Name implements App.
func (Allgather) Name() string { return "allgather" }

// Args implements ArgApp.
func (Allgather) Args() map[string]float64 {
	return map[string]float64{"msg_bytes": 10240, "iters": 1e6, "compute_ms": 0, "algorithm": 2}
}

// Nominal implements App.
func (g Allgather) Nominal(nodes int) time.Duration {
	d, _ := g.NominalArgs(nodes, nil)
	return d
}

// call returns the ideal time of one call on a reference cluster, its
// messages and bytes in all, and whether it is the ring (else Bruck).
func (g Allgather) call(n int, a map[string]float64) (t time.Duration, msgs, bytes float64, ring bool) {
	m := a["msg_bytes"] * NodeProcessors
	if n == 1 {
		// The node's processes exchange through memory: one copy.
		return xfer(m), 0, 0, false
	}
	ringT := time.Duration(n-1) * (RefLatency + xfer(m))
	bruckT := time.Duration(log2ceil(n))*RefLatency + xfer(float64(n-1)*m)
	useRing := false
	switch int(a["algorithm"]) {
	case 0:
		useRing = true
	case 1:
	default:
		useRing = float64(n)*m >= comm.RingThreshold
	}
	bytes = float64(n) * float64(n-1) * m
	if useRing {
		return ringT, float64(n * (n - 1)), bytes, true
	}
	return bruckT, float64(n * log2ceil(n)), bytes, false
}

// NominalArgs implements ArgApp.
func (g Allgather) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	a, err := resolve(g.Name(), g.Args(), args)
	if err != nil {
		return 0, err
	}
	ag, _, _, _ := g.call(max(nodes, 1), a)
	return time.Duration(a["iters"]) * (ms(a["compute_ms"]) + ag), nil
}

// Traffic implements TrafficApp.
func (g Allgather) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	a, err := resolve(g.Name(), g.Args(), args)
	if err != nil {
		return Traffic{}, err
	}
	t, msgs, bytes, ring := g.call(max(nodes, 1), a)
	// Every step of the ring (or round of Bruck) each rank sends one block;
	// the steps follow each other, each paying a latency, and the call's
	// blocks cross the slowest link one after the other.
	nn := max(nodes, 1)
	n := float64(nn)
	if nn == 1 {
		return Traffic{Iteration: ms(a["compute_ms"]) + t, Iterations: a["iters"]}, nil
	}
	rounds := float64(log2ceil(nn)) // Bruck
	if ring {
		rounds = n - 1
	}
	crit := (n - 1) * a["msg_bytes"] * NodeProcessors
	return Traffic{Iteration: ms(a["compute_ms"]) + t, Msgs: msgs, Bytes: bytes, Iterations: a["iters"], Burst: n,
		Rounds: rounds, CritBytes: crit}, nil
}

// Peers implements Peered: the partners of the algorithm Run calls.
func (g Allgather) Peers(n, r int, args map[string]float64) ([]int, error) {
	a, err := resolve(g.Name(), g.Args(), args)
	if err != nil {
		return nil, err
	}
	switch int(a["algorithm"]) {
	case 0:
		return comm.AllgatherRingPeers(n, r), nil
	case 1:
		return comm.AllgatherBruckPeers(n, r), nil
	}
	return comm.AllgatherPeers(n, r, g.blockBytes(a)), nil
}

// blockBytes is the block each rank contributes per call.
func (Allgather) blockBytes(a map[string]float64) int {
	return max(16, int(a["msg_bytes"]*NodeProcessors))
}

// Run implements App.
func (g Allgather) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	a, err := resolve(g.Name(), g.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(g.Name(), a, "iters"); err != nil {
		return Result{}, err
	}
	alg := int(a["algorithm"])
	if alg < 0 || alg > 2 {
		return Result{}, fmt.Errorf("allgather: algorithm %d: want 0 (ring), 1 (Bruck) or 2 (automatic)", alg)
	}
	size := g.blockBytes(a)
	r := c.Rank()
	iters := p.iterations(a["iters"])
	work := ms(a["compute_ms"] * NodeProcessors)
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(r + i)
	}
	verified := 0
	for it := 0; it < iters; it++ {
		binary.LittleEndian.PutUint64(block[0:], uint64(r))
		binary.LittleEndian.PutUint64(block[8:], uint64(it))
		var all [][]byte
		switch alg {
		case 0:
			all, err = c.AllgatherRing(ctx, block)
		case 1:
			all, err = c.AllgatherBruck(ctx, block)
		default:
			all, err = c.Allgather(ctx, block)
		}
		if err != nil {
			return Result{}, fmt.Errorf("allgather: iteration %d: %w", it, err)
		}
		for j, b := range all {
			if len(b) != size || binary.LittleEndian.Uint64(b[0:]) != uint64(j) || binary.LittleEndian.Uint64(b[8:]) != uint64(it) {
				return Result{}, fmt.Errorf("allgather: iteration %d: block %d is wrong", it, j)
			}
			verified++
			if j != r {
				c.Release(b)
			}
		}
		if err := c.Compute(ctx, work); err != nil {
			return Result{}, fmt.Errorf("allgather: %w", err)
		}
	}
	return Result{Iterations: iters, Value: float64(verified)}, nil
}
