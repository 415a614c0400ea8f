package srs

import (
	"bytes"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestAxisTable(t *testing.T) {
	// Hand-dealt: n = 10.
	//   block-cyclic(2) over 3: 01|23|45|67|89 -> p0 p1 p2 p0 p1
	//   block over 4 (b = 3):   012|345|678|9  -> p0 p1 p2 p3
	//   cyclic over 3:          0123456789     -> 0 1 2 0 1 2 0 1 2 0
	cases := []struct {
		name   string
		a      Axis
		owner  []int
		local  []int
		counts []int
	}{
		{"block-cyclic", Axis{Kind: BlockCyclic, Procs: 3, NB: 2},
			[]int{0, 0, 1, 1, 2, 2, 0, 0, 1, 1}, []int{0, 1, 0, 1, 0, 1, 2, 3, 2, 3}, []int{4, 4, 2}},
		{"block", Axis{Kind: Block, Procs: 4},
			[]int{0, 0, 0, 1, 1, 1, 2, 2, 2, 3}, []int{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, []int{3, 3, 3, 1}},
		{"cyclic", Axis{Kind: Cyclic, Procs: 3},
			[]int{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 3}, []int{4, 3, 3}},
		{"one process", Axis{Kind: BlockCyclic, Procs: 1, NB: 4},
			[]int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < 10; i++ {
				if o, l := c.a.Owner(i, 10), c.a.Local(i, 10); o != c.owner[i] || l != c.local[i] {
					t.Errorf("index %d: (owner, local) = (%d, %d), want (%d, %d)", i, o, l, c.owner[i], c.local[i])
				}
				if g := c.a.Global(c.owner[i], c.local[i], 10); g != i {
					t.Errorf("Global(%d, %d) = %d, want %d", c.owner[i], c.local[i], g, i)
				}
			}
			for p, want := range c.counts {
				if got := c.a.Count(p, 10); got != want {
					t.Errorf("Count(%d) = %d, want %d", p, got, want)
				}
			}
		})
	}
}

func TestValidateNamesField(t *testing.T) {
	cases := []struct {
		d    Distribution
		want string
	}{
		{Distribution{Rows: -1, Cols: 1, Row: Axis{Kind: Block, Procs: 1}, Col: Axis{Kind: Block, Procs: 1}}, "Rows"},
		{Distribution{Rows: 1, Cols: 1, Row: Axis{Kind: Block, Procs: 0}, Col: Axis{Kind: Block, Procs: 1}}, "Row: Procs"},
		{Distribution{Rows: 1, Cols: 1, Row: Axis{Kind: Block, Procs: 1}, Col: Axis{Kind: BlockCyclic, Procs: 1}}, "Col: NB"},
		{Distribution{Rows: 1, Cols: 1, Row: Axis{Kind: 9, Procs: 1}, Col: Axis{Kind: Block, Procs: 1}}, "Row: unknown Kind"},
	}
	for _, c := range cases {
		err := c.d.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", c.d, err, c.want)
		}
	}
	if _, err := Redistribute(Block1D(4, 4, 2), Block1D(4, 5, 2), 8); err == nil {
		t.Error("Redistribute accepted two shapes")
	}
	if _, err := Redistribute(Block1D(4, 4, 2), Block1D(4, 4, 2), 0); err == nil {
		t.Error("Redistribute accepted elemSize 0")
	}
}

func TestRedistributeHandPlan(t *testing.T) {
	// Rows 0..3 of a 4x1 matrix: block over 2 holds {0,1} {2,3}; cyclic
	// over 2 holds {0,2} {1,3}.
	p, err := Redistribute(Block1D(4, 1, 2), Cyclic1D(4, 1, 2), 8)
	if err != nil {
		t.Fatal(err)
	}
	col := []Range{{0, 1}}
	want := []Transfer{
		{From: 0, To: 0, Rows: []Range{{0, 1}}, Cols: col, Bytes: 8},
		{From: 0, To: 1, Rows: []Range{{1, 2}}, Cols: col, Bytes: 8},
		{From: 1, To: 0, Rows: []Range{{2, 3}}, Cols: col, Bytes: 8},
		{From: 1, To: 1, Rows: []Range{{3, 4}}, Cols: col, Bytes: 8},
	}
	if !reflect.DeepEqual(p.Transfers, want) {
		t.Fatalf("transfers = %+v, want %+v", p.Transfers, want)
	}

	// 2x2 grid, 4x4 matrix, 2x2 blocks, to one process: each old rank
	// sends its whole 2x2 block (32 bytes) as one run of rows and columns.
	p, err = Redistribute(BlockCyclic2D(4, 4, 2, 2, 2), Block1D(4, 4, 1), 8)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := [][]int64{{32}, {32}, {32}, {32}}
	if got := p.Bytes(); !reflect.DeepEqual(got, wantBytes) {
		t.Fatalf("bytes = %v, want %v", got, wantBytes)
	}
	if tr := p.Transfers[3]; !reflect.DeepEqual(tr.Rows, []Range{{2, 4}}) || !reflect.DeepEqual(tr.Cols, []Range{{2, 4}}) {
		t.Fatalf("rank 3's transfer = %+v, want rows and cols [2,4)", tr)
	}
}

