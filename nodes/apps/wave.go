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
// Real and emulated parts. The string really has "points" points (default
// 4096, initial shape sin(2 pi x)) and every step really exchanges its
// boundary values (8-byte messages). The computation of the string the
// program stands for is emulated: "step_work_ms" reference-processor ms per
// step in total (default 256: 4 ms per step on 32 nodes of 2 processors,
// 8 ms on 16, 16 ms on 8, 2 ms on 64: strong scaling). Value is
// sum_i (i+1) u_i of the gathered string, computed by the master and
// broadcast: bitwise the same for every rank count.
//
// Calibration: "steps" at time scale 1 (default 49600), divided by the time
// scale. Nominal(n) = steps x (step compute + 0.03 ms): 199.9 s on 32
// nodes (SPEC: about 200 s), 398 s on 16, 795 s on 8. On 32 nodes a job
// sends 64 messages per 4.03 ms step (about 16k messages/s; 64 nodes: 63k,
// which needs a time dilation of 4 or more). An inter-cluster boundary
// adds its latency to every step: 0.4 ms is +9% on 32 nodes, more than
// poisson (about +5%), less than allgather (about +15%).
type Wave struct{}

// Name implements App.
func (Wave) Name() string { return "wave" }

// Args implements ArgApp.
func (Wave) Args() map[string]float64 {
	return map[string]float64{"points": 4096, "steps": 49600, "step_work_ms": 256}
}

// Nominal implements App.
func (w Wave) Nominal(nodes int) time.Duration {
	d, _ := w.NominalArgs(nodes, nil)
	return d
}

// NominalArgs implements ArgApp.
func (w Wave) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	a, err := resolve(w.Name(), w.Args(), args)
	if err != nil {
		return 0, err
	}
	n := max(nodes, 1)
	step := ms(a["step_work_ms"] / float64(n*NodeProcessors))
	if n > 1 {
		step += RefLatency + xfer(16)
	}
	// The final gather: every rank sends its block to the master.
	gather := time.Duration(0)
	if n > 1 {
		gather = RefLatency + xfer(8*a["points"])
	}
	return time.Duration(a["steps"])*step + gather, nil
}

// Run implements App.
func (w Wave) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	a, err := resolve(w.Name(), w.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(w.Name(), a, "points", "steps"); err != nil {
		return Result{}, err
	}
	n, r := c.Size(), c.Rank()
	P := int(a["points"])
	if P < n || P < 3 {
		return Result{}, fmt.Errorf("wave: %d points for %d ranks", P, n)
	}
	steps := p.iterations(a["steps"])
	work := time.Duration(a["step_work_ms"] / float64(n) * float64(time.Millisecond))
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
		if err := c.Compute(ctx, work); err != nil {
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
