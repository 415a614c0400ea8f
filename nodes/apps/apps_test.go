package apps

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/comm"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ranks(n int, clusters ...string) []RankSpec {
	rs := make([]RankSpec, n)
	for i := range rs {
		rs[i] = RankSpec{Cluster: "a", Speed: 1}
		if len(clusters) > 0 {
			rs[i].Cluster = clusters[i*len(clusters)/n]
		}
	}
	return rs
}

func run(t *testing.T, name string, n int, p Params) Result {
	t.Helper()
	app, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := RunLocal(ctxT(t), app, ranks(n), nil, p)
	if err != nil {
		t.Fatalf("%s on %d ranks: %v", name, n, err)
	}
	return res
}

func TestRegistry(t *testing.T) {
	for _, name := range Names() {
		app, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if app.Name() != name {
			t.Errorf("Lookup(%q).Name() = %q", name, app.Name())
		}
		for _, n := range []int{1, 8, 16, 32, 64} {
			if d := app.Nominal(n); d <= 0 {
				t.Errorf("%s.Nominal(%d) = %v", name, n, d)
			}
		}
		if _, err := NominalArgs(app, 32, map[string]float64{"no_such_arg": 1}); err == nil || !strings.Contains(err.Error(), "no_such_arg") {
			t.Errorf("%s: unknown argument not rejected: %v", name, err)
		}
	}
	if _, err := Lookup("linpack"); err == nil {
		t.Error("unknown application found")
	}
}

