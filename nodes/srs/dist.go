package srs

import "fmt"

// Kind is how one dimension of a matrix is dealt out to the processes of
// one dimension of the process grid.
type Kind uint8

// The distributions SRS supports (SPEC §6). Every one is a block-cyclic
// distribution with some block size b: index i belongs to process
// (i / b) mod P and is that process's local index (i / (b·P))·b + i mod b.
const (
	// Block gives each process one contiguous block of ceil(n/P) indices
	// (the last processes may get fewer, or none).
	Block Kind = iota + 1
	// Cyclic deals indices out one at a time: index i goes to i mod P.
	Cyclic
	// BlockCyclic deals out blocks of NB indices in turn (ScaLAPACK).
	BlockCyclic
)

// String names the kind as scenarios and reports spell it.
func (k Kind) String() string {
	switch k {
	case Block:
		return "block"
	case Cyclic:
		return "cyclic"
	case BlockCyclic:
		return "block-cyclic"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Axis is the distribution of one matrix dimension over one dimension of
// the process grid.
type Axis struct {
	Kind  Kind
	Procs int // processes along this dimension, >= 1
	NB    int // block size, BlockCyclic only (>= 1); ignored otherwise
}

// Distribution is a Rows x Cols matrix distributed over a Row.Procs x
// Col.Procs process grid. Process (pr, pc) has rank pr·Col.Procs + pc (row
// major, as BLACS_GRIDINIT with order 'R'). A 1-D distribution is a grid
// with one process along the other dimension. Each process stores its local
// block column-major with a leading dimension of its local row count.
type Distribution struct {
	Rows, Cols int
	Row, Col   Axis
}

// Block1D distributes the rows of a rows x cols matrix in p contiguous
// blocks (a p x 1 grid).
func Block1D(rows, cols, p int) Distribution {
	return Distribution{Rows: rows, Cols: cols, Row: Axis{Kind: Block, Procs: p}, Col: Axis{Kind: Block, Procs: 1}}
}

// Cyclic1D distributes the rows of a rows x cols matrix cyclically over p
// processes (a p x 1 grid).
func Cyclic1D(rows, cols, p int) Distribution {
	return Distribution{Rows: rows, Cols: cols, Row: Axis{Kind: Cyclic, Procs: p}, Col: Axis{Kind: Block, Procs: 1}}
}

// BlockCyclic2D is ScaLAPACK's layout: nb x nb blocks dealt out over a
// pr x pc grid.
func BlockCyclic2D(rows, cols, pr, pc, nb int) Distribution {
	return Distribution{
		Rows: rows, Cols: cols,
		Row: Axis{Kind: BlockCyclic, Procs: pr, NB: nb},
		Col: Axis{Kind: BlockCyclic, Procs: pc, NB: nb},
	}
}

// Validate reports the first malformed field.
func (d Distribution) Validate() error {
	if d.Rows < 0 {
		return fmt.Errorf("srs: distribution Rows must be >= 0, got %d", d.Rows)
	}
	if d.Cols < 0 {
		return fmt.Errorf("srs: distribution Cols must be >= 0, got %d", d.Cols)
	}
	if err := d.Row.validate(); err != nil {
		return fmt.Errorf("srs: distribution Row: %w", err)
	}
	if err := d.Col.validate(); err != nil {
		return fmt.Errorf("srs: distribution Col: %w", err)
	}
	return nil
}

func (a Axis) validate() error {
	if a.Procs < 1 {
		return fmt.Errorf("Procs must be >= 1, got %d", a.Procs)
	}
	switch a.Kind {
	case Block, Cyclic:
	case BlockCyclic:
		if a.NB < 1 {
			return fmt.Errorf("NB must be >= 1 for block-cyclic, got %d", a.NB)
		}
	default:
		return fmt.Errorf("unknown Kind %d", uint8(a.Kind))
	}
	return nil
}

// Procs is the number of processes of the grid.
func (d Distribution) Procs() int { return d.Row.Procs * d.Col.Procs }

// String renders the distribution as "1000x1001 block-cyclic(64) 2x2".
func (d Distribution) String() string {
	return fmt.Sprintf("%dx%d %s x %s over %dx%d", d.Rows, d.Cols, d.Row.label(), d.Col.label(), d.Row.Procs, d.Col.Procs)
}

func (a Axis) label() string {
	if a.Kind == BlockCyclic {
		return fmt.Sprintf("block-cyclic(%d)", a.NB)
	}
	return a.Kind.String()
}

// block is the axis's block size over an extent of n indices.
func (a Axis) block(n int) int {
	switch a.Kind {
	case Cyclic:
		return 1
	case BlockCyclic:
		return a.NB
	}
	b := (n + a.Procs - 1) / a.Procs
	return max(b, 1)
}

// Owner is the process (along this axis) that holds global index i of an
// extent of n.
func (a Axis) Owner(i, n int) int { return (i / a.block(n)) % a.Procs }

// Local is the local index of global index i on its owner.
func (a Axis) Local(i, n int) int {
	b := a.block(n)
	return (i/(b*a.Procs))*b + i%b
}

// Global is the global index of local index l on process p.
func (a Axis) Global(p, l, n int) int {
	b := a.block(n)
	return ((l/b)*a.Procs+p)*b + l%b
}

// Count is how many of the indices [0, n) process p holds (ScaLAPACK's
// NUMROC).
func (a Axis) Count(p, n int) int {
	b := a.block(n)
	blocks := n / b
	c := (blocks / a.Procs) * b
	switch extra := blocks % a.Procs; {
	case p < extra:
		c += b
	case p == extra:
		c += n % b
	}
	return c
}

// Owner is the rank holding element (i, j) and its local (row, col).
func (d Distribution) Owner(i, j int) (rank, li, lj int) {
	pr, pc := d.Row.Owner(i, d.Rows), d.Col.Owner(j, d.Cols)
	return pr*d.Col.Procs + pc, d.Row.Local(i, d.Rows), d.Col.Local(j, d.Cols)
}

// Coords is the grid position of a rank.
func (d Distribution) Coords(rank int) (pr, pc int) { return rank / d.Col.Procs, rank % d.Col.Procs }

// LocalShape is the local block's row and column counts on a rank.
func (d Distribution) LocalShape(rank int) (rows, cols int) {
	pr, pc := d.Coords(rank)
	return d.Row.Count(pr, d.Rows), d.Col.Count(pc, d.Cols)
}

// LocalBytes is the size of a rank's local block with elements of
// elemSize bytes.
func (d Distribution) LocalBytes(rank, elemSize int) int64 {
	r, c := d.LocalShape(rank)
	return int64(r) * int64(c) * int64(elemSize)
}

func (d Distribution) checkRank(rank int) error {
	if rank < 0 || rank >= d.Procs() {
		return fmt.Errorf("srs: rank %d outside the %d processes of %v", rank, d.Procs(), d)
	}
	return nil
}
