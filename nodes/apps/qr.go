package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
	"github.com/koala-emu/koala-emu/nodes/qr"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// QR is the iterative application of the migration experiments (SPEC §6):
// ScaLAPACK's QR factorisation (PDGEQRF) of an "n" x "n" matrix plus its
// right-hand side (default n 8000, block size "nb" 64), block-cyclically
// distributed over the most square process grid of the job's nodes, one
// process per node. It runs the phases of the performance model
// (nodes/qr): in each, a rank computes its exact share of the phase's
// flops at "mflops" Mflop/s per node of speed 1 (default 600: the whole
// run takes about 5 min on 4 such nodes), the owning process column
// broadcasts the panels along every process row and every process column
// reduces W, with the model's bytes. It checkpoints through SRS (RunSRS):
// between phases (its safe points) it reports each phase's time and stops
// when asked, writing its local block; a restart reads the checkpoint
// redistributed onto the new process grid.
//
// The matrix really exists: every rank holds its block of [A | b], filled
// from "seed", and every phase updates the columns it factors (x -> x/2 +
// phase, elementwise: the emulated factorisation's stand-in, cheap and the
// same whatever the distribution), so Value, the checksum of the final
// matrix (srs.Checksum, its top 32 bits: exact in a float64 and in
// events.jsonl's rounding), is the same for every process
// count and for a run stopped and restarted anywhere, and differs if a
// checkpoint lost or misplaced a byte.
//
// Time scale s: each phase's computation and message bytes are divided by
// s (latencies are not: a phase's messages are few), and the matrix held
// is of order round(n / sqrt(s)) with blocks of round(nb / sqrt(s)), so a
// checkpoint carries 1/s of the bytes too; phases are not fewer.
type QR struct{}

// Name implements App.
func (QR) Name() string { return "qr" }

// Args implements ArgApp.
func (QR) Args() map[string]float64 {
	return map[string]float64{"n": 8000, "nb": 64, "mflops": 600, "seed": 1}
}

// Nominal implements App.
func (x QR) Nominal(nodes int) time.Duration {
	d, _ := x.NominalArgs(nodes, nil)
	return d
}

// qrSetup is a QR run's configuration.
type qrSetup struct {
	model *qr.Model
	rate  float64 // flops/s of a node of speed 1
	seed  uint64
}

func (x QR) setup(args map[string]float64, procs int) (qrSetup, error) {
	a, err := resolve(x.Name(), x.Args(), args)
	if err != nil {
		return qrSetup{}, err
	}
	if err := positive(x.Name(), a, "n", "nb", "mflops"); err != nil {
		return qrSetup{}, err
	}
	for _, k := range []string{"n", "nb", "seed"} {
		if a[k] != math.Trunc(a[k]) || a[k] < 0 || a[k] > 1e6 {
			return qrSetup{}, fmt.Errorf("apps: qr: argument %s must be an integer in [0, 1e6] (got %v)", k, a[k])
		}
	}
	m, err := qr.New(qr.Config{N: int(a["n"]), NB: int(a["nb"]), Procs: procs})
	if err != nil {
		return qrSetup{}, fmt.Errorf("apps: %w", err)
	}
	return qrSetup{model: m, rate: a["mflops"] * 1e6, seed: uint64(a["seed"])}, nil
}

// QRModel is the performance model of a qr job of procs processes with
// these arguments.
func QRModel(args map[string]float64, procs int) (*qr.Model, float64, error) {
	s, err := QR{}.setup(args, procs)
	return s.model, s.rate, err
}

// NominalArgs implements ArgApp: the model's prediction on unloaded nodes
// of speed 1 joined by the reference link.
func (x QR) NominalArgs(nodes int, args map[string]float64) (time.Duration, error) {
	s, err := x.setup(args, max(nodes, 1))
	if err != nil {
		return 0, err
	}
	ns := make([]qr.Node, max(nodes, 1))
	for i := range ns {
		ns[i] = qr.Node{Speed: s.rate}
	}
	return s.model.Remaining(0, ns, func(int, int) (time.Duration, float64) { return RefLatency, RefBandwidth })
}

// Traffic implements TrafficApp: an iteration is an average phase.
func (x QR) Traffic(nodes int, args map[string]float64) (Traffic, error) {
	s, err := x.setup(args, max(nodes, 1))
	if err != nil {
		return Traffic{}, err
	}
	nom, err := x.NominalArgs(nodes, args)
	if err != nil {
		return Traffic{}, err
	}
	phases := s.model.Phases()
	t := Traffic{Iterations: float64(len(phases)), Iteration: nom / time.Duration(len(phases))}
	for k := range phases {
		for r := 0; r < max(nodes, 1); r++ {
			c, _ := s.model.ProcComm(k, r)
			t.Msgs += float64(c.Msgs)
			t.Bytes += float64(c.Bytes)
			t.Rounds = max(t.Rounds, float64(c.Msgs))
			t.CritBytes = max(t.CritBytes, float64(c.Bytes))
		}
	}
	n := float64(len(phases))
	t.Msgs, t.Bytes, t.Rounds, t.CritBytes = t.Msgs/n, t.Bytes/n, t.Rounds/n, t.CritBytes/n
	t.Burst = float64(max(nodes, 1))
	return t, nil
}

