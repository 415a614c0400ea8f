package placement

import (
	"reflect"
	"testing"
	"time"
)

// DAS-3 cluster names (SPEC §1), as the das3 preset spells them.
const (
	vu  = "vrije"
	uva = "amsterdam"
	tud = "delft"
	mm  = "multimedian"
	lu  = "leiden"
)

// mapNet is a symmetric network view; a pair without an entry is
// unknown/unavailable.
type mapNet struct {
	lat map[[2]string]time.Duration
	bw  map[[2]string]float64
}

func newMapNet() *mapNet {
	return &mapNet{lat: map[[2]string]time.Duration{}, bw: map[[2]string]float64{}}
}

func (n *mapNet) set(a, b string, ms, mbs float64) *mapNet {
	n.lat[[2]string{a, b}] = time.Duration(ms * float64(time.Millisecond))
	n.bw[[2]string{a, b}] = mbs * 1e6
	return n
}

func (n *mapNet) Latency(a, b string) (time.Duration, bool) {
	if v, ok := n.lat[[2]string{a, b}]; ok {
		return v, true
	}
	v, ok := n.lat[[2]string{b, a}]
	return v, ok
}

func (n *mapNet) Bandwidth(a, b string) (float64, bool) {
	if v, ok := n.bw[[2]string{a, b}]; ok {
		return v, true
	}
	v, ok := n.bw[[2]string{b, a}]
	return v, ok
}

// das3Net is the SPEC §1 table (MB/s, ms); Delft-Leiden is unavailable.
func das3Net() *mapNet {
	return newMapNet().
		set(vu, vu, 0.03, 561).set(vu, uva, 0.4, 185).set(vu, tud, 1.15, 45).set(vu, mm, 0.4, 185).set(vu, lu, 1.0, 77).
		set(uva, uva, 0.03, 526).set(uva, tud, 1.1, 53).set(uva, mm, 0.03, 512).set(uva, lu, 0.6, 115).
		set(tud, tud, 0.05, 115).set(tud, mm, 1.45, 10).
		set(mm, mm, 0.03, 560).set(mm, lu, 0.6, 115).
		set(lu, lu, 0.03, 530)
}

// uniformNet gives every pair of names the same link.
func uniformNet(names ...string) *mapNet {
	n := newMapNet()
	for _, a := range names {
		for _, b := range names {
			n.set(a, b, 0.03, 560)
		}
	}
	return n
}

func cl(name string, idle, capacity int) ClusterState {
	return ClusterState{Name: name, Idle: idle, Capacity: capacity}
}

func snap(net Net, cs ...ClusterState) Snapshot { return Snapshot{Clusters: cs, Net: net} }

// das3 is the DAS-3 grid (SPEC §1 node counts) with the given idle nodes in
// the order vrije, amsterdam, delft, multimedian, leiden.
func das3(idle [5]int) Snapshot {
	return snap(das3Net(), cl(vu, idle[0], 85), cl(uva, idle[1], 41), cl(tud, idle[2], 68), cl(mm, idle[3], 46), cl(lu, idle[4], 32))
}

func nonFixed(sizes ...int) Request {
	r := Request{JobID: "j", Type: NonFixed}
	for _, s := range sizes {
		r.Components = append(r.Components, Component{Size: s})
	}
	return r
}

func flexible(total int) Request { return Request{JobID: "j", Type: Flexible, Total: total} }

func fixed(parts ...Assignment) Request {
	r := Request{JobID: "j", Type: Fixed}
	for _, p := range parts {
		r.Components = append(r.Components, Component{Size: p.Size, Cluster: p.Cluster})
	}
	return r
}

func as(pairs ...any) []Assignment {
	var out []Assignment
	for k := 0; k < len(pairs); k += 2 {
		out = append(out, Assignment{Cluster: pairs[k].(string), Size: pairs[k+1].(int)})
	}
	return out
}

type tcase struct {
	name   string
	req    Request
	snap   Snapshot
	opts   Options
	code   Code
	reason string
	want   []Assignment // checked when code is Placed
}

func runCases(t *testing.T, p Policy, cases []tcase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := p.Place(c.req, c.snap, c.opts)
			if got.Code != c.code || got.Reason != c.reason {
				t.Fatalf("%s: got %v %q (%s) %v, want %v %q", p.Name(), got.Code, got.Reason, got.Detail, got.Assignments, c.code, c.reason)
			}
			if c.code == Placed && !reflect.DeepEqual(got.Assignments, c.want) {
				t.Fatalf("%s: assignments %v, want %v", p.Name(), got.Assignments, c.want)
			}
			if c.code != Placed && got.Assignments != nil {
				t.Fatalf("%s: %v outcome carries assignments %v", p.Name(), got.Code, got.Assignments)
			}
		})
	}
}
