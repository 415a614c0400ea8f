package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// CCR is the synthetic application with a given communication-to-
// computation ratio (SPEC §7): "total_s" (default 180) seconds on one
// cluster, split into computation and communication by "ccr" (default
// 1.0: 90 s + 90 s; 0.5: 120 s + 60 s). Each of "iters" iterations
// (default 18000 at time scale 1, divided by the time scale: 10 ms each)
// computes for its share and then exchanges a message with both ring
// neighbours (rank +-1 mod n), sent concurrently. The message size is set
// so the exchange takes the communication share on one Myri-10G cluster:
// the node's egress carries 2 messages, so bytes = (share - 0.03 ms) x
// 560 MB/s / 2 (1.39 MB at CCR 1.0). Nominal is total_s for every job
// size of 2 nodes or more (a rank's exchange does not depend on n).
//
// Feasibility: the communication is bandwidth-bound by construction, so a
// 32-node job at CCR 1.0 moves 32 x 280 MB/s through the host: run it with
// a time dilation of about 30 or more (then about 300 MB/s). Value counts
// the messages verified.
type CCR struct{}

// Name implements App.
func (CCR) Name() string { return "ccr" }

// Args implements ArgApp.
func (CCR) Args() map[string]float64 {
	return map[string]float64{"ccr": 1, "total_s": 180, "iters": 18000}
}

// Nominal implements App.
func (x CCR) Nominal(nodes int) time.Duration {
	d, _ := x.NominalArgs(nodes, nil)
	return d
}

type ccrPlan struct {
	compute time.Duration // per iteration, on a node
	bytes   int           // per message
	iters   float64       // at time scale 1
}

func (x CCR) plan(args map[string]float64) (ccrPlan, error) {
	a, err := resolve(x.Name(), x.Args(), args)
	if err != nil {
		return ccrPlan{}, err
	}
	if err := positive(x.Name(), a, "total_s", "iters"); err != nil {
		return ccrPlan{}, err
	}
	if a["ccr"] < 0 {
		return ccrPlan{}, fmt.Errorf("apps: ccr: argument ccr must be >= 0 (got %v)", a["ccr"])
	}
	it := a["total_s"] / a["iters"] // seconds per iteration
	comp := it / (1 + a["ccr"])
	comm := it - comp
	b := 0
	if comm > RefLatency.Seconds() {
		b = int((comm - RefLatency.Seconds()) * RefBandwidth / 2)
	}
	return ccrPlan{
		compute: time.Duration(comp * float64(time.Second)),
		bytes:   max(b, 16),
		iters:   a["iters"],
	}, nil
}

// NominalArgs implements ArgApp.
func (x CCR) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	pl, err := x.plan(args)
	if err != nil {
		return 0, err
	}
	per := pl.compute
	if nodes > 1 {
		per += RefLatency + xfer(2*float64(pl.bytes))
	}
	return time.Duration(pl.iters) * per, nil
}

// Peers implements Peered: both neighbours on the ring.
func (CCR) Peers(n, r int, _ map[string]float64) ([]int, error) {
	return comm.AllgatherRingPeers(n, r), nil // the ring's neighbours
}

// Run implements App.
func (x CCR) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	pl, err := x.plan(p.Args)
	if err != nil {
		return Result{}, err
	}
	n, r := c.Size(), c.Rank()
	iters := p.iterations(pl.iters)
	work := pl.compute * NodeProcessors
	left, right := (r-1+n)%n, (r+1)%n
	out := make([]byte, pl.bytes)
	for i := range out {
		out[i] = byte(i)
	}
	verified := 0
	for it := 0; it < iters; it++ {
		if err := c.Compute(ctx, work); err != nil {
			return Result{}, fmt.Errorf("ccr: %w", err)
		}
		if n == 1 {
			continue
		}
		binary.LittleEndian.PutUint64(out[0:], uint64(r))
		binary.LittleEndian.PutUint64(out[8:], uint64(it))
		// Both messages leave at once: to different clusters they use
		// different egress links.
		wl := c.Isend(ctx, left, 0, out)
		wr := c.Isend(ctx, right, 1, out)
		errL, errR := wl(), wr()
		if errL != nil || errR != nil {
			return Result{}, fmt.Errorf("ccr: iteration %d: send: %w", it, firstErr(errL, errR))
		}
		for _, from := range []struct{ rank, tag int }{{right, 0}, {left, 1}} {
			b, err := c.Recv(ctx, from.rank, from.tag)
			if err != nil {
				return Result{}, fmt.Errorf("ccr: iteration %d: %w", it, err)
			}
			if len(b) != pl.bytes || binary.LittleEndian.Uint64(b[0:]) != uint64(from.rank) || binary.LittleEndian.Uint64(b[8:]) != uint64(it) {
				return Result{}, fmt.Errorf("ccr: iteration %d: message from rank %d is wrong", it, from.rank)
			}
			verified++
			c.Release(b)
		}
	}
	return Result{Iterations: iters, Value: float64(verified)}, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
