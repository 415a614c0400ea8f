package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Every item runs once, never more than parallel at a time, and as many as
// parallel do run at once (the first ones wait until they are all in).
func TestEachBoundsAndCovers(t *testing.T) {
	for _, parallel := range []int{0, 1, 3, 50} {
		var mu sync.Mutex
		seen := map[int]int{}
		var now, most atomic.Int32
		gate := make(chan struct{})
		var open sync.Once
		limit := int32(min(max(parallel, 1), 20))
		Each(context.Background(), Upto(20), parallel, func(i int) {
			n := now.Add(1)
			if n == limit {
				open.Do(func() { close(gate) })
			}
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-gate
			mu.Lock()
			seen[i]++
			mu.Unlock()
			now.Add(-1)
		})
		if len(seen) != 20 {
			t.Errorf("parallel %d: %d items ran, want 20", parallel, len(seen))
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("parallel %d: item %d ran %d times", parallel, i, n)
			}
		}
		if most.Load() != limit {
			t.Errorf("parallel %d: %d at once", parallel, most.Load())
		}
	}
}

// Once ctx ends no item is handed out any more; the one under way finishes.
func TestEachStopsHandingOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ran []int
	Each(ctx, Upto(10), 1, func(i int) {
		ran = append(ran, i)
		if i == 2 {
			cancel()
		}
	})
	if len(ran) != 3 || ran[2] != 2 {
		t.Errorf("ran %v, want items 0-2", ran)
	}
}
