package srs

import (
	"bytes"
	"math/rand"
	"testing"
)

func randomAxis(rng *rand.Rand) Axis {
	a := Axis{Kind: Kind(1 + rng.Intn(3)), Procs: 1 + rng.Intn(5)}
	if a.Kind == BlockCyclic {
		a.NB = 1 + rng.Intn(9)
	}
	return a
}

func randomDist(rng *rand.Rand, rows, cols int) Distribution {
	d := Distribution{Rows: rows, Cols: cols, Row: randomAxis(rng), Col: randomAxis(rng)}
	if rng.Intn(3) == 0 { // a 1-D grid
		d.Col.Procs = 1
	}
	return d
}

// TestRedistributeProperty checks, for random shapes and distributions,
// against a per-element oracle built from Owner alone: every element moves
// exactly once, from its old owner to its new owner; the byte matrix sums
// to the matrix; the reassembled matrix equals the original; the checksum
// does not depend on the distribution.
func TestRedistributeProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for iter := 0; iter < 300; iter++ {
		rows, cols := rng.Intn(40), rng.Intn(40)
		es := []int{1, 3, 8}[rng.Intn(3)]
		from, to := randomDist(rng, rows, cols), randomDist(rng, rows, cols)
		plan, err := Redistribute(from, to, es)
		if err != nil {
			t.Fatalf("%v -> %v: %v", from, to, err)
		}
		seen := make([]int, rows*cols)
		pairs := map[[2]int]bool{}
		for _, tr := range plan.Transfers {
			if pairs[[2]int{tr.From, tr.To}] {
				t.Fatalf("%v -> %v: pair (%d, %d) listed twice", from, to, tr.From, tr.To)
			}
			pairs[[2]int{tr.From, tr.To}] = true
			if tr.Bytes != tr.Elements()*int64(es) || tr.Bytes == 0 {
				t.Fatalf("%v -> %v: transfer %+v: bytes %d for %d elements", from, to, tr, tr.Bytes, tr.Elements())
			}
			for _, cr := range tr.Cols {
				for j := cr.Lo; j < cr.Hi; j++ {
					for _, rr := range tr.Rows {
						for i := rr.Lo; i < rr.Hi; i++ {
							seen[j*rows+i]++
							o, _, _ := from.Owner(i, j)
							n, _, _ := to.Owner(i, j)
							if o != tr.From || n != tr.To {
								t.Fatalf("%v -> %v: element (%d,%d) in transfer %d->%d, owners %d->%d", from, to, i, j, tr.From, tr.To, o, n)
							}
						}
					}
				}
			}
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("%v -> %v: element %d moves %d times", from, to, k, c)
			}
		}
		var sum int64
		for _, row := range plan.Bytes() {
			for _, b := range row {
				sum += b
			}
		}
		if sum != int64(rows*cols*es) {
			t.Fatalf("%v -> %v: byte matrix sums to %d, want %d", from, to, sum, rows*cols*es)
		}

		global := randomMatrix(rng, rows, cols, es)
		back, newLocals, _ := roundTrip(t, from, to, es, global)
		if !bytes.Equal(back, global) {
			t.Fatalf("%v -> %v: reassembled matrix differs", from, to)
		}
		want, err := GlobalChecksum(rows, cols, es, global)
		if err != nil {
			t.Fatal(err)
		}
		if got := checksumOf(t, to, es, newLocals); got != want {
			t.Fatalf("%v -> %v: checksum %x, want %x", from, to, got, want)
		}
	}
}

// TestLocalShapeCoversMatrix: the local blocks of every rank add up to the
// matrix and every element's local index lies inside its owner's block.
func TestLocalShapeCoversMatrix(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for iter := 0; iter < 300; iter++ {
		rows, cols := rng.Intn(50), rng.Intn(50)
		d := randomDist(rng, rows, cols)
		total := 0
		for r := 0; r < d.Procs(); r++ {
			lr, lc := d.LocalShape(r)
			total += lr * lc
		}
		if total != rows*cols {
			t.Fatalf("%v: local blocks hold %d elements, want %d", d, total, rows*cols)
		}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				r, li, lj := d.Owner(i, j)
				lr, lc := d.LocalShape(r)
				if li >= lr || lj >= lc {
					t.Fatalf("%v: (%d,%d) -> rank %d local (%d,%d) outside %dx%d", d, i, j, r, li, lj, lr, lc)
				}
			}
		}
	}
}
