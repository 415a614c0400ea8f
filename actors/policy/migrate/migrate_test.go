package migrate

import (
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

const s = time.Second

func TestDecide(t *testing.T) {
	cases := []struct {
		name              string
		here, there, cost time.Duration
		thr               float64
		migrate           bool
		gain              float64
		reason            string
	}{
		{"gain exactly at threshold stays", 1000 * s, 400 * s, 300 * s, 0.30, false, 0.30, ReasonGainNotAbove},
		{"gain exactly at threshold, hours", 10 * time.Hour, 4 * time.Hour, 3 * time.Hour, 0.30, false, 0.30, ReasonGainNotAbove},
		{"one second more gain moves", 1000 * s, 400 * s, 299 * s, 0.30, true, 0.301, ReasonGainAboveThreshold},
		{"worst-case cost, loaded here", 3000 * s, 1000 * s, 900 * s, 0.30, true, 1100.0 / 3000, ReasonGainAboveThreshold},
		{"worst-case cost eats the gain", 1500 * s, 500 * s, 900 * s, 0.30, false, 100.0 / 1500, ReasonGainNotAbove},
		{"slower there", 1000 * s, 2000 * s, 0, 0.30, false, -1, ReasonGainNotAbove},
		{"nothing remaining", 0, 10 * s, 10 * s, 0.30, false, 0, ReasonNothingRemaining},
		{"threshold 0, no gain", 1000 * s, 500 * s, 500 * s, 0, false, 0, ReasonGainNotAbove},
		{"threshold 0, any gain", 1000 * s, 500 * s, 499 * s, 0, true, 0.001, ReasonGainAboveThreshold},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decide(c.here, c.there, c.cost, c.thr)
			if err != nil {
				t.Fatal(err)
			}
			if d.Migrate != c.migrate || math.Abs(d.Gain-c.gain) > 1e-12 || d.Reason != c.reason {
				t.Fatalf("Decide = %+v, want migrate %v gain %v reason %q", d, c.migrate, c.gain, c.reason)
			}
			if d.Here != c.here || d.There != c.there || d.Cost != c.cost || d.Threshold != c.thr {
				t.Fatalf("Decide does not carry its figures: %+v", d)
			}
		})
	}
}

func TestDecideErrors(t *testing.T) {
	cases := []struct {
		here, there, cost time.Duration
		thr               float64
		want              string
	}{
		{-1, 0, 0, 0.3, "here"},
		{1, -1, 0, 0.3, "there"},
		{1, 0, -1, 0.3, "cost"},
		{1, 0, 0, math.NaN(), "threshold"},
		{1, 0, 0, 1, "threshold"},
		{1, 0, 0, -0.1, "threshold"},
	}
	for _, c := range cases {
		if _, err := Decide(c.here, c.there, c.cost, c.thr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decide(%v, %v, %v, %v) error = %v, want one naming %q", c.here, c.there, c.cost, c.thr, err, c.want)
		}
	}
}

// TestDecideOracle: for random figures, Decide migrates exactly when the
// exact rational gain exceeds the threshold, except within rounding of it.
func TestDecideOracle(t *testing.T) {
	rng := rand.New(rand.NewSource(30))
	for k := 0; k < 20000; k++ {
		here := time.Duration(1 + rng.Int63n(int64(10*time.Hour)))
		there := time.Duration(rng.Int63n(int64(10 * time.Hour)))
		cost := time.Duration(rng.Int63n(int64(time.Hour)))
		thr := float64(rng.Intn(100)) / 100
		d, err := Decide(here, there, cost, thr)
		if err != nil {
			t.Fatal(err)
		}
		gain := new(big.Rat).SetFrac64(int64(here-there-cost), int64(here))
		exact := gain.Cmp(new(big.Rat).SetFloat64(thr)) > 0
		if d.Migrate != exact {
			g, _ := gain.Float64()
			if math.Abs(g-thr) > 1e-15 {
				t.Fatalf("Decide(%v, %v, %v, %v) = %v, exact gain %v", here, there, cost, thr, d.Migrate, g)
			}
		}
	}
}