// QRLayout is the distribution of the matrix a qr job of procs processes
// holds at time scale timeScale (<= 0: 1): what its checkpoint carries.
func QRLayout(args map[string]float64, procs int, timeScale float64) (srs.Distribution, error) {
	s, err := QR{}.setup(args, procs)
	if err != nil {
		return srs.Distribution{}, err
	}
	return s.layout(Params{TimeScale: timeScale}.scale()), nil
}

func (s qrSetup) layout(scale float64) srs.Distribution {
	cfg := s.model.Config()
	r := math.Sqrt(scale)
	n := max(1, int(math.Round(float64(cfg.N)/r)))
	nb := max(1, int(math.Round(float64(cfg.NB)/r)))
	p, q := s.model.Grid()
	return srs.BlockCyclic2D(n, n+1, p, q, nb)
}

// Checkpoint is one rank's stopped state (SRS): the phases done, and its
// local block of the matrix under Layout (column-major, qr.ElemSize bytes
// an element).
type Checkpoint struct {
	Phase  int
	Rank   int
	Layout srs.Distribution
	Local  []byte
}

// SRS is the stop/restart runtime as a checkpointable rank sees it (SPEC
// §6's SRS library): it resumes from a checkpoint, reports every phase at
// its safe point and learns whether to stop, and writes its checkpoint.
type SRS interface {
	// Restart returns the rank's local block under layout and the phase to
	// resume at, read from the job's checkpoint and redistributed onto
	// this run's processes; ok false: no checkpoint, start afresh.
	Restart(ctx context.Context, c *comm.Comm, layout srs.Distribution) (phase int, local []byte, ok bool, err error)
	// Phase reports phase k done in took (wall time) and says whether the
	// rank should stop here; the job stops when any rank says so.
	Phase(k int, took time.Duration) (stop bool)
	// Write stores the rank's checkpoint on its own node.
	Write(cp Checkpoint) error
}

// Checkpointable is an application that runs under SRS.
type Checkpointable interface {
	App
	RunSRS(ctx context.Context, c *comm.Comm, p Params, rt SRS) (Result, error)
}

// Run implements App: the whole factorisation, without stops.
func (x QR) Run(ctx context.Context, c *comm.Comm, p Params) (Result, error) {
	return x.RunSRS(ctx, c, p, nil)
}

// RunSRS implements Checkpointable. A nil rt runs without stops.
func (x QR) RunSRS(ctx context.Context, c *comm.Comm, p Params, rt SRS) (Result, error) {
	s, err := x.setup(p.Args, c.Size())
	if err != nil {
		return Result{}, err
	}
	run := &qrRank{qrSetup: s, c: c, scale: p.scale(), layout: s.layout(p.scale())}
	from := 0
	if rt != nil {
		ph, local, ok, err := rt.Restart(ctx, c, run.layout)
		if err != nil {
			return Result{}, fmt.Errorf("qr: restart: %w", err)
		}
		if ok {
			from, run.local = ph, local
		}
	}
	if run.local == nil {
		run.local = run.fill()
	}
	phases := s.model.Phases()
	for k := from; k < len(phases); k++ {
		start := time.Now()
		if err := run.phase(ctx, k); err != nil {
			return Result{}, fmt.Errorf("qr: phase %d: %w", k, err)
		}
		if rt == nil || k == len(phases)-1 {
			continue
		}
		stop, err := run.agree(ctx, rt.Phase(k, time.Since(start)))
		if err != nil {
			return Result{}, fmt.Errorf("qr: phase %d: safe point: %w", k, err)
		}
		if stop {
			cp := Checkpoint{Phase: k + 1, Rank: c.Rank(), Layout: run.layout, Local: run.local}
			if err := rt.Write(cp); err != nil {
				return Result{}, fmt.Errorf("qr: checkpoint after phase %d: %w", k, err)
			}
			return Result{Iterations: k + 1 - from, Stopped: true}, nil
		}
	}
	sum, err := run.checksum(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("qr: checksum: %w", err)
	}
	return Result{Iterations: len(phases) - from, Value: float64(sum >> 32)}, nil
}

// qrRank is one rank's run.
type qrRank struct {
	qrSetup
	c      *comm.Comm
	scale  float64
	layout srs.Distribution
	local  []byte
}