func TestNominalCalibration(t *testing.T) {
	within := func(name string, got, want time.Duration, tol float64) {
		t.Helper()
		if math.Abs(got.Seconds()-want.Seconds()) > tol*want.Seconds() {
			t.Errorf("%s = %v, want %v +-%.0f%%", name, got, want, 100*tol)
		}
	}
	within("wave(32)", Wave{}.Nominal(32), 200*time.Second, 0.02) // SPEC §7
	within("ccr(32)", CCR{}.Nominal(32), 180*time.Second, 0.01)   // SPEC §7
	d, err := CCR{}.NominalArgs(16, map[string]float64{"ccr": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	within("ccr(16, ccr 0.5)", d, 180*time.Second, 0.01)
	within("prime(32)", Prime{}.Nominal(32), 120*time.Second, 0.01)
	within("poisson(32)", Poisson{}.Nominal(32), 180*time.Second, 0.02)
	// SPEC §7: 10^6 calls, 64 processes of 10 KB: the ring on one cluster,
	// 31 x (0.03 ms + 20 KB / 560 MB/s).
	ring := 1e6 * 31 * (30e-6 + 20480/560e6)
	within("allgather(32)", Allgather{}.Nominal(32), time.Duration(ring*float64(time.Second)), 0.01)
	// Strong scaling: fewer nodes take longer.
	for _, name := range []string{"prime", "poisson", "wave"} {
		app, _ := Lookup(name)
		if !(app.Nominal(8) > app.Nominal(16) && app.Nominal(16) > app.Nominal(32)) {
			t.Errorf("%s does not scale: %v %v %v", name, app.Nominal(8), app.Nominal(16), app.Nominal(32))
		}
	}
}

func TestPrimeCountsPrimes(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		res := run(t, "prime", n, Params{Args: map[string]float64{"limit": 10000, "work_s": 0.02, "chunks": 7}})
		if res.Value != 1229 {
			t.Errorf("%d ranks: pi(10^4) = %v, want 1229", n, res.Value)
		}
		if res.Iterations != 7 {
			t.Errorf("%d ranks: %d chunks, want 7", n, res.Iterations)
		}
	}
}

// refPoisson is a serial red-black Gauss-Seidel with the same update order.
func refPoisson(N, iters int) float64 {
	s := N + 2
	u := make([]float64, s*s)
	h := 1.0 / float64(N+1)
	for it := 0; it < iters; it++ {
		for colour := 0; colour < 2; colour++ {
			for j := 0; j < N; j++ {
				for i := 0; i < N; i++ {
					if (i+j)%2 != colour {
						continue
					}
					k := (j+1)*s + i + 1
					u[k] = 0.25 * (u[k-1] + u[k+1] + u[k-s] + u[k+s] + h*h)
				}
			}
		}
	}
	sum := 0.0
	for j := 0; j < N; j++ {
		for i := 0; i < N; i++ {
			sum += u[(j+1)*s+i+1]
		}
	}
	return sum
}

func TestPoissonChecksumIndependentOfRanks(t *testing.T) {
	args := map[string]float64{"real": 18, "iters": 25, "point_ns": 0.005, "grid": 64}
	want := refPoisson(18, 25)
	for _, n := range []int{1, 2, 4, 6} {
		res := run(t, "poisson", n, Params{Args: args})
		if math.Abs(res.Value-want) > 1e-12*math.Abs(want) {
			t.Errorf("%d ranks: checksum %.17g, serial reference %.17g", n, res.Value, want)
		}
		if res.Iterations != 25 {
			t.Errorf("%d ranks: %d iterations", n, res.Iterations)
		}
	}
}

// refWave is a serial wave with the same update.
func refWave(P, steps int) float64 {
	cur := make([]float64, P)
	for i := range cur {
		cur[i] = math.Sin(2 * math.Pi * (float64(i) / float64(P-1)))
	}
	cur[0], cur[P-1] = 0, 0
	old := append([]float64(nil), cur...)
	nxt := make([]float64, P)
	for s := 0; s < steps; s++ {
		for i := 1; i < P-1; i++ {
			nxt[i] = 2*cur[i] - old[i] + 0.09*(cur[i-1]-2*cur[i]+cur[i+1])
		}
		old, cur, nxt = cur, nxt, old
	}
	sum := 0.0
	for i, v := range cur {
		sum += float64(i+1) * v
	}
	return sum
}

func TestWaveChecksumIndependentOfRanks(t *testing.T) {
	args := map[string]float64{"real_points": 50, "points": 1000, "point_ns": 10, "steps": 40}
	want := refWave(50, 40)
	for _, n := range []int{1, 2, 4, 7} {
		res := run(t, "wave", n, Params{Args: args})
		if math.Float64bits(res.Value) != math.Float64bits(want) {
			t.Errorf("%d ranks: checksum %.17g, serial reference %.17g", n, res.Value, want)
		}
	}
}

func TestAllgatherVerifiesEveryBlock(t *testing.T) {
	for _, alg := range []float64{0, 1, 2} {
		for _, n := range []int{1, 3, 5} {
			res := run(t, "allgather", n, Params{Args: map[string]float64{"iters": 6, "compute_ms": 0.01, "msg_bytes": 100, "algorithm": alg}})
			if res.Value != float64(6*n) {
				t.Errorf("algorithm %v, %d ranks: verified %v blocks, want %d", alg, n, res.Value, 6*n)
			}
		}
	}
}

func TestCCRExchangesAndScalesIterations(t *testing.T) {
	// 50 iterations of 1 ms at CCR 1: 0.5 ms compute, ~140 KB messages.
	args := map[string]float64{"total_s": 0.05, "iters": 50}
	for _, n := range []int{2, 3} {
		res := run(t, "ccr", n, Params{Args: args})
		if res.Value != 100 || res.Iterations != 50 {
			t.Errorf("%d ranks: %d iterations, %v messages verified, want 50 and 100", n, res.Iterations, res.Value)
		}
	}
	res := run(t, "ccr", 2, Params{Args: args, TimeScale: 10})
	if res.Iterations != 5 {
		t.Errorf("time scale 10: %d iterations, want 5", res.Iterations)
	}
}

func TestTimeScaleReducesIterations(t *testing.T) {
	cases := []struct {
		app  string
		args map[string]float64
		base int
	}{
		{"wave", map[string]float64{"real_points": 20, "points": 100, "point_ns": 10, "steps": 200}, 200},
		{"poisson", map[string]float64{"real": 8, "iters": 100, "point_ns": 8, "grid": 16}, 100},
		{"allgather", map[string]float64{"iters": 100, "compute_ms": 0.001, "msg_bytes": 16}, 100},
		{"prime", map[string]float64{"limit": 100, "work_s": 0.001, "chunks": 100}, 100},
	}
	for _, tc := range cases {
		for _, k := range []float64{1, 8, 1e6} {
			res := run(t, tc.app, 2, Params{TimeScale: k, Args: tc.args})
			want := max(1, int(math.Round(float64(tc.base)/k)))
			if res.Iterations != want {
				t.Errorf("%s at time scale %v: %d iterations, want %d", tc.app, k, res.Iterations, want)
			}
		}
	}
}

func TestPrimeWorkShrinksWithTimeScale(t *testing.T) {
	var total time.Duration
	sleep := func(ctx context.Context, d time.Duration) error {
		total += d // one rank: no race
		return nil
	}
	app := Prime{}
	p := Params{TimeScale: 4, Args: map[string]float64{"limit": 100, "work_s": 8, "chunks": 4}}
	if _, _, err := RunLocal(ctxT(t), app, ranks(1), nil, p, WithSleep(sleep)); err != nil {
		t.Fatal(err)
	}
	// 8 s of work / time scale 4 on one node of 2 processors: 1 s.
	if total < 990*time.Millisecond || total > time.Second {
		t.Errorf("emulated compute %v, want 1 s", total)
	}
}

func TestArgumentsAreValidated(t *testing.T) {
	app, _ := Lookup("wave")
	_, _, err := RunLocal(ctxT(t), app, ranks(2), nil, Params{Args: map[string]float64{"step": 3}})
	if err == nil || !strings.Contains(err.Error(), "step") {
		t.Fatalf("misspelt argument: %v", err)
	}
	_, _, err = RunLocal(ctxT(t), app, ranks(4), nil, Params{Args: map[string]float64{"points": 3}})
	if err == nil {
		t.Fatal("3 points on 4 ranks accepted")
	}
}

type failing struct{ at int }

func (failing) Name() string              { return "failing" }
func (failing) Nominal(int) time.Duration { return time.Second }
func (f failing) Run(ctx context.Context, c *comm.Comm, _ Params) (Result, error) {
	if c.Rank() == f.at {
		return Result{}, errors.New("disk full")
	}
	// The others wait for a message that never comes.
	_, err := c.Recv(ctx, f.at, 0)
	return Result{}, err
}

func TestRankFailureFailsTheJob(t *testing.T) {
	_, _, err := RunLocal(ctxT(t), failing{at: 2}, ranks(4), nil, Params{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("job with a failing rank: %v", err)
	}
}

func TestRunThroughUserspaceShaper(t *testing.T) {
	m, err := netem.Preset("das3", []string{netem.Vrije, netem.Leiden})
	if err != nil {
		t.Fatal(err)
	}
	rs := ranks(4, netem.Vrije, netem.Leiden)
	eg, err := UserspaceEgress(m, rs, 1)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]float64{"real_points": 50, "points": 1000, "point_ns": 10, "steps": 40}
	_, res, err := RunLocal(ctxT(t), Wave{}, rs, eg, Params{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if want := refWave(50, 40); res.Value != want {
		t.Errorf("checksum through the shaper %v, want %v", res.Value, want)
	}
	if _, err := UserspaceEgress(m, ranks(2, "atlantis"), 1); err == nil {
		t.Error("egress for an unknown cluster built")
	}
}

// An application that names its peers names them all and symmetrically:
// run with its connections opened first (RunLocal does), no rank opens a
// connection during the run, each rank holds one per peer it named, and
// every rank it names names it.
func TestPeersCoverEveryExchange(t *testing.T) {
	cases := []struct {
		app  string
		args map[string]float64
		k    float64 // time scale (0: 1)
	}{
		{"prime", map[string]float64{"limit": 100, "work_s": 0.001, "chunks": 2}, 0},
		{"wave", map[string]float64{"real_points": 40, "points": 100, "point_ns": 10, "steps": 3}, 0},
		{"poisson", map[string]float64{"real": 16, "iters": 3, "point_ns": 8, "grid": 16}, 0},
		{"allgather", map[string]float64{"iters": 2, "compute_ms": 0.001, "msg_bytes": 16, "algorithm": 0}, 0},
		{"allgather", map[string]float64{"iters": 2, "compute_ms": 0.001, "msg_bytes": 16, "algorithm": 1}, 0},
		{"allgather", map[string]float64{"iters": 2, "compute_ms": 0.001, "msg_bytes": 16, "algorithm": 2}, 0},
		{"allgather", map[string]float64{"iters": 2, "compute_ms": 0.001, "msg_bytes": 40000, "algorithm": 2}, 0},
		{"ccr", map[string]float64{"total_s": 0.01, "iters": 3}, 0},
		// 3 iterations of a few milliseconds each, and the final checksum.
		{"ft", map[string]float64{"iterations": 30000, "data_mb": 0.01, "exchange_kb": 1}, 10000},
		{"nbody", map[string]float64{"iterations": 150000, "data_mb": 0.01, "halo_kb": 1}, 50000},
	}
	for _, tc := range cases {
		app, err := Lookup(tc.app)
		if err != nil {
			t.Fatal(err)
		}
		pa, ok := app.(Peered)
		if !ok {
			t.Fatalf("%s does not name its peers", tc.app)
		}
		for _, n := range []int{2, 3, 6, 8, 13} {
			peers := make([][]int, n)
			for r := range n {
				if peers[r], err = pa.Peers(n, r, tc.args); err != nil {
					t.Fatalf("%s %v: %v", tc.app, tc.args, err)
				}
			}
			for r := range n {
				for _, p := range peers[r] {
					if p < 0 || p >= n || p == r || !slices.Contains(peers[p], r) {
						t.Errorf("%s %v, %d ranks: rank %d names %d, which does not name it", tc.app, tc.args, n, r, p)
					}
				}
			}
			rep, err := RunLocalReport(ctxT(t), app, ranks(n), nil, Params{Args: tc.args, TimeScale: tc.k})
			if err != nil {
				t.Fatalf("%s %v on %d ranks: %v", tc.app, tc.args, n, err)
			}
			for r, st := range rep.Stats {
				if st.Connections != int64(len(peers[r])) {
					t.Errorf("%s %v, %d ranks: rank %d held %d connections, named %d peers %v", tc.app, tc.args, n, r, st.Connections, len(peers[r]), peers[r])
				}
			}
		}
	}
}

// TestResolveKeepsDefaults: with no arguments resolve answers with the
// defaults map itself, so an override must never reach a later call's
// defaults, and unknown names are still refused.
func TestResolveKeepsDefaults(t *testing.T) {
	p := Poisson{}
	a, err := resolve(p.Name(), p.Args(), map[string]float64{"iters": 10})
	if err != nil || a["iters"] != 10 || a["grid"] != 4096 {
		t.Fatalf("with iters=10: %v, %v", a, err)
	}
	d, err := resolve(p.Name(), p.Args(), nil)
	if err != nil || d["iters"] != 61660 {
		t.Fatalf("defaults after an override: %v, %v", d, err)
	}
	if _, err := resolve(p.Name(), p.Args(), map[string]float64{"nope": 1}); err == nil {
		t.Fatal("unknown argument accepted")
	}
	long, _ := p.NominalArgs(32, nil)
	short, _ := p.NominalArgs(32, map[string]float64{"iters": 61660 / 2})
	if again, _ := p.NominalArgs(32, nil); again != long || short >= long {
		t.Fatalf("nominal %v, with half the iterations %v, again %v", long, short, again)
	}
}
