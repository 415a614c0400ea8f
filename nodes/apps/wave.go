package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Wave is the concurrent wave equation (SPEC §7): a vibrating string with
// fixed ends is split in 1-D blocks of consecutive points; every time step
// each rank sends its first point to its left neighbour and its last point
// to its right neighbour, receives theirs, and advances its points
// (u' = 2u - u_old + tau (u_left - 2u + u_right), tau = 0.09); at the end
// the master (rank 0) collects the whole string with Gather.
// Communication-intensive: one latency-bound neighbour exchange per step.
//
// The problem, as DAS-3 ran it. The string has "points" points (default
// 2,269,000) and a point update costs "point_ns" reference-processor
// nanoseconds (default 5: a few flops on data in cache on a processor of
// 2007); every step each rank computes its block of points and exchanges
// one 8-byte boundary value with each neighbour, as the program does. A
// real string of "real_points" points (default 4096, initial shape
// sin(2 pi x)) is advanced alongside and gathered at the end: Value is
// sum_i (i+1) u_i of it, computed by the master and broadcast, bitwise the
// same for every rank count.
//
// Derivation of the defaults from DAS-3's two measured points (SPEC §7:
// fixed requests of 32 nodes, equal components, Myri-10G, Delft excluded:
// about 200 s on one cluster, about 750 s on Vrije, Amsterdam, MultimediaN
// and Leiden). In a 1-D chain where every step waits for both neighbours,
// the whole chain settles at the period of its slowest boundary: a step
// takes c + L, c the rank's computation and L the largest one-way latency
// between neighbouring ranks. One cluster: L = 0.03 ms; the four clusters in
// the study's order (Vrije, Amsterdam, MultimediaN, Leiden, 8 nodes each):
// the boundaries are 0.4, 0.03 and 0.6 ms, so L = 0.6 ms. Then
// S (c + 0.03 ms) = 200 s and S (c + 0.6 ms) = 750 s give S = 550 s / 0.57
// ms = 964,912 steps and c = 200 s / S - 0.03 ms = 0.1773 ms per step on a
// node of 2 reference processors, i.e. 11.35 ms of reference-processor time
// per step for the whole string: 2,269,000 points of 5 ns. (At the
// clusters' own speeds, 0.857-1.0, a run is up to 17 % slower; SPEC §1.)
// The 8-byte messages are latency-bound: the byte rate is negligible.
//
// Demand on the host: on 32 nodes a job sends 62 messages per 0.207 ms
// step, about 300,000 messages per second at dilation 1; `dilation: auto`
// slows time until the host carries that (package fidelity).
//
// Time scale: "steps" (default 964,912) is divided by the time scale. The
// final gather and checksum broadcast happen once: a few wide-area
// latencies, about 2 ms on four Myri-10G clusters, which a time scale k
// would make k times longer in scenario time (measured before the credit:
// 771.0 s at time scale 7,095 against 760.1 s at 1,774; docs/fidelity.md,
// "Cells side by side"). Their ideal cost over the job's links comes off
// the steps' computation instead (Params.Credit), so they cost their own
// time once.
type Wave struct{}

// Name implements App.
func (Wave) Name() string { return "wave" }

// Args implements ArgApp.
func (Wave) Args() map[string]float64 {
	return map[string]float64{"points": 2269000, "point_ns": 5, "real_points": 4096, "steps": 964912}
}

// Nominal implements App.
func (w Wave) Nominal(nodes int) time.Duration {
	d, _ := w.NominalArgs(nodes, nil)
	return d
}

// stepWork is the reference-processor time of one step of the whole string.
func (Wave) stepWork(a map[string]float64) time.Duration {
	return time.Duration(a["points"] * a["point_ns"])
}

// NominalArgs implements ArgApp.
func (w Wave) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	a, err := resolve(w.Name(), w.Args(), args)
	if err != nil {
		return 0, err
	}
	n := max(nodes, 1)
	step := w.stepWork(a) / time.Duration(n*NodeProcessors)
	if n > 1 {
		step += RefLatency + xfer(16)
	}
	// The final gather: every rank sends its block of the real string.
	gather := time.Duration(0)
	if n > 1 {
		gather = RefLatency + xfer(8*a["real_points"])
	}
	return time.Duration(a["steps"])*step + gather, nil
}

// Traffic implements Traffic: per step every rank sends one 8-byte value to
// each neighbour.
func (w Wave) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	a, err := resolve(w.Name(), w.Args(), args)
	if err != nil {
		return Traffic{}, err
	}
	n := max(nodes, 1)
	step := w.stepWork(a)/time.Duration(n*NodeProcessors) + RefLatency
	msgs := float64(2 * (n - 1))
	var rounds float64
	if n > 1 {
		rounds = 1
	}
	return Traffic{Iteration: step, Msgs: msgs, Bytes: 8 * msgs, Iterations: a["steps"], Burst: msgs, Rounds: rounds, CritBytes: 16 * rounds}, nil
}

