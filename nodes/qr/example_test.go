package qr_test

import (
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/nodes/qr"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// The SPEC §6 setting with illustrative figures (the SPEC gives none for
// speeds or the wide area): 4 fast nodes at 600 Mflop/s on 100 Mb/s
// Ethernet, 8 slow nodes at 300 Mflop/s on Myrinet, 10 loading programs on
// the fast nodes. The matrix moves from the 2x2 grid to the 2x4 grid.
func Example() {
	const n = 8000
	ethernet := func(int, int) (time.Duration, float64) { return 50 * time.Microsecond, 12.5e6 }
	myrinet := func(int, int) (time.Duration, float64) { return 10 * time.Microsecond, 160e6 }
	fast, _ := qr.New(qr.Config{N: n, Procs: 4})
	slow, _ := qr.New(qr.Config{N: n, Procs: 8})
	four := []qr.Node{{Speed: 6e8}, {Speed: 6e8}, {Speed: 6e8}, {Speed: 6e8}}
	loaded := make([]qr.Node, 4)
	for i := range loaded {
		loaded[i] = qr.Node{Speed: 6e8, Load: 10}
	}
	eight := make([]qr.Node, 8)
	for i := range eight {
		eight[i] = qr.Node{Speed: 3e8}
	}
	half := len(fast.Phases()) / 2
	unl, _ := fast.Remaining(0, four, ethernet)
	here, _ := fast.Remaining(half, loaded, ethernet)
	there, _ := slow.Remaining(half, eight, myrinet)
	plan, _ := srs.Redistribute(fast.Layout(), slow.Layout(), qr.ElemSize)
	fmt.Printf("N=%d: %d phases; whole run on 4 fast nodes %v\n", n, len(fast.Phases()), unl.Round(time.Second))
	fmt.Printf("from phase %d: loaded here %v, on 8 slow nodes %v\n", half, here.Round(time.Second), there.Round(time.Second))
	fmt.Printf("redistribution 4 -> 8: %d MB, old rank 0 sends %v bytes\n", plan.TotalBytes()/1e6, plan.Bytes()[0])
	// Output:
	// N=8000: 32 phases; whole run on 4 fast nodes 5m21s
	// from phase 16: loaded here 6m21s, on 8 slow nodes 35s
	// redistribution 4 -> 8: 512 MB, old rank 0 sends [66060288 0 63995904 0 0 0 0 0] bytes
}