func randomMatrix(rng *rand.Rand, rows, cols, es int) []byte {
	b := make([]byte, rows*cols*es)
	rng.Read(b)
	return b
}

// roundTrip scatters global over from, redistributes to to through packed
// messages, and returns the gathered result and the new local blocks.
func roundTrip(t *testing.T, from, to Distribution, es int, global []byte) ([]byte, [][]byte, Plan) {
	t.Helper()
	old, err := Scatter(from, es, global)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Redistribute(from, to, es)
	if err != nil {
		t.Fatal(err)
	}
	inbox := make([]map[int][]byte, to.Procs())
	for i := range inbox {
		inbox[i] = map[int][]byte{}
	}
	for r := range old {
		msgs, err := plan.Pack(r, old[r])
		if err != nil {
			t.Fatal(err)
		}
		for dst, m := range msgs {
			inbox[dst][r] = m
		}
	}
	newLocals := make([][]byte, to.Procs())
	for r := range newLocals {
		if newLocals[r], err = plan.Unpack(r, inbox[r]); err != nil {
			t.Fatal(err)
		}
	}
	back, err := Gather(to, es, newLocals)
	if err != nil {
		t.Fatal(err)
	}
	return back, newLocals, plan
}

func checksumOf(t *testing.T, d Distribution, es int, locals [][]byte) uint64 {
	t.Helper()
	var shares []uint64
	for r, l := range locals {
		s, err := Checksum(d, es, r, l)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	return Combine(shares...)
}

func TestRedistributeRealMatrix(t *testing.T) {
	const n = 200 // a 200 x 201 matrix of float64: A plus its right-hand side
	cases := []struct {
		name     string
		from, to Distribution
	}{
		{"4 block-cyclic to 8", BlockCyclic2D(n, n+1, 2, 2, 16), BlockCyclic2D(n, n+1, 2, 4, 16)},
		{"8 to 3", BlockCyclic2D(n, n+1, 2, 4, 16), BlockCyclic2D(n, n+1, 1, 3, 16)},
		{"block to cyclic", Block1D(n, n+1, 4), Cyclic1D(n, n+1, 6)},
		{"block-cyclic 2-D to 1-D block, other block size", BlockCyclic2D(n, n+1, 2, 2, 7), Block1D(n, n+1, 5)},
	}
	rng := rand.New(rand.NewSource(19))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			global := randomMatrix(rng, n, n+1, 8)
			want, err := GlobalChecksum(n, n+1, 8, global)
			if err != nil {
				t.Fatal(err)
			}
			old, err := Scatter(c.from, 8, global)
			if err != nil {
				t.Fatal(err)
			}
			if got := checksumOf(t, c.from, 8, old); got != want {
				t.Fatalf("checksum before = %x, want %x", got, want)
			}
			back, newLocals, plan := roundTrip(t, c.from, c.to, 8, global)
			if !bytes.Equal(back, global) {
				t.Fatal("redistributed matrix differs from the original")
			}
			if got := checksumOf(t, c.to, 8, newLocals); got != want {
				t.Fatalf("checksum after = %x, want %x", got, want)
			}
			if got := plan.TotalBytes(); got != int64(n*(n+1)*8) {
				t.Fatalf("plan moves %d bytes, want %d", got, n*(n+1)*8)
			}
		})
	}
}

func TestChecksumSeesChanges(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	g := randomMatrix(rng, 6, 5, 8)
	a, _ := GlobalChecksum(6, 5, 8, g)
	g[17] ^= 1
	b, _ := GlobalChecksum(6, 5, 8, g)
	g[17] ^= 1
	// Swapping two elements keeps the multiset of values but not their places.
	h := append([]byte(nil), g...)
	copy(h[0:8], g[8:16])
	copy(h[8:16], g[0:8])
	c, _ := GlobalChecksum(6, 5, 8, h)
	if a == b || a == c {
		t.Fatalf("checksum blind to a flipped bit (%x vs %x) or a swap (%x)", a, b, c)
	}
}

func TestUnpackRejectsBadMessages(t *testing.T) {
	from, to := Block1D(6, 2, 2), Cyclic1D(6, 2, 3)
	rng := rand.New(rand.NewSource(1))
	old, _ := Scatter(from, 4, randomMatrix(rng, 6, 2, 4))
	plan, err := Redistribute(from, to, 4)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := plan.Pack(0, old[0])
	m1, _ := plan.Pack(1, old[1])
	if _, err := plan.Unpack(0, map[int][]byte{0: m0[0]}); err == nil || !strings.Contains(err.Error(), "no message from old rank 1") {
		t.Errorf("missing message: err = %v", err)
	}
	if _, err := plan.Unpack(0, map[int][]byte{0: m0[0], 1: m1[0][1:]}); err == nil || !strings.Contains(err.Error(), "bytes, want") {
		t.Errorf("short message: err = %v", err)
	}
	if _, err := plan.Unpack(0, map[int][]byte{0: m0[0], 1: m1[0], 7: nil}); err == nil {
		t.Error("unexpected extra message accepted")
	}
	if _, err := plan.Pack(0, old[0][1:]); err == nil {
		t.Error("short local block accepted by Pack")
	}
	if _, err := plan.Pack(2, nil); err == nil {
		t.Error("rank outside the old grid accepted by Pack")
	}
}
