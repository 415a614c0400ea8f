package qr

import (
	"fmt"
	"math/bits"

	"github.com/koala-emu/koala-emu/nodes/srs"
)

// DefaultNB is the block size when Config.NB is 0: 64, the usual PDGEQRF
// block size on the Pentium-class nodes of SPEC §6 (large enough for
// level-3 BLAS speed, small enough that the panel factorisation, which
// only one process column performs, stays a small share of the work).
const DefaultNB = 64

// MaxPhases bounds the number of phases when Config.PanelsPerPhase is 0:
// panels are grouped so that a run has at most this many phases, tens of
// contract-monitor checks per run as in SPEC §6.
const MaxPhases = 40

// ElemSize is the size of one matrix element (float64).
const ElemSize = 8

// Config describes one QR run.
type Config struct {
	N              int // order of the matrix, >= 1
	NB             int // block size; 0 means DefaultNB
	Procs          int // processes, one per node, >= 1
	PanelsPerPhase int // panels per phase; 0 means ceil(panels / MaxPhases)
}

// Comm is one group of processes' communication in one phase, on its
// critical path: Collectives operations, Msgs messages in sequence (each
// collective's tree depth) and Bytes carried by those messages in sequence.
// The time the model charges is Msgs x latency + Bytes / bandwidth.
type Comm struct {
	Collectives int
	Msgs        int
	Bytes       int64
}

// Phase is a group of consecutive panels.
type Phase struct {
	Index            int
	FirstCol, EndCol int   // matrix columns [FirstCol, EndCol) factored in this phase
	Panels           int   // panels of NB columns (the last one may be narrower)
	Flops            int64 // all processes together
	ProcFlops        []int64
	// Panel: the panel factorisation's small all-reduces, per process
	// column (only the column owning a panel takes part; panels follow one
	// another, so these add up).
	Panel []Comm
	// Bcast: the broadcast of each panel's Householder vectors and T factor
	// along each process row (rows run concurrently).
	Bcast []Comm
	// Reduce: the all-reduce of W = Vᵀ·A(trailing) along each process
	// column (columns run concurrently).
	Reduce []Comm
}

// Model is the performance model of one QR run.
type Model struct {
	cfg    Config
	p, q   int
	phases []Phase
}

// Grid is the process grid for p processes as ScaLAPACK users choose it:
// as square as possible, P x Q with P the largest divisor of p not above
// sqrt(p), so P <= Q (a grid a little wider than tall keeps the panel
// factorisation's column short). A prime p gives 1 x p.
func Grid(p int) (rows, cols int) {
	rows = 1
	for d := 1; d*d <= p; d++ {
		if p%d == 0 {
			rows = d
		}
	}
	return rows, p / max(rows, 1)
}

// New builds the model: the grid, the phases, their flops and their
// communication.
func New(cfg Config) (*Model, error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("qr: config N must be >= 1, got %d", cfg.N)
	}
	if cfg.NB < 0 {
		return nil, fmt.Errorf("qr: config NB must be >= 0, got %d", cfg.NB)
	}
	if cfg.NB == 0 {
		cfg.NB = DefaultNB
	}
	if cfg.Procs < 1 {
		return nil, fmt.Errorf("qr: config Procs must be >= 1, got %d", cfg.Procs)
	}
	if cfg.PanelsPerPhase < 0 {
		return nil, fmt.Errorf("qr: config PanelsPerPhase must be >= 0, got %d", cfg.PanelsPerPhase)
	}
	panels := (cfg.N + cfg.NB - 1) / cfg.NB
	if cfg.PanelsPerPhase == 0 {
		cfg.PanelsPerPhase = (panels + MaxPhases - 1) / MaxPhases
	}
	m := &Model{cfg: cfg}
	m.p, m.q = Grid(cfg.Procs)
	m.build(panels)
	return m, nil
}

// Config is the configuration with defaults filled in.
func (m *Model) Config() Config { return m.cfg }

// Grid is the model's process grid.
func (m *Model) Grid() (rows, cols int) { return m.p, m.q }

// Phases lists the phases (shared; do not modify).
func (m *Model) Phases() []Phase { return m.phases }

// ProcComm is one rank's communication in phase k: the panel
// factorisations of its process column, the broadcasts of its process row
// and the reductions of its process column, added up.
func (m *Model) ProcComm(k, rank int) (Comm, error) {
	if k < 0 || k >= len(m.phases) {
		return Comm{}, fmt.Errorf("qr: phase %d outside [0, %d)", k, len(m.phases))
	}
	if rank < 0 || rank >= m.p*m.q {
		return Comm{}, fmt.Errorf("qr: rank %d outside [0, %d)", rank, m.p*m.q)
	}
	ph := m.phases[k]
	pr, pc := rank/m.q, rank%m.q
	var c Comm
	for _, x := range []Comm{ph.Panel[pc], ph.Bcast[pr], ph.Reduce[pc]} {
		c.Collectives += x.Collectives
		c.Msgs += x.Msgs
		c.Bytes += x.Bytes
	}
	return c, nil
}

