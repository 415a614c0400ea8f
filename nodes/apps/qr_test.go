package apps

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/comm"
	"github.com/koala-emu/koala-emu/nodes/qr"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// A small, fast QR: order 480 (8 panels of 60), a teraflop node.
var qrArgs = map[string]float64{"n": 480, "nb": 60, "mflops": 1e6, "seed": 7}

// The final matrix's checksum does not depend on the process count, and
// the seed changes it.
func TestQRChecksumIndependentOfRanks(t *testing.T) {
	want := run(t, "qr", 1, Params{Args: qrArgs}).Value
	if want == 0 {
		t.Fatal("checksum 0")
	}
	for _, n := range []int{2, 4, 6} {
		if got := run(t, "qr", n, Params{Args: qrArgs}); got.Value != want || got.Iterations != 8 {
			t.Errorf("%d ranks: checksum %v after %d phases, want %v after 8", n, got.Value, got.Iterations, want)
		}
	}
	other := map[string]float64{"n": 480, "nb": 60, "mflops": 1e6, "seed": 8}
	if got := run(t, "qr", 4, Params{Args: other}).Value; got == want {
		t.Error("another seed gives the same checksum")
	}
	if _, err := (QR{}).setup(map[string]float64{"n": 100.5}, 4); err == nil || !strings.Contains(err.Error(), "argument n must be an integer") {
		t.Errorf("a fractional order: %v", err)
	}
}

// The compute a rank asks for is its share of the model's flops at the
// node's rate, divided by the time scale; Nominal is the model's
// prediction.
func TestQRComputeFollowsTheModel(t *testing.T) {
	args := map[string]float64{"n": 480, "nb": 60, "mflops": 100}
	var mu sync.Mutex
	var total time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		total += d
		mu.Unlock()
		return nil
	}
	app := QR{}
	rep, err := RunLocalReport(ctxT(t), app, ranks(4), nil, Params{TimeScale: 4, Args: args}, WithSleep(sleep))
	if err != nil {
		t.Fatal(err)
	}
	m, rate, _ := QRModel(args, 4)
	var flops int64
	for _, ph := range m.Phases() {
		flops += ph.Flops
	}
	want := float64(flops) / rate / 4
	if got := total.Seconds(); math.Abs(got-want) > 1e-6*want {
		t.Errorf("compute asked %v s, want %v s (the model's flops at %v flop/s / 4)", got, want, rate)
	}
	if len(rep.Stats) != 4 {
		t.Fatalf("stats %v", rep.Stats)
	}
	nom, err := app.NominalArgs(4, args)
	if err != nil || nom < time.Duration(float64(flops)/4/rate*float64(time.Second)) {
		t.Errorf("nominal %v (%v), below the computation alone", nom, err)
	}
	if tr, err := app.Traffic(4, args); err != nil || tr.Iterations != 8 || tr.Bytes <= 0 || tr.Iteration <= 0 {
		t.Errorf("traffic %+v, %v", tr, err)
	}
}

// stopAt is an SRS runtime that stops after phase stop (-1: never),
// restarts from the blocks in from (keyed by rank) at phase resume, and
// keeps what it is told.
type stopAt struct {
	stop, resume int
	from         map[int][]byte

	mu     sync.Mutex
	cps    map[int]Checkpoint
	phases map[int]int
}

func (s *stopAt) Restart(_ context.Context, c *comm.Comm, layout srs.Distribution) (int, []byte, bool, error) {
	if s.from == nil {
		return 0, nil, false, nil
	}
	return s.resume, s.from[c.Rank()], true, nil
}

func (s *stopAt) Phase(k int, _ time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phases[k]++
	return k == s.stop
}

func (s *stopAt) Write(cp Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cps[cp.Rank] = cp
	return nil
}

// srsApp runs QR under a runtime.
type srsApp struct {
	QR
	rt SRS
}

func (a srsApp) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	return a.RunSRS(ctx, c, p, a.rt)
}

// mover is the job that moves a checkpoint: the old ranks send, the new
// ones receive.
type mover struct {
	plan srs.Plan
	old  map[int][]byte
	mu   *sync.Mutex
	got  map[int][]byte
}

func (mover) Name() string              { return "mover" }
func (mover) Nominal(int) time.Duration { return time.Second }
func (m mover) Run(ctx context.Context, c *comm.Comm, _ Params) (Result, error) {
	b, err := MoveCheckpoint(ctx, c, m.plan, m.old[c.Rank()])
	if err == nil && b != nil {
		m.mu.Lock()
		m.got[c.Rank()-m.plan.From.Procs()] = b
		m.mu.Unlock()
	}
	return Result{}, err
}

