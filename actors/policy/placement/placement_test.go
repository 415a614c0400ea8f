package placement

import (
	"reflect"
	"strings"
	"testing"
)

func mustNew(t *testing.T, name string) Policy {
	t.Helper()
	p, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// abc is three clusters a, b, c with the given idle nodes and capacity 32.
func abc(a, b, c int) Snapshot {
	return snap(uniformNet("a", "b", "c"), cl("a", a, 32), cl("b", b, 32), cl("c", c, 32))
}

// TestSpecExample is the SPEC §3 example: total 24 on three clusters of 16
// idle nodes: FCM makes 16+8 on two clusters; WF with components 8,8,8 makes
// 8+8+8 on three.
func TestSpecExample(t *testing.T) {
	s := abc(16, 16, 16)
	if got := mustNew(t, "fcm").Place(flexible(24), s, Options{}); got.Code != Placed || !reflect.DeepEqual(got.Assignments, as("a", 16, "b", 8)) {
		t.Errorf("fcm: %+v, want 16+8 on a,b", got)
	}
	if got := mustNew(t, "wf").Place(nonFixed(8, 8, 8), s, Options{}); got.Code != Placed || !reflect.DeepEqual(got.Assignments, as("a", 8, "b", 8, "c", 8)) {
		t.Errorf("wf: %+v, want 8+8+8 on a,b,c", got)
	}
}

func TestWorstFit(t *testing.T) {
	runCases(t, WorstFit{}, []tcase{
		{name: "most idle cluster", req: nonFixed(16), snap: abc(20, 30, 25), code: Placed, reason: ReasonPlaced, want: as("b", 16)},
		{name: "tie goes to snapshot order", req: nonFixed(8), snap: abc(30, 30, 0), code: Placed, reason: ReasonPlaced, want: as("a", 8)},
		{name: "largest component first", req: nonFixed(4, 12), snap: abc(20, 15, 0), code: Placed, reason: ReasonPlaced, want: as("a", 12, "b", 4)},
		{name: "components share a cluster and merge", req: nonFixed(16, 8),
			snap: snap(nil, cl("a", 40, 40), cl("b", 10, 40)), code: Placed, reason: ReasonPlaced, want: as("a", 24)},
		{name: "co-allocates although one cluster would do", req: nonFixed(8, 8), snap: abc(20, 18, 0), code: Placed, reason: ReasonPlaced, want: as("a", 8, "b", 8)},
		{name: "flexible is one component", req: flexible(20), snap: abc(16, 24, 0), code: Placed, reason: ReasonPlaced, want: as("b", 20)},
		{name: "flexible never split", req: flexible(24),
			snap: snap(nil, cl("a", 16, 16), cl("b", 16, 16)), code: NeverFits, reason: ReasonExceedsCapacity},
		{name: "greedy dead end repaired", req: nonFixed(10, 6, 6),
			snap: snap(nil, cl("x", 12, 12), cl("y", 11, 11)), code: Placed, reason: ReasonPlaced, want: as("y", 10, "x", 12)},
		{name: "not enough idle now", req: nonFixed(20), snap: abc(10, 10, 10), code: NoFitNow, reason: ReasonNotEnoughIdle},
		{name: "component larger than any cluster", req: nonFixed(50), snap: abc(32, 32, 32), code: NeverFits, reason: ReasonExceedsCapacity},
		{name: "cap 1 keeps the job on one cluster", req: nonFixed(8, 8), snap: abc(16, 16, 16), opts: Options{MaxClusters: 1},
			code: Placed, reason: ReasonPlaced, want: as("a", 16)},
		{name: "cap blocks now", req: nonFixed(8, 8, 8), opts: Options{MaxClusters: 2},
			snap: snap(nil, cl("a", 10, 20), cl("b", 10, 20), cl("c", 10, 20)), code: NoFitNow, reason: ReasonClusterCap},
		{name: "cap blocks forever", req: nonFixed(8, 8, 8), opts: Options{MaxClusters: 2},
			snap: snap(nil, cl("a", 10, 10), cl("b", 10, 10), cl("c", 10, 10)), code: NeverFits, reason: ReasonClusterCap},
		{name: "das3 delft-leiden avoided", req: nonFixed(20, 10), snap: das3([5]int{15, 0, 30, 0, 25}),
			code: Placed, reason: ReasonPlaced, want: as(tud, 20, vu, 10)},
		{name: "das3 only delft and leiden idle", req: nonFixed(20, 20), snap: das3([5]int{0, 0, 30, 0, 25}),
			code: NoFitNow, reason: ReasonUnavailablePair},
	})
}

func TestCloseToFiles(t *testing.T) {
	const gb = int64(1e9)
	file := func(replicas ...string) File { return File{Name: "in", Size: gb, Replicas: replicas} }
	with := func(r Request, fs ...File) Request { r.Files = fs; return r }
	store := das3Net().set("store", uva, 1, 100).set("store", vu, 1, 200)
	runCases(t, CloseToFiles{}, []tcase{
		{name: "replica holder beats more idle", req: with(nonFixed(16), file(uva)), snap: das3([5]int{80, 20, 60, 40, 30}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 16)},
		{name: "least transfer time, tie by idle", req: with(nonFixed(16), file(lu)), snap: das3([5]int{40, 30, 40, 35, 0}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 16)},
		{name: "cluster holding every file", req: with(nonFixed(16), File{"f1", gb, []string{vu, uva}}, File{"f2", gb, []string{uva, mm}}),
			snap: das3([5]int{50, 20, 50, 46, 32}), code: Placed, reason: ReasonPlaced, want: as(uva, 16)},
		{name: "second component to the fastest link", req: with(nonFixed(16, 16), file(uva)), snap: das3([5]int{50, 20, 50, 30, 32}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 16, mm, 16)},
		{name: "no files is worst fit", req: nonFixed(8, 8, 8), snap: abc(16, 16, 16), code: Placed, reason: ReasonPlaced, want: as("a", 8, "b", 8, "c", 8)},
		{name: "flexible is one component", req: with(flexible(16), file(mm)), snap: das3([5]int{50, 41, 50, 20, 32}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 16)},
		{name: "replica at a storage site", req: with(nonFixed(16), file("store")),
			snap: snap(store, cl(uva, 30, 41), cl(vu, 20, 85)), code: Placed, reason: ReasonPlaced, want: as(vu, 16)},
		{name: "files cannot reach the idle cluster now", req: with(nonFixed(16), file(lu)),
			snap: snap(das3Net(), cl(tud, 40, 68), cl(lu, 0, 32)), code: NoFitNow, reason: ReasonFilesUnreachable},
		{name: "files can never reach a cluster big enough", req: with(nonFixed(40), file(lu)),
			snap: snap(das3Net(), cl(tud, 68, 68), cl(lu, 32, 32)), code: NeverFits, reason: ReasonFilesUnreachable},
		{name: "nil net: only holders qualify", req: with(nonFixed(16), file(uva)),
			snap: snap(nil, cl(vu, 40, 85), cl(uva, 20, 41)), code: Placed, reason: ReasonPlaced, want: as(uva, 16)},
		{name: "nil net: file held nowhere in the grid", req: with(nonFixed(16), file(lu)),
			snap: snap(nil, cl(vu, 40, 85), cl(uva, 20, 41)), code: NeverFits, reason: ReasonFilesUnreachable},
	})
}

func TestClusterMin(t *testing.T) {
	runCases(t, ClusterMin{}, []tcase{
		{name: "spec components packed on two", req: nonFixed(8, 8, 8), snap: abc(16, 16, 16), code: Placed, reason: ReasonPlaced, want: as("a", 16, "b", 8)},
		{name: "one cluster when it fits", req: nonFixed(8, 8), snap: abc(16, 20, 0), code: Placed, reason: ReasonPlaced, want: as("b", 16)},
		{name: "fewer clusters than first fit decreasing", req: nonFixed(7, 6, 6),
			snap: snap(nil, cl("a", 12, 12), cl("b", 8, 8), cl("c", 7, 7)), code: Placed, reason: ReasonPlaced, want: as("b", 7, "a", 12)},
		{name: "flexible as fcm", req: flexible(24), snap: abc(16, 16, 16), code: Placed, reason: ReasonPlaced, want: as("a", 16, "b", 8)},
		{name: "das3 delft and leiden only", req: nonFixed(30, 30), snap: das3([5]int{0, 0, 40, 0, 32}), code: NoFitNow, reason: ReasonUnavailablePair},
	})
}

func TestFlexibleClusterMin(t *testing.T) {
	// a is unavailable with b and c; the rest is one fabric.
	hub := newMapNet()
	for _, x := range []string{"a", "b", "c", "d", "e", "f"} {
		for _, y := range []string{"a", "b", "c", "d", "e", "f"} {
			if (x == "a") != (y == "a") && (x == "b" || x == "c" || y == "b" || y == "c") {
				continue
			}
			hub.set(x, y, 0.03, 560)
		}
	}
	runCases(t, FlexibleClusterMin{}, []tcase{
		{name: "spec", req: flexible(24), snap: abc(16, 16, 16), code: Placed, reason: ReasonPlaced, want: as("a", 16, "b", 8)},
		{name: "one cluster", req: flexible(16), snap: abc(16, 16, 16), code: Placed, reason: ReasonPlaced, want: as("a", 16)},
		{name: "decreasing idle order", req: flexible(45), snap: abc(10, 30, 20), code: Placed, reason: ReasonPlaced, want: as("b", 30, "c", 15)},
		{name: "idle runs out", req: flexible(30), snap: snap(nil, cl("a", 10, 32), cl("b", 10, 32)), code: NoFitNow, reason: ReasonNotEnoughIdle},
		{name: "larger than the grid", req: flexible(40), snap: snap(nil, cl("a", 10, 16), cl("b", 10, 16)), code: NeverFits, reason: ReasonExceedsCapacity},
		{name: "cap blocks now", req: flexible(40), opts: Options{MaxClusters: 2}, snap: abc(16, 16, 16), code: NoFitNow, reason: ReasonClusterCap},
		{name: "cap blocks forever", req: flexible(40), opts: Options{MaxClusters: 2},
			snap: snap(nil, cl("a", 16, 16), cl("b", 16, 16), cl("c", 16, 16)), code: NeverFits, reason: ReasonClusterCap},
		{name: "das3 split avoids delft-leiden", req: flexible(50), snap: das3([5]int{10, 5, 30, 5, 25}),
			code: Placed, reason: ReasonPlaced, want: as(tud, 30, vu, 10, uva, 5, mm, 5)},
		{name: "das3 delft+leiden never", req: flexible(80), snap: snap(das3Net(), cl(tud, 68, 68), cl(lu, 32, 32)),
			code: NeverFits, reason: ReasonUnavailablePair},
		{name: "fewest clusters under unavailable pairs", req: flexible(13),
			snap: snap(hub, cl("a", 10, 10), cl("b", 9, 9), cl("c", 9, 9), cl("d", 1, 1), cl("e", 1, 1), cl("f", 1, 1)),
			code: Placed, reason: ReasonPlaced, want: as("b", 9, "c", 4)},
		{name: "non-fixed packed as cm", req: nonFixed(7, 6, 6),
			snap: snap(nil, cl("a", 12, 12), cl("b", 8, 8), cl("c", 7, 7)), code: Placed, reason: ReasonPlaced, want: as("b", 7, "a", 12)},
	})
}

func TestCommAware(t *testing.T) {
	// measured: what the information service reports, deliberately not the
	// configured das3 table (intra latencies differ).
	measured := das3Net().set(vu, vu, 0.08, 561).set(uva, uva, 0.02, 526).set(mm, mm, 0.05, 560).set(lu, lu, 0.04, 530)
	noDelft := func(net Net, idle [4]int) Snapshot {
		return snap(net, cl(vu, idle[0], 85), cl(uva, idle[1], 41), cl(mm, idle[2], 46), cl(lu, idle[3], 32))
	}
	// s is a hub: close to p, q and r, which are far from each other.
	hub := newMapNet()
	for _, x := range []string{"p", "q", "r", "s"} {
		hub.set(x, x, 0.03, 560)
	}
	hub.set("p", "q", 1, 100).set("p", "r", 1, 100).set("q", "r", 1, 100).set("p", "s", 0.1, 100).set("q", "s", 0.1, 100).set("r", "s", 0.1, 100)
	bw := Options{CAMetric: MetricBandwidth}
	runCases(t, CommAware{}, []tcase{
		{name: "measured intra latency decides", req: flexible(30), snap: noDelft(measured, [4]int{50, 35, 46, 32}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 30)},
		{name: "configured table would pick vrije", req: flexible(30), snap: noDelft(das3Net(), [4]int{50, 35, 46, 32}),
			code: Placed, reason: ReasonPlaced, want: as(vu, 30)},
		{name: "first intra cluster that fits", req: flexible(40), snap: noDelft(measured, [4]int{50, 35, 46, 32}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 40)},
		{name: "split by average latency", req: flexible(60), snap: noDelft(das3Net(), [4]int{30, 20, 20, 30}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 20, mm, 20, vu, 20)},
		{name: "split starts at the measured hub", req: flexible(35),
			snap: snap(hub, cl("p", 20, 20), cl("q", 20, 20), cl("r", 20, 20), cl("s", 10, 10)),
			code: Placed, reason: ReasonPlaced, want: as("s", 10, "p", 20, "q", 5)},
		{name: "split skips delft-leiden", req: flexible(45), snap: das3([5]int{5, 5, 30, 5, 20}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 5, mm, 5, vu, 5, tud, 30)},
		{name: "split blocked by delft-leiden", req: flexible(50), snap: das3([5]int{5, 5, 30, 5, 20}),
			code: NoFitNow, reason: ReasonUnavailablePair},
		{name: "split under a cap", req: flexible(60), opts: Options{MaxClusters: 2}, snap: noDelft(das3Net(), [4]int{30, 20, 20, 30}),
			code: Placed, reason: ReasonPlaced, want: as(vu, 30, lu, 30)},
		{name: "bandwidth: best intra bandwidth", req: flexible(30), opts: bw, snap: noDelft(das3Net(), [4]int{20, 40, 40, 32}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 30)},
		{name: "latency: same grid, tie to snapshot order", req: flexible(30), snap: noDelft(das3Net(), [4]int{20, 40, 40, 32}),
			code: Placed, reason: ReasonPlaced, want: as(uva, 30)},
		{name: "bandwidth: split by average bandwidth", req: flexible(50), opts: bw, snap: noDelft(das3Net(), [4]int{20, 20, 20, 20}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 20, uva, 20, vu, 10)},
		{name: "non-fixed whole on one cluster", req: nonFixed(20, 20), snap: noDelft(measured, [4]int{50, 35, 46, 32}),
			code: Placed, reason: ReasonPlaced, want: as(mm, 40)},
		{name: "non-fixed first fit by average", req: nonFixed(25, 10, 25), snap: noDelft(das3Net(), [4]int{30, 20, 20, 30}),
			code: Placed, reason: ReasonPlaced, want: as(vu, 25, lu, 25, uva, 10)},
		{name: "larger than the grid", req: flexible(500), snap: das3([5]int{}), code: NeverFits, reason: ReasonExceedsCapacity},
		{name: "no network view", req: flexible(8), snap: snap(nil, cl("a", 16, 16)), code: Internal, reason: ReasonNoNetwork},
		{name: "unknown metric", req: flexible(8), opts: Options{CAMetric: "hops"}, snap: abc(16, 16, 16), code: Internal, reason: ReasonBadOptions},
	})
}

// TestFixed: fixed requests are placed as the user says, by every policy.
func TestFixed(t *testing.T) {
	idle10 := das3([5]int{10, 10, 10, 10, 10})
	withFile := fixed(Assignment{vu, 8})
	withFile.Files = []File{{Name: "in", Size: 1e9, Replicas: []string{lu}}}
	cases := []tcase{
		{name: "as given", req: fixed(Assignment{vu, 8}, Assignment{uva, 8}), snap: idle10, code: Placed, reason: ReasonPlaced, want: as(vu, 8, uva, 8)},
		{name: "same cluster merged", req: fixed(Assignment{vu, 8}, Assignment{uva, 4}, Assignment{vu, 2}), snap: idle10,
			code: Placed, reason: ReasonPlaced, want: as(vu, 10, uva, 4)},
		{name: "files not checked", req: withFile, snap: idle10, code: Placed, reason: ReasonPlaced, want: as(vu, 8)},
		{name: "unknown cluster", req: fixed(Assignment{"nowhere", 4}), snap: idle10, code: NeverFits, reason: ReasonUnknownCluster},
		{name: "larger than the cluster", req: fixed(Assignment{lu, 40}), snap: idle10, code: NeverFits, reason: ReasonExceedsCapacity},
		{name: "not enough idle now", req: fixed(Assignment{lu, 20}), snap: idle10, code: NoFitNow, reason: ReasonNotEnoughIdle},
		{name: "delft-leiden", req: fixed(Assignment{tud, 8}, Assignment{lu, 8}), snap: idle10, code: NeverFits, reason: ReasonUnavailablePair},
		{name: "over the cap", req: fixed(Assignment{vu, 4}, Assignment{uva, 4}, Assignment{mm, 4}), snap: idle10,
			opts: Options{MaxClusters: 2}, code: NeverFits, reason: ReasonClusterCap},
		{name: "within the cap", req: fixed(Assignment{vu, 4}, Assignment{uva, 4}), snap: idle10,
			opts: Options{MaxClusters: 2}, code: Placed, reason: ReasonPlaced, want: as(vu, 4, uva, 4)},
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) { runCases(t, mustNew(t, name), cases) })
	}
}

