package qr

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func free(int, int) (time.Duration, float64) { return 0, 0 }

func mustNew(t *testing.T, cfg Config) *Model {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nodes(p int, speed float64, load int) []Node {
	out := make([]Node, p)
	for i := range out {
		out[i] = Node{Speed: speed, Load: load}
	}
	return out
}

func TestGrid(t *testing.T) {
	cases := map[int][2]int{1: {1, 1}, 2: {1, 2}, 3: {1, 3}, 4: {2, 2}, 6: {2, 3}, 8: {2, 4}, 12: {3, 4}, 16: {4, 4}, 7: {1, 7}, 24: {4, 6}}
	for p, want := range cases {
		if r, c := Grid(p); r != want[0] || c != want[1] {
			t.Errorf("Grid(%d) = %dx%d, want %dx%d", p, r, c, want[0], want[1])
		}
	}
}

func TestTotalFlops(t *testing.T) {
	for _, n := range []int{1, 4, 63, 64, 65, 1000, 8000, 12000} {
		for _, p := range []int{1, 4, 6, 8} {
			m := mustNew(t, Config{N: n, Procs: p})
			var sum int64
			for _, ph := range m.Phases() {
				var procs int64
				for _, f := range ph.ProcFlops {
					procs += f
				}
				if procs != ph.Flops {
					t.Fatalf("N=%d p=%d phase %d: processes' flops %d, phase %d", n, p, ph.Index, procs, ph.Flops)
				}
				sum += ph.Flops
			}
			// Exact: sum over r = 1..N of 4r² + 3r.
			var want int64
			for r := int64(1); r <= int64(n); r++ {
				want += 4*r*r + 3*r
			}
			if sum != want || TotalFlops(n) != want {
				t.Fatalf("N=%d p=%d: phases sum to %d, TotalFlops %d, want %d", n, p, sum, TotalFlops(n), want)
			}
			// 4/3 N³ within the stated lower-order terms 7/2 N² + 13/6 N.
			lead := 4.0 / 3 * math.Pow(float64(n), 3)
			if diff := float64(sum) - lead; diff < 0 || diff > 3.5*float64(n*n)+13.0/6*float64(n)+1 {
				t.Fatalf("N=%d: total %d - 4/3 N³ = %g, beyond the lower-order terms", n, sum, diff)
			}
		}
	}
}

func TestPhases(t *testing.T) {
	m := mustNew(t, Config{N: 8000, Procs: 4})
	if got := len(m.Phases()); got != 32 { // 125 panels of 64, 4 per phase
		t.Fatalf("N=8000: %d phases, want 32", got)
	}
	next := 0
	for i, ph := range m.Phases() {
		if ph.Index != i || ph.FirstCol != next || ph.EndCol <= ph.FirstCol {
			t.Fatalf("phase %d: %+v does not follow column %d", i, ph, next)
		}
		next = ph.EndCol
		if i > 0 && ph.Flops >= m.Phases()[i-1].Flops {
			t.Fatalf("phase %d does not shrink: %d flops after %d", i, ph.Flops, m.Phases()[i-1].Flops)
		}
	}
	if next != 8000 {
		t.Fatalf("phases end at column %d", next)
	}
	if len(mustNew(t, Config{N: 12000, Procs: 8}).Phases()) > MaxPhases {
		t.Fatal("more than MaxPhases phases by default")
	}
}

// TestHandCounts: N=4 on a 1x2 grid with NB=1 (columns dealt out in turn,
// column 4 the right-hand side).
//
//	column 0: 4 rows; trailing columns 1..4 -> pc0 {2,4}, pc1 {1,3};
//	          pc0 = 4·4·2 + 3·4 (owns column 0) = 44, pc1 = 4·4·2 = 32
//	column 1: 3 rows; trailing 2..4 -> pc0 {2,4}, pc1 {3};
//	          pc0 = 4·3·2 = 24, pc1 = 4·3·1 + 3·3 = 21
func TestHandCounts(t *testing.T) {
	m := mustNew(t, Config{N: 4, NB: 1, Procs: 2, PanelsPerPhase: 1})
	if got := m.Phases()[0].ProcFlops; !reflect.DeepEqual(got, []int64{44, 32}) {
		t.Errorf("phase 0 flops = %v, want [44 32]", got)
	}
	if got := m.Phases()[1].ProcFlops; !reflect.DeepEqual(got, []int64{24, 21}) {
		t.Errorf("phase 1 flops = %v, want [24 21]", got)
	}
	if ph := m.Phases()[0]; ph.Bcast[0].Msgs != 1 || ph.Reduce[0].Msgs != 0 {
		t.Errorf("1x2 grid: bcast %+v (want 1 message), reduce %+v (want none)", ph.Bcast[0], ph.Reduce[0])
	}
}

// TestHandComm: N=4, NB=2 on 2x2, first panel (columns 0, 1).
//
//	Panel (process column 0): column 0 all-reduces 8 and 8 bytes, column 1
//	  8 bytes: 3 collectives x 2 messages, 2 x 24 = 48 bytes.
//	Bcast: each process row holds 2 of rows 0..3: V 2·2·8 = 32 + T 3·8 = 24:
//	  1 message of 56 bytes.
//	Reduce: trailing columns 2, 3 (pc1) and 4 (pc0): W is 2·cols·8 bytes,
//	  2 messages: pc0 2 x 16 = 32, pc1 2 x 32 = 64.
//
// Links of 1 ms and 1000 B/s, computation negligible: 6 ms + 48 ms, plus
// 1 ms + 56 ms, plus 2 ms + 64 ms = 177 ms.
func TestHandComm(t *testing.T) {
	m := mustNew(t, Config{N: 4, NB: 2, Procs: 4, PanelsPerPhase: 1})
	ph := m.Phases()[0]
	want := Phase{
		Panel:  []Comm{{3, 6, 48}, {}},
		Bcast:  []Comm{{1, 1, 56}, {1, 1, 56}},
		Reduce: []Comm{{1, 2, 32}, {1, 2, 64}},
	}
	if !reflect.DeepEqual(ph.Panel, want.Panel) || !reflect.DeepEqual(ph.Bcast, want.Bcast) || !reflect.DeepEqual(ph.Reduce, want.Reduce) {
		t.Fatalf("comm = panel %v bcast %v reduce %v, want %v %v %v", ph.Panel, ph.Bcast, ph.Reduce, want.Panel, want.Bcast, want.Reduce)
	}
	for rank, want := range []Comm{{5, 9, 136}, {2, 3, 120}, {5, 9, 136}, {2, 3, 120}} {
		if got, err := m.ProcComm(0, rank); err != nil || got != want {
			t.Errorf("rank %d: ProcComm = %+v, %v, want %+v", rank, got, err, want)
		}
	}
	if _, err := m.ProcComm(0, 4); err == nil {
		t.Error("ProcComm accepted rank 4 of 4")
	}
	slow := func(int, int) (time.Duration, float64) { return time.Millisecond, 1000 }
	ts, err := m.Predict(0, 1, nodes(4, 1e30, 0), slow)
	if err != nil {
		t.Fatal(err)
	}
	if ts[0] != 177*time.Millisecond {
		t.Fatalf("phase 0 = %v, want 177ms", ts[0])
	}
}

func TestPredictScaling(t *testing.T) {
	m := mustNew(t, Config{N: 4000, Procs: 4})
	all := len(m.Phases())
	base, err := m.Predict(0, all, nodes(4, 1e9, 0), free)
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := m.Predict(0, all, nodes(4, 2e9, 0), free)
	loaded, _ := m.Predict(0, all, nodes(4, 1e9, 10), free)
	oneLoaded := nodes(4, 1e9, 0)
	oneLoaded[2].Load = 10
	one, _ := m.Predict(0, all, oneLoaded, free)
	var oneSum, loadedSum time.Duration
	for i := range base {
		if d := base[i] - 2*fast[i]; d < -2 || d > 2 {
			t.Fatalf("phase %d: twice the speed gives %v, want half of %v", i, fast[i], base[i])
		}
		if d := loaded[i] - 11*base[i]; d < -11 || d > 11 {
			t.Fatalf("phase %d: 10 loading programs give %v, want 11 x %v", i, loaded[i], base[i])
		}
		if one[i] > loaded[i] || one[i] < base[i] {
			t.Fatalf("phase %d: one loaded node gives %v, outside [%v, %v]", i, one[i], base[i], loaded[i])
		}
		oneSum += one[i]
		loadedSum += loaded[i]
	}
	// Slowest pace: one loaded node slows the run almost as much as four
	// (its share of the work is a quarter, give or take the uneven tail).
	if float64(oneSum) < 0.95*float64(loadedSum) {
		t.Fatalf("one loaded node: %v, all loaded: %v", oneSum, loadedSum)
	}
	// Whole run on 1e9 flops/s per node: (4/3 N³)/4 s plus lower terms.
	total, _ := m.Remaining(0, nodes(4, 1e9, 0), free)
	if got, want := total.Seconds(), float64(TotalFlops(4000))/4/1e9; got < want || got > 1.05*want {
		t.Fatalf("N=4000 on 4: %v, want about %.1fs", total, want)
	}
	// Four times the processes: about a quarter of the computation.
	m16 := mustNew(t, Config{N: 4000, Procs: 16})
	t16, _ := m16.Remaining(0, nodes(16, 1e9, 0), free)
	if r := float64(total) / float64(t16); r < 3.6 || r > 4.05 {
		t.Fatalf("16 processes are %.2fx faster than 4, want about 4", r)
	}
}

func TestRemainingSumsPhases(t *testing.T) {
	m := mustNew(t, Config{N: 3000, Procs: 8})
	wan := func(i, j int) (time.Duration, float64) {
		if (i < 4) != (j < 4) {
			return 5 * time.Millisecond, 1.25e6
		}
		return 100 * time.Microsecond, 12.5e6
	}
	ns := nodes(8, 5e8, 0)
	ns[5].Load = 3
	ts, err := m.Predict(0, len(m.Phases()), ns, wan)
	if err != nil {
		t.Fatal(err)
	}
	var sum, prev time.Duration
	for k := len(ts) - 1; k >= 0; k-- {
		sum += ts[k]
		r, err := m.Remaining(k, ns, wan)
		if err != nil {
			t.Fatal(err)
		}
		if r != sum || r <= prev {
			t.Fatalf("Remaining(%d) = %v, want the sum %v (and more than Remaining(%d) = %v)", k, r, sum, k+1, prev)
		}
		prev = r
	}
	if r, _ := m.Remaining(len(ts), ns, wan); r != 0 {
		t.Fatalf("Remaining(end) = %v, want 0", r)
	}
	// Slower links cost time; free links cost none.
	noComm, _ := m.Remaining(0, ns, free)
	if noComm >= sum {
		t.Fatalf("free links %v not faster than the wide area %v", noComm, sum)
	}
}

func TestDataBytes(t *testing.T) {
	m := mustNew(t, Config{N: 1000, Procs: 4})
	var sum int64
	for _, b := range m.DataBytes() {
		sum += b
	}
	if sum != 1000*1001*8 {
		t.Fatalf("data %d bytes, want %d", sum, 1000*1001*8)
	}
	if d := m.Layout(); d.Row.Procs != 2 || d.Col.Procs != 2 || d.Row.NB != 64 {
		t.Fatalf("layout %v, want 2x2 block-cyclic(64)", d)
	}
}

func TestErrorsNameTheInput(t *testing.T) {
	for _, cfg := range []Config{{N: 0, Procs: 1}, {N: 5, Procs: 0}, {N: 5, NB: -1, Procs: 1}, {N: 5, Procs: 1, PanelsPerPhase: -2}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	m := mustNew(t, Config{N: 100, Procs: 2})
	if _, err := m.Predict(0, 1, nodes(3, 1, 0), free); err == nil {
		t.Error("3 nodes for 2 processes accepted")
	}
	if _, err := m.Predict(0, 1, []Node{{Speed: 1}, {Speed: 0}}, free); err == nil {
		t.Error("speed 0 accepted")
	}
	if _, err := m.Predict(1, 0, nodes(2, 1, 0), free); err == nil {
		t.Error("reversed range accepted")
	}
	if _, err := m.Remaining(0, nodes(2, 1, 0), nil); err == nil {
		t.Error("nil links accepted")
	}
}