// A QR job stopped after phase 3 on 4 vrije nodes writes its checkpoint;
// the checkpoint moves over the shaped das3 links to 8 leiden nodes,
// redistributed from the 2x2 to the 2x4 grid, in about the time the
// predicted cost model gives for its data part; the job resumes there at
// phase 4 and ends with the unmigrated run's checksum.
func TestQRStopMoveRestart(t *testing.T) {
	args := map[string]float64{"n": 1200, "nb": 60, "mflops": 1e6, "seed": 3}
	want := run(t, "qr", 4, Params{Args: args}).Value

	first := &stopAt{stop: 3, cps: map[int]Checkpoint{}, phases: map[int]int{}}
	res := runApp(t, srsApp{rt: first}, ranks(4), nil, Params{Args: args})
	if !res.Stopped || res.Iterations != 4 || len(first.cps) != 4 || first.phases[3] != 4 || first.phases[4] != 0 {
		t.Fatalf("stop after phase 3: %+v, checkpoints %d, phases %v", res, len(first.cps), first.phases)
	}
	from, _ := QRLayout(args, 4, 1)
	to, _ := QRLayout(args, 8, 1)
	plan, err := srs.Redistribute(from, to, qr.ElemSize)
	if err != nil {
		t.Fatal(err)
	}
	old := map[int][]byte{}
	for r, cp := range first.cps {
		if cp.Phase != 4 || cp.Layout != from {
			t.Fatalf("checkpoint %+v", cp)
		}
		old[r] = cp.Local
	}
	m, err := netem.Preset("das3", []string{netem.Vrije, netem.Leiden})
	if err != nil {
		t.Fatal(err)
	}
	joint := append(ranks(4, netem.Vrije), ranks(8, netem.Leiden)...)
	eg, err := UserspaceEgress(m, joint, 1)
	if err != nil {
		t.Fatal(err)
	}
	mv := mover{plan: plan, old: old, mu: &sync.Mutex{}, got: map[int][]byte{}}
	took, _, err := RunLocal(ctxT(t), mv, joint, eg, Params{})
	if err != nil {
		t.Fatal(err)
	}
	wan, _ := m.Link(netem.Vrije, netem.Leiden)
	cost, err := migrate.Predicted{}.Estimate(migrate.Move{Bytes: plan.Bytes(), Links: func(int, int) (time.Duration, float64) {
		return wan.Latency, wan.Bandwidth
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The shaped link sets a floor: the move cannot beat it. How much
	// longer a busy host takes is a measurement (docs/migration.md), not a
	// unit test's business.
	if ratio := took.Seconds() / cost.Total.Seconds(); ratio < 0.8 {
		t.Errorf("moving %d bytes took %v, faster than the link allows (predicted %v, ratio %.2f)", plan.TotalBytes(), took, cost.Total, ratio)
	}
	t.Logf("moved %d bytes 2x2 -> 2x4 over %v: measured %v, predicted %v", plan.TotalBytes(), wan, took.Round(time.Millisecond), cost.Total.Round(time.Millisecond))

	second := &stopAt{stop: -1, resume: 4, from: mv.got, cps: map[int]Checkpoint{}, phases: map[int]int{}}
	res = runApp(t, srsApp{rt: second}, ranks(8, netem.Leiden), nil, Params{Args: args})
	if res.Stopped || res.Value != want || res.Iterations != 20-4 {
		t.Errorf("restart: %+v, want checksum %v after the remaining phases", res, want)
	}
	if second.phases[3] != 0 || second.phases[4] != 8 {
		t.Errorf("restart ran phases %v, want from 4 on", second.phases)
	}
	// One byte of the moved checkpoint changed: the checksum tells.
	bad := map[int][]byte{}
	for r, b := range mv.got {
		bad[r] = append([]byte(nil), b...)
	}
	bad[5][17] ^= 0x40
	third := &stopAt{stop: -1, resume: 4, from: bad, cps: map[int]Checkpoint{}, phases: map[int]int{}}
	if res := runApp(t, srsApp{rt: third}, ranks(8), nil, Params{Args: args}); res.Value == want {
		t.Error("a corrupted checkpoint gives the unmigrated checksum")
	}
}

func runApp(t *testing.T, app App, rs []RankSpec, eg func(int) netem.Egress, p Params) Result {
	t.Helper()
	_, res, err := RunLocal(ctxT(t), app, rs, eg, p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
