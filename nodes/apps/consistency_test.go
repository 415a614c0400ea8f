package apps

import (
	"math"
	"testing"
	"time"
)

// Each application's computation and messages describe the problem the
// papers state; these tests pin the figures their doc comments derive.

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %g, want %g within %.1f%%", what, got, want, 100*tol)
	}
}

// Wave reproduces DAS-3's two measured points: about 200 s on one cluster
// and about 750 s when the slowest boundary of the chain is 0.6 ms.
func TestWaveReproducesDAS3(t *testing.T) {
	w := Wave{}
	a := w.Args()
	tr, err := w.Traffic(32, nil)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "one cluster (s)", tr.Iterations*tr.Iteration.Seconds(), 200, 0.01)
	compute := tr.Iteration - RefLatency
	four := tr.Iterations * (compute + 600*time.Microsecond).Seconds()
	near(t, "four clusters (s)", four, 750, 0.01)
	// The computation is the string's: points x cost per point.
	near(t, "step work (ms)", float64(w.stepWork(a))/1e6, a["points"]*a["point_ns"]/1e6, 1e-9)
	near(t, "messages per step", tr.Msgs, 62, 0)
	near(t, "bytes per message", tr.Bytes/tr.Msgs, 8, 0)
}

// Allgather is SPEC §7's benchmark: 10^6 calls, 10 KB per process, 64
// processes on 32 nodes, no computation.
func TestAllgatherIsTheBenchmark(t *testing.T) {
	g := Allgather{}
	a := g.Args()
	if a["compute_ms"] != 0 || a["msg_bytes"] != 10240 || a["iters"] != 1e6 {
		t.Fatalf("defaults %v", a)
	}
	tr, err := g.Traffic(32, nil)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "bytes per call", tr.Bytes, 32*31*2*10240, 0)
	near(t, "messages per call (ring)", tr.Msgs, 32*31, 0)
}

// Poisson computes its stated grid at the stated cost per point and sends
// the grid's real edges.
func TestPoissonIsItsGrid(t *testing.T) {
	p := Poisson{}
	a := p.Args()
	half := p.halfWork(a)
	near(t, "half-iteration work (ms)", float64(half)/1e6, 4096*4096/2*10/1e6, 1e-9)
	tr, err := p.Traffic(32, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 8 x 4 process grid: 56 left/right halos of 1024 points, 48 up/down of
	// 512, twice per iteration, plus the allreduce's 32 x 5 messages.
	near(t, "halo bytes per iteration", tr.Bytes-8*32*5, 2*(56*1024*8+48*512*8), 0)
	near(t, "one cluster (s)", tr.Iterations*tr.Iteration.Seconds(), 180, 0.01)
}

// A resize moves data once: its volume shrinks with the time scale, so it
// costs the same scenario time at every time scale.
func TestResizeVolumeIsTimeScaleNeutral(t *testing.T) {
	const mb = 16 << 20
	for _, k := range []float64{1, 60, 240, 960} {
		near(t, "volume x time scale", float64(ScaledData(mb, k))*k, mb, 0.001)
	}
	if ScaledData(100, 1e9) != 64 {
		t.Error("the array must keep a few bytes")
	}
}

// On predicts the DAS-3 co-allocation points from the slowest link alone:
// wave on four clusters (0.6 ms) about 750 s, and allgather's ring paced by
// its slowest link.
func TestTrafficOnSlowerLinks(t *testing.T) {
	w, _ := Wave{}.Traffic(32, nil)
	near(t, "wave on 0.6 ms (s)", w.Iterations*w.On(600*time.Microsecond, 185e6).Seconds(), 750, 0.01)
	near(t, "wave on the reference (s)", w.Iterations*w.On(RefLatency, 0).Seconds(), 200, 0.01)
	g, _ := Allgather{}.Traffic(32, nil)
	perCall := 31 * (1e-3 + 20480/77e6) // Vrije-Leiden: 1 ms, 77 MB/s
	near(t, "allgather call on 1 ms, 77 MB/s (s)", g.On(time.Millisecond, 77e6).Seconds(), perCall, 0.01)
}

// prime's only messages are its final allreduce: no rates and no iteration
// count (nothing caps its time scale), but a burst of one message per rank.
func TestPrimeTrafficIsItsFinalBurst(t *testing.T) {
	tr, err := TrafficOf(Prime{}, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, b := tr.Rates(); m != 0 || b != 0 || tr.Iterations != 0 || tr.Burst != 32 {
		t.Fatalf("prime on 32 nodes: %+v (rates %g msgs/s, %g B/s)", tr, m, b)
	}
}

// Prime's real test is a witness, not its computation: at its default
// limit the trial divisions of a whole job stay a small, fixed quantity
// (they cost the host's CPU, undilated, at every time scale), and the
// witness still checks a count the ranks cannot agree on by accident.
func TestPrimeWitnessIsSmall(t *testing.T) {
	limit := int64(Prime{}.Args()["limit"])
	divisions := 0
	for m := int64(3); m <= limit; m += 2 {
		for d := int64(3); d*d <= m; d += 2 {
			divisions++
			if m%d == 0 {
				break
			}
		}
	}
	// About 0.1 M at 10^4; 10^6 was 40 M, 0.3 s of CPU per job.
	if divisions > 1_000_000 {
		t.Errorf("a job's witness makes %d trial divisions at limit %d, want at most 10^6", divisions, limit)
	}
	if limit < 1000 {
		t.Errorf("limit %d: too few primes for the reduction to witness anything", limit)
	}
}

// FT and n-body declare the traffic they send: their iterations add up to
// the profile's time, and their messages are the hypercube's and the
// ring's plus the safe point's allreduce.
func TestMalleableTrafficIsTheKernels(t *testing.T) {
	for _, tc := range []struct {
		app             App
		n               int
		msgs, burst     float64
		bytesPerIterKiB float64 // the kernel's own messages
	}{
		// 8 ranks, 3 hypercube rounds of 8 KiB; the allreduce: 8 x 3.
		{FT{}, 8, 8*3 + 8*3, 8, 8 * 3 * 8},
		// 6 ranks: 4 compute (2 rounds); the allreduce over all 6: 6 x 4.
		{FT{}, 6, 4*2 + 6*4, 4, 4 * 2 * 8},
		// 8 ranks, two 4 KiB halos each; the allreduce: 8 x 3.
		{NBody{}, 8, 2*8 + 8*3, 8, 2 * 8 * 4},
		{NBody{}, 1, 0, 0, 0},
	} {
		tr, err := tc.app.(TrafficApp).Traffic(tc.n, nil)
		if err != nil {
			t.Fatal(err)
		}
		name := tc.app.Name()
		near(t, name+" iterations x iteration (s)", tr.Iterations*tr.Iteration.Seconds(), tc.app.Nominal(tc.n).Seconds(), 1e-6)
		near(t, name+" messages per iteration", tr.Msgs, tc.msgs, 0)
		near(t, name+" burst", tr.Burst, tc.burst, 0)
		red := float64(tc.n * allreduceRounds(tc.n))
		near(t, name+" kernel bytes per iteration (KiB)", (tr.Bytes-24*red)/1024, tc.bytesPerIterKiB, 1e-9)
	}
}