// fill builds the rank's block of the seeded matrix: element (i, j) is a
// hash of (seed, i, j) in [0, 1).
func (r *qrRank) fill() []byte {
	d, rank := r.layout, r.c.Rank()
	lrows, lcols := d.LocalShape(rank)
	pr, pc := d.Coords(rank)
	out := make([]byte, lrows*lcols*qr.ElemSize)
	for lj := 0; lj < lcols; lj++ {
		j := d.Col.Global(pc, lj, d.Cols)
		for li := 0; li < lrows; li++ {
			i := d.Row.Global(pr, li, d.Rows)
			h := splitmix(r.seed ^ splitmix(uint64(j)*uint64(d.Rows)+uint64(i)))
			binary.LittleEndian.PutUint64(out[(lj*lrows+li)*qr.ElemSize:], math.Float64bits(float64(h>>11)/(1<<53)))
		}
	}
	return out
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// phase computes the rank's share of phase k, exchanges the phase's
// panels and reductions, and updates the columns the phase factors.
func (r *qrRank) phase(ctx context.Context, k int) error {
	ph := r.model.Phases()[k]
	work := float64(ph.ProcFlops[r.c.Rank()]) / r.rate / r.scale * float64(r.c.Processors())
	if err := r.c.Compute(ctx, time.Duration(work*float64(time.Second))); err != nil {
		return err
	}
	if err := r.exchange(ctx, k, ph); err != nil {
		return err
	}
	r.update(k, ph)
	return nil
}

// exchange moves the phase's bytes: the process column owning the phase's
// first panel sends each process of its row the row's broadcast payload,
// and every process column gathers its reduction payload at its first
// process and sends it back (flat trees; the model's binomial trees carry
// the same payload per hop).
func (r *qrRank) exchange(ctx context.Context, k int, ph qr.Phase) error {
	p, q := r.model.Grid()
	pr, pc := r.c.Rank()/q, r.c.Rank()%q
	cfg := r.model.Config()
	root := r.model.Layout().Col.Owner(ph.FirstCol, cfg.N+1)
	payload := func(bytes int64, hops int) []byte {
		return make([]byte, max(8, int(float64(bytes)/float64(max(hops, 1))/r.scale)))
	}
	tag := 4 * k
	var waits []func() error
	if q > 1 && pc == root {
		b := payload(ph.Bcast[pr].Bytes, ceilLog2(q))
		for j := 0; j < q; j++ {
			if j != pc {
				waits = append(waits, r.c.Isend(ctx, pr*q+j, tag, b))
			}
		}
	} else if q > 1 {
		b, err := r.c.Recv(ctx, pr*q+root, tag)
		if err != nil {
			return err
		}
		r.c.Release(b)
	}
	for _, w := range waits {
		if err := w(); err != nil {
			return err
		}
	}
	if p == 1 {
		return nil
	}
	b := payload(ph.Reduce[pc].Bytes, 2*ceilLog2(p))
	if pr != 0 {
		if err := r.c.Send(ctx, pc, tag+1, b); err != nil {
			return err
		}
		back, err := r.c.Recv(ctx, pc, tag+2)
		r.c.Release(back)
		return err
	}
	for i := 1; i < p; i++ {
		in, err := r.c.Recv(ctx, i*q+pc, tag+1)
		if err != nil {
			return err
		}
		r.c.Release(in)
	}
	for i := 1; i < p; i++ {
		if err := r.c.Send(ctx, i*q+pc, tag+2, b); err != nil {
			return err
		}
	}
	return nil
}

func ceilLog2(g int) int {
	if g <= 1 {
		return 0
	}
	return log2ceil(g)
}

// update applies phase k to the held columns it factors (the model's
// columns [FirstCol, EndCol) scaled to the held order): x -> x/2 + k.
func (r *qrRank) update(k int, ph qr.Phase) {
	d, rank := r.layout, r.c.Rank()
	n := r.model.Config().N
	lo, hi := ph.FirstCol*d.Rows/n, ph.EndCol*d.Rows/n
	lrows, lcols := d.LocalShape(rank)
	_, pc := d.Coords(rank)
	for lj := 0; lj < lcols; lj++ {
		if j := d.Col.Global(pc, lj, d.Cols); j < lo || j >= hi {
			continue
		}
		for li := 0; li < lrows; li++ {
			off := (lj*lrows + li) * qr.ElemSize
			v := math.Float64frombits(binary.LittleEndian.Uint64(r.local[off:]))
			binary.LittleEndian.PutUint64(r.local[off:], math.Float64bits(v/2+float64(k)))
		}
	}
}

// agree is true on every rank when stop is true on any.
func (r *qrRank) agree(ctx context.Context, stop bool) (bool, error) {
	v := 0.0
	if stop {
		v = 1
	}
	out, err := r.c.AllreduceFloat64(ctx, []float64{v}, comm.Max)
	if err != nil {
		return false, err
	}
	return out[0] > 0, nil
}

// checksum combines every rank's share of the matrix's checksum.
func (r *qrRank) checksum(ctx context.Context) (uint64, error) {
	share, err := srs.Checksum(r.layout, qr.ElemSize, r.c.Rank(), r.local)
	if err != nil {
		return 0, err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], share)
	all, err := r.c.Allgather(ctx, b[:])
	if err != nil {
		return 0, err
	}
	shares := make([]uint64, len(all))
	for i, s := range all {
		shares[i] = binary.LittleEndian.Uint64(s)
	}
	return srs.Combine(shares...), nil
}
