package apps

import (
	"context"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// NBody is the GADGET-2-like malleable n-body application (SPEC §4): it
// runs on any number of ranks and balances its load, the particles (a real
// array of "data_mb" MiB, default 16) being block-distributed in equal
// parts, re-balanced over the network at every resize. Every iteration
// (time step) each rank exchanges boundary particles ("halo_kb" KiB each
// way) with its two neighbours on the ring, computes, and the step's sums
// are reduced at the next safe point (GADGET-2's global time step). At the
// end every rank checks its block byte for byte; Value is a checksum of the
// whole array.
//
// Calibration: "iterations" at time scale 1 (default 2400, divided by the
// time scale); one iteration on n processors takes Exec(n)/iterations of
// the nbody profile (10 min on 2 processors, best 4 min on 32, slower up to
// 46), its messages included. Nominal(n) is Exec(n) on n
// single-processor nodes.
type NBody struct{}

// Name implements App.
func (NBody) Name() string { return "nbody" }

// Profile implements Malleable.
func (NBody) Profile() string { return "nbody" }

// Args implements ArgApp.
func (NBody) Args() map[string]float64 {
	return map[string]float64{"iterations": 2400, "data_mb": 16, "halo_kb": 4}
}

// Nominal implements App.
func (NBody) Nominal(nodes int) time.Duration { return profileNominal(mustProfile("nbody"), nodes) }

// NominalArgs implements ArgApp.
func (b NBody) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	if _, err := resolve(b.Name(), b.Args(), args); err != nil {
		return 0, err
	}
	return b.Nominal(nodes), nil
}

// Traffic implements TrafficApp for a job of nodes single-processor
// ranks that does not resize: every iteration each rank sends "halo_kb"
// KiB to each ring neighbour, one direction after the other (n messages at
// once: the burst), then joins the safe point's allreduce of three values.
// The iteration takes the profile's Exec(nodes)/iterations, its messages
// included, as RunMalleable does.
func (b NBody) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	a, err := resolve(b.Name(), b.Args(), args)
	if err != nil {
		return Traffic{}, err
	}
	n := max(nodes, 1)
	halo := a["halo_kb"] * 1024
	var msgs, rounds float64
	if n > 1 {
		msgs, rounds = float64(2*n), 2
	}
	return malleableTraffic(b.Nominal(n), a["iterations"], n, msgs, msgs*halo, msgs/2, rounds, rounds*halo), nil
}

// Peers implements Peered: the two ring neighbours and the safe point's
// allreduce.
func (NBody) Peers(n, r int, _ map[string]float64) ([]int, error) {
	var ring []int
	if n > 1 {
		ring = []int{(r + 1) % n, (r + n - 1) % n}
	}
	return comm.PeerSet(r, ring, comm.AllreducePeers(n, r)), nil
}

// Run implements App: a run without resizes.
func (b NBody) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	return b.RunMalleable(ctx, c, p, nil, nil)
}

// RunMalleable implements Malleable.
func (b NBody) RunMalleable(ctx context.Context, c *comm.Comm, p Params, ctl *Control, j *Joined) (Result, error) {
	a, err := resolve(b.Name(), b.Args(), p.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(b.Name(), a, "iterations", "data_mb", "halo_kb"); err != nil {
		return Result{}, err
	}
	k := &nbodyKernel{prof: mustProfile("nbody"), iters: a["iterations"], halo: int(a["halo_kb"] * 1024)}
	return runMalleable(ctx, b.Name(), k, c, p, ctl, j, a["iterations"], int64(a["data_mb"]*(1<<20)))
}

type nbodyKernel struct {
	prof  Profile
	iters float64
	halo  int
}

func (k *nbodyKernel) step(ctx context.Context, s *mstate) ([]float64, error) {
	c := s.c
	n, r := c.Size(), c.Rank()
	work := k.pace(n, c.Processors()) * time.Duration(c.Processors())
	if !s.exchanges() {
		return nil, s.compute(ctx, work)
	}
	var red float64
	if n > 1 {
		right, left := (r+1)%n, (r+n-1)%n
		got, err := c.Sendrecv(ctx, right, 21, chunk(s.data, s.iter, k.halo), left, 21)
		if err != nil {
			return nil, err
		}
		red += byteSum(got)
		c.Release(got)
		got, err = c.Sendrecv(ctx, left, 22, chunk(s.data, s.iter+1, k.halo), right, 22)
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

func (k *nbodyKernel) sized(*mstate, *Control) {}

func (k *nbodyKernel) pace(n, procs int) time.Duration {
	return iterWork(k.prof, n*procs, 1, k.iters)
}