func TestWorstCase(t *testing.T) {
	c, err := WorstCase{}.Estimate(Move{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Part{
		{"write checkpoints", 40 * s}, {"wait for network information", 90 * s},
		{"get new resource information", 120 * s}, {"new schedule", 80 * s}, {"other", 10 * s},
		{"restart", 60 * s}, {"read checkpoints and redistribute", 500 * s},
	}
	if c.Total != 900*s || !reflect.DeepEqual(c.Parts, want) {
		t.Fatalf("worst case = %v %+v, want 900s %+v", c.Total, c.Parts, want)
	}
	var fixed time.Duration
	for _, p := range FixedParts() {
		fixed += p.Duration
	}
	if fixed != 360*s || len(FixedParts()) != 5 {
		t.Fatalf("fixed parts %+v sum to %v, want 5 parts and 360s", FixedParts(), fixed)
	}
}

func TestPredicted(t *testing.T) {
	ms := time.Millisecond
	// Old 0 sends 100 B to new 0 at 100 B/s and 50 B to new 2 at 50 B/s:
	// 1 ms + 1 s + 1 s. Old 1 sends 200 B to new 1 at 400 B/s: 1 ms + 0.5 s.
	// The idle pair (0, 1) has a huge latency that must not count.
	links := func(i, j int) (time.Duration, float64) {
		switch [2]int{i, j} {
		case [2]int{0, 0}:
			return ms, 100
		case [2]int{0, 2}:
			return ms, 50
		case [2]int{1, 1}:
			return ms, 400
		}
		return time.Hour, 1
	}
	bytes := [][]int64{{100, 0, 50}, {0, 200, 0}}
	cases := []struct {
		name  string
		model Predicted
		mv    Move
		want  []Part
	}{
		{"sender shares its link", Predicted{Fixed: []Part{{PartRestart, 60 * s}}},
			Move{Bytes: bytes, Links: links},
			[]Part{{PartWriteCheckpoints, 0}, {PartRestart, 60 * s}, {PartReadRedistribute, 2*s + ms}}},
		{"disk writes of 150 and 200 bytes at 50 B/s", Predicted{DiskBandwidth: 50},
			Move{Bytes: bytes, Links: links},
			[]Part{{PartWriteCheckpoints, 4 * s}, {PartReadRedistribute, 2*s + ms}}},
		{"unlimited bandwidth: latency only", Predicted{},
			Move{Bytes: bytes, Links: func(int, int) (time.Duration, float64) { return 5 * ms, 0 }},
			[]Part{{PartWriteCheckpoints, 0}, {PartReadRedistribute, 5 * ms}}},
		{"nothing moves", Predicted{}, Move{Bytes: [][]int64{{0, 0}}},
			[]Part{{PartWriteCheckpoints, 0}, {PartReadRedistribute, 0}}},
		{"grid, new nodes idle: placed at once, then the start-up", Predicted{Grid: &Grid{StartupDelay: 10 * s, ScanPeriod: 7 * s}},
			Move{Bytes: bytes, Links: links},
			[]Part{{PartWriteCheckpoints, 0}, {PartSchedule, 0}, {PartRestart, 10 * s}, {PartReadRedistribute, 2*s + ms}}},
		{"grid, new nodes busy: the next scan, then the start-up", Predicted{Grid: &Grid{StartupDelay: 10 * s, ScanPeriod: 7 * s}},
			Move{Bytes: bytes, Links: links, Busy: true},
			[]Part{{PartWriteCheckpoints, 0}, {PartSchedule, 7 * s}, {PartRestart, 10 * s}, {PartReadRedistribute, 2*s + ms}}},
		{"grid without delays: the data alone", Predicted{Grid: &Grid{}},
			Move{Bytes: bytes, Links: links, Busy: true},
			[]Part{{PartWriteCheckpoints, 0}, {PartSchedule, 0}, {PartRestart, 0}, {PartReadRedistribute, 2*s + ms}}},
		{"grid parts before the fixed ones", Predicted{Grid: &Grid{StartupDelay: s}, Fixed: []Part{{PartOther, 3 * s}}},
			Move{Bytes: [][]int64{{0}}},
			[]Part{{PartWriteCheckpoints, 0}, {PartSchedule, 0}, {PartRestart, s}, {PartOther, 3 * s}, {PartReadRedistribute, 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.model.Estimate(c.mv)
			if err != nil {
				t.Fatal(err)
			}
			var total time.Duration
			for _, p := range c.want {
				total += p.Duration
			}
			if !reflect.DeepEqual(got.Parts, c.want) || got.Total != total {
				t.Fatalf("Estimate = %v %+v, want %v %+v", got.Total, got.Parts, total, c.want)
			}
		})
	}
}

func TestPredictedErrors(t *testing.T) {
	link := func(int, int) (time.Duration, float64) { return 0, 1 }
	cases := []struct {
		model Predicted
		mv    Move
		want  string
	}{
		{Predicted{}, Move{Bytes: [][]int64{{1, 2}, {3}}, Links: link}, "Bytes[1]"},
		{Predicted{}, Move{Bytes: [][]int64{{1, -2}}, Links: link}, "Bytes[0][1]"},
		{Predicted{}, Move{Bytes: [][]int64{{1}}}, "Links is nil"},
		{Predicted{DiskBandwidth: -1}, Move{}, "DiskBandwidth"},
		{Predicted{Fixed: []Part{{"x", -s}}}, Move{}, "Fixed[0]"},
		{Predicted{Grid: &Grid{StartupDelay: -s}}, Move{}, "StartupDelay"},
		{Predicted{Grid: &Grid{ScanPeriod: -s}}, Move{}, "ScanPeriod"},
		{Predicted{}, Move{Bytes: [][]int64{{1}}, Links: func(int, int) (time.Duration, float64) { return -1, 1 }}, "link (0, 0)"},
	}
	for _, c := range cases {
		if _, err := c.model.Estimate(c.mv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Estimate(%+v) error = %v, want one naming %q", c.mv, err, c.want)
		}
	}
}

// TestPredictedScenario: the SPEC §6 migration from 4 to 8 nodes across a
// wide-area link, the byte matrix a block-cyclic 2x2 -> 2x4 plan of an
// 8000 x 8001 matrix would give (each old rank sends an eighth of its
// 128 MB to each new rank). At 1 MB/s per old node across the wide area
// each old node needs 128 s, plus latency. The registry's model adds what
// the grid it is given pays: its 10 s start-up, and its 10 s scan period
// when the new nodes are busy; the same data part with SPEC §6's 360 s of
// fixed parts is its testbed's prediction.
func TestPredictedScenario(t *testing.T) {
	const local = int64(8000 * 8001 * 8 / 4)
	b := make([][]int64, 4)
	for i := range b {
		b[i] = make([]int64, 8)
		for j := range b[i] {
			b[i][j] = local / 8
		}
	}
	wan := func(int, int) (time.Duration, float64) { return 20 * time.Millisecond, 1e6 }
	data := 20*time.Millisecond + time.Duration(local/8*8)*time.Second/1e6
	m, err := NewCostModel("predicted", Grid{StartupDelay: 10 * s, ScanPeriod: 10 * s})
	if err != nil {
		t.Fatal(err)
	}
	spec := Predicted{Fixed: FixedParts()}
	for _, c := range []struct {
		name  string
		model CostModel
		busy  bool
		want  time.Duration
	}{
		{"grid, new nodes idle", m, false, 10*s + data},
		{"grid, new nodes busy", m, true, 20*s + data},
		{"SPEC's testbed", spec, false, 360*s + data},
	} {
		got, err := c.model.Estimate(Move{Bytes: b, Links: wan, Busy: c.busy})
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Total - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: predicted cost %v, want %v", c.name, got.Total, c.want)
		}
	}
	// Twice the bandwidth: the data part halves, the rest stays.
	fast := func(int, int) (time.Duration, float64) { return 20 * time.Millisecond, 2e6 }
	c1, _ := m.Estimate(Move{Bytes: b, Links: wan})
	c2, _ := m.Estimate(Move{Bytes: b, Links: fast})
	if d := c1.Total - c2.Total; d < 64*s-time.Second || d > 64*s+time.Second {
		t.Fatalf("doubling the bandwidth saves %v, want about 64s", d)
	}
}

func TestRegistry(t *testing.T) {
	if got := CostModelNames(); !reflect.DeepEqual(got, []string{"predicted", "worst-case"}) {
		t.Fatalf("names = %v", got)
	}
	for _, n := range CostModelNames() {
		m, err := NewCostModel(n, Grid{})
		if err != nil || m.Name() != n {
			t.Fatalf("NewCostModel(%q) = %v, %v", n, m, err)
		}
	}
	// The worst case is SPEC §6's constant whatever the grid.
	w, err := NewCostModel("worst-case", Grid{StartupDelay: 10 * s, ScanPeriod: 10 * s})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := w.Estimate(Move{Busy: true}); err != nil || c.Total != 900*s {
		t.Fatalf("worst case on a grid = %v, %v; want 900s", c.Total, err)
	}
	if _, err := NewCostModel("cheap", Grid{}); err == nil || !strings.Contains(err.Error(), "worst-case") {
		t.Fatalf("unknown model error = %v", err)
	}
}

func TestOpportunistic(t *testing.T) {
	cases := []struct {
		name   string
		cands  []Candidate
		index  int
		reason string
	}{
		{"largest gain wins", []Candidate{
			{"a", 1000 * s, 700 * s, 100 * s}, // 0.2
			{"b", 1000 * s, 400 * s, 100 * s}, // 0.5
			{"c", 1000 * s, 500 * s, 100 * s}, // 0.4
		}, 1, ReasonBestGain},
		{"equal gains: first listed", []Candidate{
			{"a", 1000 * s, 400 * s, 100 * s},
			{"b", 2000 * s, 800 * s, 200 * s},
		}, 0, ReasonBestGain},
		{"gain exactly at threshold: none", []Candidate{
			{"a", 1000 * s, 600 * s, 100 * s},
		}, -1, ReasonNoJobGains},
		{"best gain among movers only", []Candidate{
			{"done", 0, 0, 0},
			{"a", 1000 * s, 500 * s, 100 * s}, // 0.4
		}, 1, ReasonBestGain},
		{"no running job", nil, -1, ReasonNoCandidates},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := Opportunistic(c.cands, DefaultThreshold)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Index != c.index || ch.Reason != c.reason || len(ch.Decisions) != len(c.cands) {
				t.Fatalf("choice = %+v, want index %d reason %q", ch, c.index, c.reason)
			}
			if c.index >= 0 && (ch.Job != c.cands[c.index].Job || !ch.Decision.Migrate) {
				t.Fatalf("choice = %+v does not name job %q", ch, c.cands[c.index].Job)
			}
		})
	}
	if _, err := Opportunistic([]Candidate{{"a", s, s, 0}, {"bad", -s, 0, 0}}, 0.3); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("malformed candidate error = %v", err)
	}
}

// TestOpportunisticOracle compares with a brute force over random
// candidates: the chosen job has the largest gain above the threshold,
// the first such; none when no gain exceeds it.
func TestOpportunisticOracle(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for k := 0; k < 2000; k++ {
		var cands []Candidate
		for n := rng.Intn(6); n > 0; n-- {
			cands = append(cands, Candidate{Job: "j", Here: time.Duration(rng.Intn(10)) * 100 * s,
				There: time.Duration(rng.Intn(10)) * 100 * s, Cost: time.Duration(rng.Intn(5)) * 100 * s})
		}
		ch, err := Opportunistic(cands, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		best, bestGain := -1, 0.0
		for i, c := range cands {
			if c.Here == 0 {
				continue
			}
			g := float64(c.Here-c.There-c.Cost) / float64(c.Here)
			if g > 0.3 && (best < 0 || g > bestGain) {
				best, bestGain = i, g
			}
		}
		if ch.Index != best {
			t.Fatalf("%+v: chose %d, oracle %d", cands, ch.Index, best)
		}
	}
}
