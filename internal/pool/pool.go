// Package pool runs numbered work on a bounded number of goroutines: the
// cells of a study or a sweep, side by side.
package pool

import (
	"context"
	"sync"
)

// Each calls f(i) for every i of items, in their order, at most parallel
// (at least one) at a time, and returns when every call has. Once ctx ends
// it hands out no more items; the calls under way are left to finish (f
// sees ctx itself, if it should stop early).
func Each(ctx context.Context, items []int, parallel int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(parallel, 1), max(len(items), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() == nil { // not one handed out as ctx ended
					f(i)
				}
			}
		}()
	}
feed:
	for _, i := range items {
		select {
		case <-ctx.Done():
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
}

// Upto is 0, 1, ..., n-1: every item of a list of n.
func Upto(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
