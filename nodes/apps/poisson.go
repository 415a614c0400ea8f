package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Poisson solves the 2-D Poisson equation -Δu = 1 on the unit square with
// u = 0 on the boundary by red-black Gauss-Seidel (SPEC §7). The grid is
// split in equal rectangles over a px x py process grid (as square as the
// rank count allows, px >= py; rank = y px + x). Every half-iteration (red,
// then black) a rank exchanges its edges with up to 4 neighbours and
// updates the points of one colour; every iteration ends with a
// convergence reduction (allreduce, max of the change).
//
// The problem, as stated. The grid has "grid" x "grid" points (default
// 4096): halo messages carry its edge lengths x 8 bytes (8 KB and 4 KB on
// 32 nodes), and a half-iteration updates the half of its points of one
// colour, each costing "point_ns" reference-processor nanoseconds (default
// 10): a 5-point red-black update is about 6 flops and streams its row and
// the neighbouring rows from memory, and a processor of 2007 with a few
// GB/s of memory bandwidth per core does one in roughly 5-15 ns. On 32
// nodes of 2 processors that is 4096^2 / 2 x 10 ns / 64 = 1.31 ms per
// half-iteration against 8 + 4 KB halos: on DAS-3's Myri-10G the halos
// cost about 5 % of the time, and a wide-area latency of 0.4-1 ms per
// exchange costs as much as the computation. A real grid of "real" x "real"
// points (default 64) is solved alongside with the same process grid; its
// edge values travel at the head of the halo messages and Value is the sum
// of its points after the run (the same, up to rounding of the final sum,
// for every rank count).
//
// Iterations: "iters" at time scale 1 (default 61,660), divided by the time
// scale, so that a 32-node job runs 180 s on one cluster (the paper gives
// no time for poisson; 180 s keeps it between prime and wave).
// Nominal(n) = iters x (2 (compute + latency + halo bytes / 560 MB/s) +
// allreduce rounds x latency): 180 s on 32 nodes, 345 s on 16, 680 s on 8.
// On 32 nodes a job sends 368 messages and 1.3 MB per 2.92 ms iteration
// (about 126,000 messages and 450 MB per second at dilation 1).
type Poisson struct{}

// Name implements App.
func (Poisson) Name() string { return "poisson" }

// Args implements ArgApp.
func (Poisson) Args() map[string]float64 {
	return map[string]float64{"grid": 4096, "real": 64, "iters": 61660, "point_ns": 10}
}

// Nominal implements App.
func (p Poisson) Nominal(nodes int) time.Duration {
	d, _ := p.NominalArgs(nodes, nil)
	return d
}

// NominalArgs implements ArgApp.
func (p Poisson) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	a, err := resolve(p.Name(), p.Args(), args)
	if err != nil {
		return 0, err
	}
	n := max(nodes, 1)
	px, py := procGrid(n)
	g := a["grid"]
	half := p.halfWork(a) / time.Duration(n*NodeProcessors)
	var halo time.Duration
	if n > 1 {
		// An interior rank sends its edges to up to 4 neighbours over one
		// egress bucket.
		bytes := 0.0
		if px > 1 {
			bytes += 2 * math.Ceil(g/float64(py)) * 8
		}
		if py > 1 {
			bytes += 2 * math.Ceil(g/float64(px)) * 8
		}
		halo = RefLatency + xfer(bytes)
	}
	red := time.Duration(allreduceRounds(n)) * (RefLatency + xfer(8))
	return time.Duration(a["iters"]) * (2*(half+halo) + red), nil
}

// halfWork is the reference-processor time of one half-iteration of the
// whole grid: half its points, point_ns each.
func (Poisson) halfWork(a map[string]float64) time.Duration {
	return time.Duration(a["grid"] * a["grid"] / 2 * a["point_ns"])
}