// Peers implements Peered: the neighbours on the line, and the final
// gather to rank 0 and broadcast from it.
func (Wave) Peers(n, r int, _ map[string]float64) ([]int, error) {
	line := []int{r - 1}
	if r+1 < n {
		line = append(line, r+1)
	}
	return comm.PeerSet(r, line, comm.GatherPeers(n, r, 0), comm.BcastPeers(n, r, 0)), nil
}

// Run implements App.
func (w Wave) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	a, err := resolve(w.Name(), w.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(w.Name(), a, "points", "point_ns", "real_points", "steps"); err != nil {
		return Result{}, err
	}
	n, r := c.Size(), c.Rank()
	P := int(a["real_points"])
	if P < n || P < 3 {
		return Result{}, fmt.Errorf("wave: %d real points for %d ranks", P, n)
	}
	if a["points"] < float64(n) {
		return Result{}, fmt.Errorf("wave: %g points for %d ranks", a["points"], n)
	}
	steps := p.iterations(a["steps"])
	work := w.stepWork(a) / time.Duration(n)
	lo, hi := span(P, n, r)
	m := hi - lo
	// cur[1..m] are my points, cur[0] and cur[m+1] the neighbours'.
	cur := make([]float64, m+2)
	old := make([]float64, m+2)
	nxt := make([]float64, m+2)
	for i := 0; i < m; i++ {
		x := float64(lo+i) / float64(P-1)
		cur[i+1] = math.Sin(2 * math.Pi * x)
	}
	if lo == 0 {
		cur[1] = 0
	}
	if hi == P {
		cur[m] = 0
	}
	copy(old, cur)
	const tau = 0.09
	left, right := r-1, r+1
	var lbuf, rbuf [8]byte
	// The final gather and checksum broadcast happen once: their ideal
	// cost comes off the steps' computation, evenly (Params.Credit).
	credit := p.Credit(c, c.IdealGather(0, 8*((P+n-1)/n))+c.IdealBcast(0, 8), steps)
	for s := 0; s < steps; s++ {
		if left >= 0 {
			binary.LittleEndian.PutUint64(lbuf[:], math.Float64bits(cur[1]))
			if err := c.Send(ctx, left, 0, lbuf[:]); err != nil {
				return Result{}, fmt.Errorf("wave: step %d: %w", s, err)
			}
		}
		if right < n {
			binary.LittleEndian.PutUint64(rbuf[:], math.Float64bits(cur[m]))
			if err := c.Send(ctx, right, 1, rbuf[:]); err != nil {
				return Result{}, fmt.Errorf("wave: step %d: %w", s, err)
			}
		}
		if left >= 0 {
			b, err := c.Recv(ctx, left, 1)
			if err != nil {
				return Result{}, fmt.Errorf("wave: step %d: %w", s, err)
			}
			if len(b) != 8 {
				return Result{}, fmt.Errorf("wave: step %d: %d-byte boundary from rank %d", s, len(b), left)
			}
			cur[0] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		if right < n {
			b, err := c.Recv(ctx, right, 0)
			if err != nil {
				return Result{}, fmt.Errorf("wave: step %d: %w", s, err)
			}
			if len(b) != 8 {
				return Result{}, fmt.Errorf("wave: step %d: %d-byte boundary from rank %d", s, len(b), right)
			}
			cur[m+1] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		for i := 1; i <= m; i++ {
			g := lo + i - 1
			if g == 0 || g == P-1 {
				nxt[i] = 0 // fixed ends
				continue
			}
			nxt[i] = 2*cur[i] - old[i] + tau*(cur[i-1]-2*cur[i]+cur[i+1])
		}
		old, cur, nxt = cur, nxt, old
		if err := c.Compute(ctx, credit.Take(work)); err != nil {
			return Result{}, fmt.Errorf("wave: %w", err)
		}
	}
	block := make([]byte, 8*m)
	for i := 0; i < m; i++ {
		binary.LittleEndian.PutUint64(block[8*i:], math.Float64bits(cur[i+1]))
	}
	all, err := c.Gather(ctx, 0, block)
	if err != nil {
		return Result{}, fmt.Errorf("wave: collecting the string: %w", err)
	}
	var sum [8]byte
	if r == 0 {
		s, g := 0.0, 0
		for j, b := range all {
			jlo, jhi := span(P, n, j)
			if len(b) != 8*(jhi-jlo) {
				return Result{}, fmt.Errorf("wave: rank %d sent %d bytes of string, want %d", j, len(b), 8*(jhi-jlo))
			}
			for i := 0; i < len(b); i += 8 {
				g++
				s += float64(g) * math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			}
		}
		binary.LittleEndian.PutUint64(sum[:], math.Float64bits(s))
	}
	got, err := c.Bcast(ctx, 0, sum[:])
	if err != nil {
		return Result{}, fmt.Errorf("wave: checksum: %w", err)
	}
	return Result{Iterations: steps, Value: math.Float64frombits(binary.LittleEndian.Uint64(got))}, nil
}
