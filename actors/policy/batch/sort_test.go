package batch

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// sortDeltas orders deltas by instant on random, sorted, reversed and
// constant inputs of every small size and some large ones.
func TestSortDeltas(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for n := range 300 {
		for kind := range 5 {
			ds := make([]delta, n)
			for i := range ds {
				switch kind {
				case 0:
					ds[i].at = time.Duration(rng.IntN(1 + n/3))
				case 1:
					ds[i].at = time.Duration(i)
				case 2:
					ds[i].at = time.Duration(n - i)
				case 3:
					ds[i].at = 7
				case 4:
					ds[i].at = time.Duration(rng.Int64())
				}
				ds[i].dfree = i
			}
			want := slices.Clone(ds)
			slices.SortStableFunc(want, func(a, b delta) int { return cmp.Compare(a.at, b.at) })
			sortDeltas(ds)
			seen := make([]bool, n)
			for i := range ds {
				if ds[i].at != want[i].at {
					t.Fatalf("n %d kind %d: at %d is %v, want %v", n, kind, i, ds[i].at, want[i].at)
				}
				seen[ds[i].dfree] = true
			}
			for i, ok := range seen {
				if !ok {
					t.Fatalf("n %d kind %d: delta %d lost", n, kind, i)
				}
			}
		}
	}
}