// Traffic implements TrafficApp: per iteration two halo exchanges with up
// to 4 neighbours and one allreduce.
func (p Poisson) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	a, err := resolve(p.Name(), p.Args(), args)
	if err != nil {
		return Traffic{}, err
	}
	n := max(nodes, 1)
	it, err := p.NominalArgs(n, args)
	if err != nil {
		return Traffic{}, err
	}
	px, py := procGrid(n)
	g := a["grid"]
	cols := float64(2 * (px - 1) * py) // messages to left/right neighbours
	rows := float64(2 * px * (py - 1)) // to down/up
	halo := cols*math.Ceil(g/float64(py))*8 + rows*math.Ceil(g/float64(px))*8
	red := float64(n * allreduceRounds(n))
	return Traffic{Iteration: it / time.Duration(a["iters"]), Msgs: 2*(cols+rows) + red, Bytes: 2*halo + 8*red,
		Iterations: a["iters"], Burst: cols + rows,
		// Two halo exchanges (a rank's edges leave one after the other) and
		// the allreduce's rounds.
		Rounds: 2 + float64(allreduceRounds(n)), CritBytes: 2 * edgeBytes(n, g)}, nil
}

// edgeBytes is what an interior rank sends per halo exchange.
func edgeBytes(n int, g float64) float64 {
	px, py := procGrid(n)
	b := 0.0
	if px > 1 {
		b += 2 * math.Ceil(g/float64(py)) * 8
	}
	if py > 1 {
		b += 2 * math.Ceil(g/float64(px)) * 8
	}
	return b
}

// procGrid factors n into px x py, px >= py, as square as possible.
func procGrid(n int) (px, py int) {
	py = 1
	for d := 1; d*d <= n; d++ {
		if n%d == 0 {
			py = d
		}
	}
	return n / py, py
}

// span returns the part [lo, hi) of 0..total owned by index i of parts.
func span(total, parts, i int) (lo, hi int) {
	return total * i / parts, total * (i + 1) / parts
}

// Peers implements Peered: the neighbours on the process grid and the
// allreduce's partners.
func (Poisson) Peers(n, r int, _ map[string]float64) ([]int, error) {
	px, py := procGrid(n)
	x, y := r%px, r/px
	var grid []int
	for _, nb := range []struct {
		ok   bool
		rank int
	}{{x > 0, r - 1}, {x < px-1, r + 1}, {y > 0, r - px}, {y < py-1, r + px}} {
		if nb.ok {
			grid = append(grid, nb.rank)
		}
	}
	return comm.PeerSet(r, grid, comm.AllreducePeers(n, r)), nil
}