// TestMalformed: bad input is Internal (snapshot, options) or NeverFits with
// ReasonInvalidRequest (request), under every policy.
func TestMalformed(t *testing.T) {
	ok := abc(16, 16, 16)
	bad := func(mut func(*Request)) Request { r := nonFixed(8); mut(&r); return r }
	cases := []tcase{
		{name: "duplicate cluster", req: flexible(8), snap: snap(uniformNet("a"), cl("a", 1, 1), cl("a", 1, 1)), code: Internal, reason: ReasonBadSnapshot},
		{name: "idle over capacity", req: flexible(8), snap: snap(uniformNet("a"), cl("a", 9, 8)), code: Internal, reason: ReasonBadSnapshot},
		{name: "negative idle", req: flexible(8), snap: snap(uniformNet("a"), cl("a", -1, 8)), code: Internal, reason: ReasonBadSnapshot},
		{name: "unnamed cluster", req: flexible(8), snap: snap(uniformNet("a"), cl("", 1, 8)), code: Internal, reason: ReasonBadSnapshot},
		{name: "negative cap", req: flexible(8), snap: ok, opts: Options{MaxClusters: -1}, code: Internal, reason: ReasonBadOptions},
		{name: "unknown metric", req: flexible(8), snap: ok, opts: Options{CAMetric: "x"}, code: Internal, reason: ReasonBadOptions},
		{name: "type unset", req: bad(func(r *Request) { r.Type = 0 }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "flexible total 0", req: flexible(0), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "no components", req: bad(func(r *Request) { r.Components = nil }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "component size 0", req: nonFixed(8, 0), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "total mismatch", req: bad(func(r *Request) { r.Total = 9 }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "total matches", req: bad(func(r *Request) { r.Total = 8 }), snap: ok, code: Placed, reason: ReasonPlaced, want: as("a", 8)},
		{name: "fixed without cluster", req: bad(func(r *Request) { r.Type = Fixed }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "file without replica", req: bad(func(r *Request) { r.Files = []File{{Name: "f", Size: 1}} }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "negative file size", req: bad(func(r *Request) { r.Files = []File{{Name: "f", Size: -1, Replicas: []string{"a"}}} }), snap: ok, code: NeverFits, reason: ReasonInvalidRequest},
		{name: "empty grid", req: flexible(1), snap: snap(newMapNet()), code: NeverFits, reason: ReasonExceedsCapacity},
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) { runCases(t, mustNew(t, name), cases) })
	}
}

func TestRegistry(t *testing.T) {
	if got, want := Names(), []string{"ca", "cf", "cm", "fcm", "wf"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range Names() {
		if p := mustNew(t, n); p.Name() != n {
			t.Errorf("New(%q).Name() = %q", n, p.Name())
		}
	}
	_, err := New("bestfit")
	if err == nil || !strings.Contains(err.Error(), "ca, cf, cm, fcm, wf") {
		t.Errorf("New(unknown) error = %v, want it to list the known names", err)
	}
	r := Registry()
	delete(r, "wf")
	if _, ok := Registry()["wf"]; !ok {
		t.Error("Registry() shares its map between calls")
	}
}

func TestParseRequestType(t *testing.T) {
	for _, rt := range []RequestType{Fixed, NonFixed, Flexible} {
		got, err := ParseRequestType(rt.String())
		if err != nil || got != rt {
			t.Errorf("ParseRequestType(%q) = %v, %v", rt.String(), got, err)
		}
	}
	if got, err := ParseRequestType(" Non-Fixed "); err != nil || got != NonFixed {
		t.Errorf("ParseRequestType(\" Non-Fixed \") = %v, %v", got, err)
	}
	if _, err := ParseRequestType("rigid"); err == nil {
		t.Error("ParseRequestType(rigid) accepted")
	}
	if RequestType(0).String() != "RequestType(0)" || Code(0).String() != "Code(0)" {
		t.Error("zero values must not look valid")
	}
	for c, s := range map[Code]string{Placed: "placed", NoFitNow: "no-fit-now", NeverFits: "never-fits", Internal: "internal"} {
		if c.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(c), c.String(), s)
		}
	}
}

// TestSearchLimit: a pathological request stops at the budget and is
// requeued, not failed.
func TestSearchLimit(t *testing.T) {
	// 13 components of 9 on 12 clusters of 10 idle: the node count fits,
	// but each cluster holds one component; every packing gets tried.
	var cs []ClusterState
	for i := 0; i < 12; i++ {
		cs = append(cs, cl(string(rune('a'+i)), 10, 1000))
	}
	sizes := make([]int, 13)
	for i := range sizes {
		sizes[i] = 9
	}
	got := WorstFit{}.Place(nonFixed(sizes...), snap(nil, cs...), Options{})
	if got.Code != NoFitNow || got.Reason != ReasonSearchLimit {
		t.Fatalf("got %v %q, want no-fit-now %q", got.Code, got.Reason, ReasonSearchLimit)
	}
}
