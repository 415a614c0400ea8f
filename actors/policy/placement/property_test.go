package placement

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

// world is a random grid with its ground truth, built without the package's
// own helpers so the oracles below are independent of the code under test.
type world struct {
	snap    Snapshot
	unavail map[[2]int]bool
	names   []string
}

func (w world) compatible(set []int) bool {
	for a := range set {
		for b := range set[:a] {
			if w.unavail[[2]int{min(set[a], set[b]), max(set[a], set[b])}] {
				return false
			}
		}
	}
	return true
}

func randomWorld(rng *rand.Rand) world {
	n := 1 + rng.Intn(6)
	w := world{unavail: map[[2]int]bool{}}
	net := newMapNet()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c%d", i)
		w.names = append(w.names, name)
		capa := rng.Intn(41)
		idle := 0
		if capa > 0 {
			idle = rng.Intn(capa + 1)
		}
		if rng.Intn(4) == 0 {
			idle = capa
		}
		w.snap.Clusters = append(w.snap.Clusters, ClusterState{Name: name, Idle: idle, Capacity: capa})
	}
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			if i != j && rng.Intn(5) == 0 {
				w.unavail[[2]int{i, j}] = true
				continue
			}
			net.set(w.names[i], w.names[j], 0.01+rng.Float64()*2, 1+rng.Float64()*600)
		}
	}
	// A storage site outside the grid, reachable from some clusters.
	for i := 0; i < n; i++ {
		if rng.Intn(2) == 0 {
			net.set("store", w.names[i], 1, 1+rng.Float64()*100)
		}
	}
	w.snap.Net = net
	if rng.Intn(8) == 0 && len(w.unavail) == 0 {
		w.snap.Net = nil // no network view: every pair available
	}
	return w
}

func randomRequest(rng *rand.Rand, w world) Request {
	r := Request{JobID: "p"}
	switch rng.Intn(3) {
	case 0:
		r.Type = Flexible
		r.Total = 1 + rng.Intn(90)
	case 1:
		r.Type = NonFixed
		for k := 1 + rng.Intn(4); k > 0; k-- {
			r.Components = append(r.Components, Component{Size: 1 + rng.Intn(24)})
		}
	default:
		r.Type = Fixed
		for k := 1 + rng.Intn(3); k > 0; k-- {
			r.Components = append(r.Components, Component{Size: 1 + rng.Intn(16), Cluster: w.names[rng.Intn(len(w.names))]})
		}
	}
	for k := rng.Intn(3); k > 0; k-- {
		f := File{Name: fmt.Sprint("f", k), Size: rng.Int63n(1e9)}
		for _, c := range append(w.names, "store") {
			if rng.Intn(3) == 0 {
				f.Replicas = append(f.Replicas, c)
			}
		}
		if len(f.Replicas) == 0 {
			f.Replicas = []string{"store"}
		}
		r.Files = append(r.Files, f)
	}
	return r
}