// Run implements App.
func (p Poisson) Run(ctx context.Context, c *comm.Comm, pr Params) (Result, error) {
	a, err := resolve(p.Name(), p.Args(), pr.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(p.Name(), a, "grid", "real", "iters", "point_ns"); err != nil {
		return Result{}, err
	}
	n, r := c.Size(), c.Rank()
	px, py := procGrid(n)
	N := int(a["real"])
	G := int(a["grid"])
	if N < px || N < py {
		return Result{}, fmt.Errorf("poisson: real grid %d too small for a %dx%d process grid", N, px, py)
	}
	x, y := r%px, r/px
	x0, x1 := span(N, px, x)
	y0, y1 := span(N, py, y)
	w, h := x1-x0, y1-y0
	// Halo message lengths: the emulated grid's edges, at least the real ones.
	colBytes := max(8*int(math.Ceil(float64(G)/float64(py))), 8*h) // to left/right
	rowBytes := max(8*int(math.Ceil(float64(G)/float64(px))), 8*w) // to down/up
	half := p.halfWork(a) / time.Duration(n)
	iters := pr.iterations(a["iters"])

	// Local real grid with a one-point halo: u[(j+1)*(w+2) + (i+1)].
	stride := w + 2
	u := make([]float64, stride*(h+2))
	at := func(i, j int) int { return (j+1)*stride + (i + 1) }
	hh := 1.0 / float64(N+1)
	f := hh * hh // h^2 x f with f = 1

	// A neighbour: my edge goes out with sendTag, its edge comes in with
	// recvTag (0 moves left, 1 right, 2 down, 3 up).
	type neighbour struct {
		rank             int
		out              []byte
		edge, ghost      func(k int) int // my k-th edge point, the k-th halo point
		count            int
		sendTag, recvTag int
	}
	var nbs []neighbour
	add := func(ok bool, rank, bytes, count, sendTag, recvTag int, edge, ghost func(int) int) {
		if ok {
			nbs = append(nbs, neighbour{rank: rank, out: make([]byte, bytes), edge: edge, ghost: ghost,
				count: count, sendTag: sendTag, recvTag: recvTag})
		}
	}
	add(x > 0, r-1, colBytes, h, 0, 1, func(k int) int { return at(0, k) }, func(k int) int { return at(-1, k) })
	add(x < px-1, r+1, colBytes, h, 1, 0, func(k int) int { return at(w-1, k) }, func(k int) int { return at(w, k) })
	add(y > 0, r-px, rowBytes, w, 2, 3, func(k int) int { return at(k, 0) }, func(k int) int { return at(k, -1) })
	add(y < py-1, r+px, rowBytes, w, 3, 2, func(k int) int { return at(k, h-1) }, func(k int) int { return at(k, h) })

	exchange := func() error {
		for i := range nbs {
			b := &nbs[i]
			for k := 0; k < b.count; k++ {
				binary.LittleEndian.PutUint64(b.out[8*k:], math.Float64bits(u[b.edge(k)]))
			}
			if err := c.Send(ctx, b.rank, b.sendTag, b.out); err != nil {
				return err
			}
		}
		for i := range nbs {
			b := &nbs[i]
			got, err := c.Recv(ctx, b.rank, b.recvTag)
			if err != nil {
				return err
			}
			if len(got) < 8*b.count {
				return fmt.Errorf("halo from rank %d: %d bytes, want >= %d", b.rank, len(got), 8*b.count)
			}
			for k := 0; k < b.count; k++ {
				u[b.ghost(k)] = math.Float64frombits(binary.LittleEndian.Uint64(got[8*k:]))
			}
			c.Release(got)
		}
		return nil
	}
	sweep := func(colour int) float64 {
		change := 0.0
		for j := 0; j < h; j++ {
			gj := y0 + j
			i0 := (colour + gj + x0) & 1 // first local i with (gi+gj)%2 == colour
			for i := i0; i < w; i += 2 {
				k := at(i, j)
				nu := 0.25 * (u[k-1] + u[k+1] + u[k-stride] + u[k+stride] + f)
				change = math.Max(change, math.Abs(nu-u[k]))
				u[k] = nu
			}
		}
		return change
	}
	// The checksum's reduction happens once: its ideal cost comes off the
	// half-iterations' computation, evenly (Params.Credit).
	credit := pr.Credit(c, c.IdealAllreduce(8), 2*iters)
	for it := 0; it < iters; it++ {
		change := 0.0
		for colour := 0; colour < 2; colour++ {
			if err := exchange(); err != nil {
				return Result{}, fmt.Errorf("poisson: iteration %d: halo exchange: %w", it, err)
			}
			change = math.Max(change, sweep(colour))
			if err := c.Compute(ctx, credit.Take(half)); err != nil {
				return Result{}, fmt.Errorf("poisson: %w", err)
			}
		}
		// The iteration count is fixed (so runs are comparable); the
		// reduction is the convergence test a real solver makes.
		if _, err := c.AllreduceFloat64(ctx, []float64{change}, comm.Max); err != nil {
			return Result{}, fmt.Errorf("poisson: iteration %d: convergence reduction: %w", it, err)
		}
	}
	local := 0.0
	for j := 0; j < h; j++ {
		for i := 0; i < w; i++ {
			local += u[at(i, j)]
		}
	}
	sum, err := c.AllreduceFloat64(ctx, []float64{local}, comm.Sum)
	if err != nil {
		return Result{}, fmt.Errorf("poisson: checksum: %w", err)
	}
	return Result{Iterations: iters, Value: sum[0]}, nil
}
