package malleability

import "testing"

func TestPow2Helpers(t *testing.T) {
	for _, c := range []struct{ n, floor, ceil int }{{0, 0, 1}, {1, 1, 1}, {2, 2, 2}, {3, 2, 4}, {5, 4, 8}, {16, 16, 16}, {17, 16, 32}} {
		if got := floorPow2(c.n); got != c.floor {
			t.Errorf("floorPow2(%d) = %d, want %d", c.n, got, c.floor)
		}
		if got := ceilPow2(c.n); got != c.ceil {
			t.Errorf("ceilPow2(%d) = %d, want %d", c.n, got, c.ceil)
		}
	}
}