// Layout is the distribution of the augmented N x (N+1) matrix [A | b]: A
// and its right-hand side as one matrix, NB x NB blocks dealt out over the
// P x Q grid (the right-hand side is column N).
func (m *Model) Layout() srs.Distribution {
	return srs.BlockCyclic2D(m.cfg.N, m.cfg.N+1, m.p, m.q, m.cfg.NB)
}

// DataBytes is the bytes of the matrix and right-hand side each rank holds.
func (m *Model) DataBytes() []int64 {
	d := m.Layout()
	out := make([]int64, d.Procs())
	for r := range out {
		out[r] = d.LocalBytes(r, ElemSize)
	}
	return out
}

// TotalFlops is the flop count of the whole factorisation the model
// charges: sum over columns j of 4·r·r + 3·r with r = N - j, that is
// (8N³ + 21N² + 13N) / 6 = 4/3·N³ + 7/2·N² + 13/6·N (see build).
func TotalFlops(n int) int64 {
	N := int64(n)
	return (8*N*N*N + 21*N*N + 13*N) / 6
}

// build counts flops and communication.
//
// Flops. Householder QR eliminates column j (0-based) of the augmented
// matrix with r = N - j rows left: generating the reflector costs 3r
// (norm 2r, scaling r) on the process column owning column j, and applying
// it to the r columns to its right (the N-j-1 columns of A and the
// right-hand side) costs 4r each (w = vᵀ·a, a -= τ·v·w). Each process does
// the part of that work on the rows and columns it holds. The blocked
// algorithm (compact WY) reorganises the same operations into level-3 BLAS
// and adds O(N²·NB) for the T factors, which the model leaves out.
//
// Communication, per panel of nb columns starting at column j0 (binomial
// trees: a broadcast over g processes is ceil(log2 g) messages in sequence,
// an all-reduce twice that):
//   - panel factorisation, on the owning process column: per column an
//     all-reduce of the norm (8 bytes) and, unless it is the panel's last
//     column, of w over the rest of the panel (8 bytes per column);
//   - broadcast along every process row of V (the row's local rows of
//     [j0, N) x nb doubles) and T (nb(nb+1)/2 doubles);
//   - all-reduce along every process column of W = Vᵀ·A over the column's
//     local trailing columns (nb doubles per column).
func (m *Model) build(panels int) {
	n, nb, P, Q := m.cfg.N, m.cfg.NB, m.p, m.q
	d := m.Layout()
	bHops, rHops := ceilLog2(Q), 2*ceilLog2(P)
	rowsFrom := func(pr, lo int) int64 { return int64(d.Row.Count(pr, n) - d.Row.Count(pr, lo)) }
	colsFrom := func(pc, lo int) int64 { return int64(d.Col.Count(pc, n+1) - d.Col.Count(pc, lo)) }
	for k0 := 0; k0 < panels; k0 += m.cfg.PanelsPerPhase {
		k1 := min(k0+m.cfg.PanelsPerPhase, panels)
		ph := Phase{
			Index: len(m.phases), FirstCol: k0 * nb, EndCol: min(k1*nb, n), Panels: k1 - k0,
			ProcFlops: make([]int64, P*Q),
			Panel:     make([]Comm, Q), Bcast: make([]Comm, P), Reduce: make([]Comm, Q),
		}
		for j := ph.FirstCol; j < ph.EndCol; j++ {
			own := d.Col.Owner(j, n+1)
			for pr := 0; pr < P; pr++ {
				rows := rowsFrom(pr, j)
				for pc := 0; pc < Q; pc++ {
					f := 4 * rows * colsFrom(pc, j+1)
					if pc == own {
						f += 3 * rows
					}
					ph.ProcFlops[pr*Q+pc] += f
					ph.Flops += f
				}
			}
		}
		for k := k0; k < k1; k++ {
			j0, j1 := k*nb, min((k+1)*nb, n)
			w := int64(j1 - j0)
			own := d.Col.Owner(j0, n+1)
			for j := j0; j < j1; j++ {
				add(&ph.Panel[own], rHops, 8)
				if j+1 < j1 {
					add(&ph.Panel[own], rHops, 8*int64(j1-j-1))
				}
			}
			for pr := 0; pr < P; pr++ {
				add(&ph.Bcast[pr], bHops, 8*(rowsFrom(pr, j0)*w+w*(w+1)/2))
			}
			for pc := 0; pc < Q; pc++ {
				add(&ph.Reduce[pc], rHops, 8*w*colsFrom(pc, j1))
			}
		}
		m.phases = append(m.phases, ph)
	}
}

// add records one collective of hops messages in sequence, each carrying
// payload bytes.
func add(c *Comm, hops int, payload int64) {
	c.Collectives++
	c.Msgs += hops
	c.Bytes += int64(hops) * payload
}

// ceilLog2 is the depth of a binomial tree over g processes.
func ceilLog2(g int) int {
	if g <= 1 {
		return 0
	}
	return bits.Len(uint(g - 1))
}