// stageable: every file is held at cluster c or reaches it from a holder.
func stageable(w world, r Request, c string) bool {
	for _, f := range r.Files {
		ok := false
		for _, h := range f.Replicas {
			if h == c {
				ok = true
				break
			}
			if w.snap.Net != nil {
				if bw, known := w.snap.Net.Bandwidth(h, c); known && bw > 0 {
					ok = true
					break
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// rules are the constraints an oracle enforces.
type rules struct {
	capN         int
	pairs, files bool
}

// oracle returns the fewest clusters any valid placement of r uses under
// policy p (0 = none exists), by brute force over all placements.
func oracle(w world, r Request, p string, c rules, idle []int) int {
	n := len(w.names)
	okSet := func(set []int) bool {
		if c.capN > 0 && len(set) > c.capN {
			return false
		}
		if c.pairs && !w.compatible(set) {
			return false
		}
		if c.files && p == "cf" && r.Type != Fixed {
			for _, i := range set {
				if !stageable(w, r, w.names[i]) {
					return false
				}
			}
		}
		return true
	}
	switch {
	case r.Type == Fixed:
		need := map[int]int{}
		var set []int
		for _, comp := range r.Components {
			for i, name := range w.names {
				if name == comp.Cluster {
					if need[i] == 0 {
						set = append(set, i)
					}
					need[i] += comp.Size
				}
			}
		}
		for i, x := range need {
			if idle[i] < x {
				return 0
			}
		}
		if !okSet(set) {
			return 0
		}
		return len(set)
	case r.Type == Flexible && (p == "wf" || p == "cf") || r.Type == NonFixed:
		sizes := []int{r.Total}
		if r.Type == NonFixed {
			sizes = nil
			for _, comp := range r.Components {
				sizes = append(sizes, comp.Size)
			}
		}
		best := 0
		assign := make([]int, len(sizes))
		var rec func(k int)
		rec = func(k int) {
			if k == len(sizes) {
				load := make([]int, n)
				var set []int
				for j, i := range assign {
					if load[i] == 0 {
						set = append(set, i)
					}
					load[i] += sizes[j]
				}
				for i := range load {
					if load[i] > idle[i] {
						return
					}
				}
				if okSet(set) && (best == 0 || len(set) < best) {
					best = len(set)
				}
				return
			}
			for i := 0; i < n; i++ {
				assign[k] = i
				rec(k + 1)
			}
		}
		rec(0)
		return best
	default: // flexible, split anyhow
		best := 0
		for mask := 1; mask < 1<<n; mask++ {
			var set []int
			sum := 0
			for i := 0; i < n; i++ {
				if mask&(1<<i) != 0 {
					set = append(set, i)
					sum += idle[i]
				}
			}
			if sum >= r.Total && okSet(set) && (best == 0 || len(set) < best) {
				best = len(set)
			}
		}
		return best
	}
}

// TestProperties runs every policy on random grids and checks the
// invariants: never more than a cluster's idle nodes, sizes summing to the
// total, never over the cap, never across an unavailable pair; Placed exactly
// when a brute-force search finds a placement, NeverFits exactly when none
// exists on the fully idle grid; CM and FCM use the fewest clusters;
// deterministic.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(20240607))
	iters := 4000
	if testing.Short() {
		iters = 500
	}
	counts := map[string]map[Code]int{}
	reasons := map[string]int{}
	for it := 0; it < iters; it++ {
		w := randomWorld(rng)
		r := randomRequest(rng, w)
		opts := Options{MaxClusters: rng.Intn(4)}
		if rng.Intn(2) == 0 {
			opts.CAMetric = MetricBandwidth
		}
		idle, capa := make([]int, len(w.names)), make([]int, len(w.names))
		for i, c := range w.snap.Clusters {
			idle[i], capa[i] = c.Idle, c.Capacity
		}
		for _, name := range Names() {
			p := mustNew(t, name)
			out := p.Place(r, w.snap, opts)
			if counts[name] == nil {
				counts[name] = map[Code]int{}
			}
			counts[name][out.Code]++
			reasons[out.Reason]++
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("iter %d %s: %s\nrequest %+v\nsnapshot %+v\nunavailable %v opts %+v\noutcome %+v",
					it, name, fmt.Sprintf(format, args...), r, w.snap.Clusters, w.unavail, opts, out)
			}
			if name == "ca" && w.snap.Net == nil {
				if out.Code != Internal || out.Reason != ReasonNoNetwork {
					fail("ca without a network view must be internal")
				}
				continue
			}
			if again := p.Place(r, w.snap, opts); !reflect.DeepEqual(again, out) {
				fail("not deterministic: second run %+v", again)
			}
			all := rules{capN: opts.MaxClusters, pairs: true, files: true}
			now := oracle(w, r, name, all, idle)
			ever := oracle(w, r, name, all, capa)
			switch out.Code {
			case Placed:
				checkPlacement(w, r, opts, idle, out, fail)
				if now == 0 {
					fail("placed although brute force finds nothing")
				}
				if (name == "cm" || name == "fcm") && len(out.Assignments) != now {
					fail("%d clusters used, %d suffice", len(out.Assignments), now)
				}
			case NoFitNow:
				if now != 0 {
					fail("no fit now although brute force places on %d clusters", now)
				}
				if ever == 0 {
					fail("no fit now although nothing fits the idle grid")
				}
				checkReason(w, r, name, opts, idle, out.Reason, ReasonNotEnoughIdle, fail)
			case NeverFits:
				if now != 0 || ever != 0 {
					fail("never fits although brute force places (now %d, idle grid %d)", now, ever)
				}
				checkReason(w, r, name, opts, capa, out.Reason, ReasonExceedsCapacity, fail)
			default:
				fail("unexpected code")
			}
		}
	}
	for _, name := range Names() {
		if counts[name][Placed] == 0 || counts[name][NoFitNow] == 0 || counts[name][NeverFits] == 0 {
			t.Errorf("%s: random cases miss an outcome: %v", name, counts[name])
		}
	}
	for _, want := range []string{ReasonNotEnoughIdle, ReasonExceedsCapacity, ReasonClusterCap, ReasonUnavailablePair, ReasonFilesUnreachable} {
		if reasons[want] == 0 {
			t.Errorf("random cases never produced reason %q: %v", want, reasons)
		}
	}
	if reasons[ReasonSearchLimit] != 0 {
		t.Errorf("search limit reached on small grids %d times", reasons[ReasonSearchLimit])
	}
	t.Logf("outcomes: %v", counts)
	t.Logf("reasons: %v", reasons)
}

// checkReason: the reason names the constraint whose relaxation (alone) lets
// brute force place the job on idle, or noRoom when nothing fits even with
// every constraint relaxed.
func checkReason(w world, r Request, p string, opts Options, idle []int, got, noRoom string, fail func(string, ...any)) {
	all := rules{capN: opts.MaxClusters, pairs: true, files: true}
	if oracle(w, r, p, rules{}, idle) == 0 {
		if got != noRoom {
			fail("reason %q, want %q", got, noRoom)
		}
		return
	}
	var want []string
	noFiles, noPairs, noCap := all, all, all
	noFiles.files, noPairs.pairs, noCap.capN = false, false, 0
	if p == "cf" && r.Type != Fixed && oracle(w, r, p, noFiles, idle) > 0 {
		want = append(want, ReasonFilesUnreachable)
	}
	if oracle(w, r, p, noPairs, idle) > 0 {
		want = append(want, ReasonUnavailablePair)
	}
	if opts.MaxClusters > 0 && oracle(w, r, p, noCap, idle) > 0 {
		want = append(want, ReasonClusterCap)
	}
	if len(want) == 0 {
		want = append(want, ReasonConstraints)
	}
	if got != want[0] {
		fail("reason %q, want %q (candidates %q)", got, want[0], want)
	}
}

func checkPlacement(w world, r Request, opts Options, idle []int, out Outcome, fail func(string, ...any)) {
	if out.Reason != ReasonPlaced {
		fail("placed with reason %q", out.Reason)
	}
	total := r.Total
	if r.Type != Flexible {
		total = 0
		for _, c := range r.Components {
			total += c.Size
		}
	}
	sum := 0
	var set []int
	seen := map[string]bool{}
	for _, a := range out.Assignments {
		i := -1
		for k, n := range w.names {
			if n == a.Cluster {
				i = k
			}
		}
		switch {
		case i < 0:
			fail("assignment to unknown cluster %q", a.Cluster)
		case seen[a.Cluster]:
			fail("cluster %q assigned twice", a.Cluster)
		case a.Size < 1:
			fail("empty assignment on %q", a.Cluster)
		case a.Size > idle[i]:
			fail("%d nodes on %q with %d idle", a.Size, a.Cluster, idle[i])
		}
		seen[a.Cluster] = true
		sum += a.Size
		set = append(set, i)
	}
	if sum != total {
		fail("assignments sum to %d, want %d", sum, total)
	}
	if opts.MaxClusters > 0 && len(set) > opts.MaxClusters {
		fail("%d clusters over cap %d", len(set), opts.MaxClusters)
	}
	if !w.compatible(set) {
		fail("spans an unavailable pair")
	}
	if r.Type == Fixed {
		want := map[string]int{}
		for _, c := range r.Components {
			want[c.Cluster] += c.Size
		}
		for _, a := range out.Assignments {
			if want[a.Cluster] != a.Size {
				fail("fixed request moved: %q got %d, asked %d", a.Cluster, a.Size, want[a.Cluster])
			}
		}
	}
}
