package apps

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Prime counts the primes up to a limit (SPEC §7): odd numbers are dealt
// cyclically to the ranks, each rank tests its numbers by trial division,
// and a single final reduction (an allreduce of the counts) gives the
// answer. Compute-bound: its execution time does not depend on the links.
//
// The real test covers the odd numbers up to Arg "limit" (default 10^4, so
// Value = pi(10^4) = 1229); the work is emulated: "work_s"
// reference-processor seconds in total (default 7680 = 120 s on 32 nodes
// of 2 processors), divided by the time scale and split evenly over the
// ranks, computed in "chunks" slices (default 120 at time scale 1, divided
// by the time scale) interleaved with the real tests.
//
// The real test is a witness that the ranks divided the numbers and that
// the reduction carries their counts, not the job's computation: it costs
// the host's CPU, undilated and the same at every time scale, so it must
// stay negligible beside the emulated work. Up to 10^4 it is about 0.1 M
// trial divisions per job (under a millisecond); up to 10^6, the default
// before, it was about 40 M per job (0.1-0.3 s of the host's CPU): 34 s
// of the 91 s of CPU that das3-coalloc's 315 prime jobs took at time scale
// 24,800 (docs/fidelity.md, "Execution traces").
//
// Nominal(n) = work_s / (2 n) + one allreduce: 120 s on 32 nodes, 240 s on
// 16, 480 s on 8.
type Prime struct{}

// Name implements App.
func (Prime) Name() string { return "prime" }

// Args implements ArgApp.
func (Prime) Args() map[string]float64 {
	return map[string]float64{"limit": 1e4, "work_s": 7680, "chunks": 120}
}

// Nominal implements App.
func (p Prime) Nominal(nodes int) time.Duration {
	d, _ := p.NominalArgs(nodes, nil)
	return d
}

// NominalArgs implements ArgApp.
func (p Prime) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	a, err := resolve(p.Name(), p.Args(), args)
	if err != nil {
		return 0, err
	}
	n := max(nodes, 1)
	compute := time.Duration(a["work_s"] / float64(n*NodeProcessors) * float64(time.Second))
	return compute + time.Duration(allreduceRounds(n))*(RefLatency+xfer(8)), nil
}

// Peers implements Peered: the final allreduce's partners.
func (Prime) Peers(n, r int, _ map[string]float64) ([]int, error) {
	return comm.AllreducePeers(n, r), nil
}

// Run implements App.
func (p Prime) Run(ctx context.Context, c *comm.Comm, pr Params) (Result, error) {
	a, err := resolve(p.Name(), p.Args(), pr.Args)
	if err != nil {
		return Result{}, err
	}
	if err := positive(p.Name(), a, "work_s", "chunks"); err != nil {
		return Result{}, err
	}
	n, r := c.Size(), c.Rank()
	limit := int64(a["limit"])
	chunks := pr.iterations(a["chunks"])
	work := time.Duration(a["work_s"] / pr.scale() / float64(n) * float64(time.Second))
	// My odd numbers are 3 + 2(r + k n), k = 0, 1, ...
	var odds int64
	if limit >= 3 {
		odds = (limit-3)/2 + 1
	}
	mine := int64(0)
	if int64(r) < odds {
		mine = (odds-int64(r)-1)/int64(n) + 1
	}
	count := 0.0
	if r == 0 && limit >= 2 {
		count = 1 // the prime 2
	}
	// The final reduction happens once: its ideal cost comes off the
	// computation, evenly (Params.Credit).
	credit := pr.Credit(c, c.IdealAllreduce(8), chunks)
	var k int64
	for i := 0; i < chunks; i++ {
		end := mine * int64(i+1) / int64(chunks)
		for ; k < end; k++ {
			if isOddPrime(3 + 2*(int64(r)+k*int64(n))) {
				count++
			}
			if k%yieldEvery == yieldEvery-1 {
				// However large a limit is asked for, a rank never holds
				// a processor for long: with limit 10^6 a rank did 10-18
				// ms of trial division in one slice and the shapers'
				// deliveries waited 37 ms behind 32 such ranks (an
				// execution trace of das3-smoke). Yielding lets every
				// goroutine already runnable go first.
				runtime.Gosched()
			}
		}
		if err := c.Compute(ctx, credit.Take(work/time.Duration(chunks))); err != nil {
			return Result{}, fmt.Errorf("prime: %w", err)
		}
	}
	total, err := c.AllreduceFloat64(ctx, []float64{count}, comm.Sum)
	if err != nil {
		return Result{}, fmt.Errorf("prime: final reduction: %w", err)
	}
	return Result{Iterations: chunks, Value: total[0]}, nil
}

// Traffic implements TrafficApp: prime sends nothing until its final
// allreduce, so its rates are nil and it has no iteration count to keep
// (its time scale is free), but the allreduce's first round is every rank
// sending at once after the same computation: a burst of one message per
// rank, which the host must release within a small share of the latency
// (measured: at dilation 40, chosen by the lateness floor alone, those
// frames were 1,800 % late at p99 in the cluster-count study). That burst
// is the job's one exchange (Once).
func (Prime) Traffic(nodes int, _ map[string]float64) (Traffic, error) {
	return Traffic{Burst: float64(max(nodes, 1)), Once: true}, nil
}

// yieldEvery is how many numbers a rank tests between two yields of the
// processor: at most about 0.1 ms of trial division up to 10^6.
const yieldEvery = 256

func isOddPrime(m int64) bool {
	if m < 3 {
		return false
	}
	for d := int64(3); d*d <= m; d += 2 {
		if m%d == 0 {
			return false
		}
	}
	return true
}
