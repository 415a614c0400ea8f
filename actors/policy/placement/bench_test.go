package placement

import "testing"

// BenchmarkPlaceDAS3 places a flexible job and a 3-component non-fixed job
// on DAS-3 with scattered idle nodes, under every policy. The flexible job
// has 64 nodes (the CA experiments' largest), split over clusters; WF and
// CF never split, so they get 24.
func BenchmarkPlaceDAS3(b *testing.B) {
	s := das3([5]int{20, 12, 30, 9, 25})
	for _, name := range Names() {
		p, err := New(name)
		if err != nil {
			b.Fatal(err)
		}
		flex := flexible(64)
		if name == "wf" || name == "cf" {
			flex = flexible(24)
		}
		for _, req := range []Request{flex, nonFixed(16, 16, 8)} {
			b.Run(name+"/"+req.Type.String(), func(b *testing.B) {
				for b.Loop() {
					if out := p.Place(req, s, Options{}); out.Code != Placed {
						b.Fatalf("%v %q", out.Code, out.Reason)
					}
				}
			})
		}
	}
}

// BenchmarkNoFitDAS3 is the scheduler's most frequent question on a busy
// grid: a job that does not fit now, which every policy answers by trying
// the snapshot, the grid fully idle and the constraints relaxed.
func BenchmarkNoFitDAS3(b *testing.B) {
	s := das3([5]int{6, 2, 7, 0, 5})
	for _, name := range Names() {
		p, err := New(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, req := range []Request{flexible(32), nonFixed(16, 16)} {
			b.Run(name+"/"+req.Type.String(), func(b *testing.B) {
				for b.Loop() {
					if out := p.Place(req, s, Options{}); out.Code != NoFitNow {
						b.Fatalf("%v %q", out.Code, out.Reason)
					}
				}
			})
		}
	}
}
