package apps

import (
	"context"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// FT is the NAS FT-like malleable application (SPEC §4): a 3-D FFT solver
// that runs only on a power-of-two number of processors. On n ranks it
// computes on the largest power of two p <= n; the other n-p ranks idle,
// and rank 0 asks once (Control, AppRelease) to give them back voluntarily.
// Every iteration the p ranks exchange a slice of their data with their
// partners along the hypercube (log2 p rounds of "exchange_kb" KiB each, the
// transposes of the distributed FFT) and compute; the iteration's checksum
// is reduced at the next safe point.
//
// The data is a real array of "data_mb" MiB (default 8) block-distributed
// over the ranks; a resize moves it over the network (comm.Resize), and at
// the end every rank checks its block byte for byte. Value is a checksum of
// the whole array (independent of the ranks and resizes).
//
// Calibration: "iterations" at time scale 1 (default 600, divided by the
// time scale); one iteration on p processors takes Exec(p)/iterations of
// the ft profile (2 min on 2 processors, best 1 min on 16, slower on 32),
// its messages included. Nominal(n) is the profile's Exec(n)
// on n single-processor nodes.
type FT struct{}

// Name implements App.
func (FT) Name() string { return "ft" }

// Profile implements Malleable.
func (FT) Profile() string { return "ft" }

// Args implements ArgApp.
func (FT) Args() map[string]float64 {
	return map[string]float64{"iterations": 600, "data_mb": 8, "exchange_kb": 8}
}

// Nominal implements App.
func (FT) Nominal(nodes int) time.Duration { return profileNominal(mustProfile("ft"), nodes) }

// NominalArgs implements ArgApp.
func (f FT) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	if _, err := resolve(f.Name(), f.Args(), args); err != nil {
		return 0, err
	}
	return f.Nominal(nodes), nil
}

// Traffic implements TrafficApp for a job of nodes single-processor
// ranks that does not resize: every iteration the largest power of two p
// of them exchange log2 p slices of "exchange_kb" KiB with their hypercube
// partners (p messages at once in each round: the burst), then every rank
// joins the safe point's allreduce of three values (the resize flags and
// the checksum). The iteration takes the profile's Exec(nodes)/iterations,
// its messages included, as RunMalleable does.
func (f FT) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	a, err := resolve(f.Name(), f.Args(), args)
	if err != nil {
		return Traffic{}, err
	}
	n := max(nodes, 1)
	p := floorPow2(n)
	rounds := float64(log2ceil(p))
	xchg := a["exchange_kb"] * 1024
	return malleableTraffic(f.Nominal(n), a["iterations"], n, float64(p)*rounds, float64(p)*rounds*xchg, float64(p), rounds, rounds*xchg), nil
}

// Peers implements Peered: the hypercube partners of the computing ranks
// (the largest power of two of them) and the safe point's allreduce.
func (FT) Peers(n, r int, _ map[string]float64) ([]int, error) {
	var cube []int
	if p := floorPow2(n); r < p {
		for mask := 1; mask < p; mask <<= 1 {
			cube = append(cube, r^mask)
		}
	}
	return comm.PeerSet(r, cube, comm.AllreducePeers(n, r)), nil
}

// Run implements App: a run without resizes.
func (f FT) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	return f.RunMalleable(ctx, c, p, nil, nil)
}

// RunMalleable implements Malleable.
func (f FT) RunMalleable(ctx context.Context, c *comm.Comm, p Params, ctl *Control, j *Joined) (Result, error) {
	a, err := resolve(f.Name(), f.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(f.Name(), a, "iterations", "data_mb", "exchange_kb"); err != nil {
		return Result{}, err
	}
	k := &ftKernel{prof: mustProfile("ft"), iters: a["iterations"], xchg: int(a["exchange_kb"] * 1024), asked: map[int]bool{}}
	return runMalleable(ctx, f.Name(), k, c, p, ctl, j, a["iterations"], int64(a["data_mb"]*(1<<20)))
}

type ftKernel struct {
	prof  Profile
	iters float64
	xchg  int
	asked map[int]bool
}

func (k *ftKernel) step(ctx context.Context, s *mstate) ([]float64, error) {
	c := s.c
	n, r := c.Size(), c.Rank()
	active := floorPow2(n)
	if r >= active { // idle until released
		if !s.exchanges() {
			return nil, nil
		}
		return []float64{0}, nil
	}
	work := k.pace(n, c.Processors()) * time.Duration(c.Processors())
	if !s.exchanges() {
		return nil, s.compute(ctx, work)
	}
	var red float64
	for mask := 1; mask < active; mask <<= 1 {
		got, err := c.Sendrecv(ctx, r^mask, 20, chunk(s.data, s.iter+mask, k.xchg), r^mask, 20)
		if err != nil {
			return nil, err
		}
		red += byteSum(got)
		c.Release(got)
	}
	if err := s.compute(ctx, work); err != nil {
		return nil, err
	}
	return []float64{red}, nil
}

func (k *ftKernel) pace(n, procs int) time.Duration {
	return iterWork(k.prof, floorPow2(n)*procs, 1, k.iters)
}

// sized asks to release the ranks above the largest power of two, once per
// size.
func (k *ftKernel) sized(s *mstate, ctl *Control) {
	n := s.c.Size()
	if p := floorPow2(n); p != n && s.c.Rank() == 0 && !k.asked[n] {
		k.asked[n] = true
		ctl.release(n - p)
	}
}
