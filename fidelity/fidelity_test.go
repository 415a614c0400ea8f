package fidelity

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 1000; i++ {
		h.Add(float64(i) / 1000) // 0.001 .. 1
	}
	h.Add(-0.5)
	if h.Count() != 1001 || h.Early() != 1 {
		t.Fatalf("count %d early %d", h.Count(), h.Early())
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.5}, {0.99, 0.99}, {1, 1}} {
		got := h.Quantile(c.q)
		if got < c.want*0.999 || got > c.want*growth*1.001 {
			t.Errorf("q%.2f = %g, want %g within 2%%", c.q, got, c.want)
		}
	}
	if h.Max() != 1 {
		t.Errorf("max %g", h.Max())
	}
	var empty Hist
	if empty.Quantile(0.99) != 0 {
		t.Error("empty quantile not 0")
	}
}

func TestHistMergeAndJSON(t *testing.T) {
	var a, b Hist
	for i := 0; i < 100; i++ {
		a.Add(0.01)
		b.Add(0.2)
	}
	a.Merge(&b)
	if a.Count() != 200 || a.Quantile(0.99) < 0.19 || a.Quantile(0.25) > 0.0103 {
		t.Fatalf("merged: n %d p99 %g p25 %g", a.Count(), a.Quantile(0.99), a.Quantile(0.25))
	}
	js, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Hist
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Summary() != a.Summary() {
		t.Fatalf("round trip %+v != %+v", back.Summary(), a.Summary())
	}
	if err := json.Unmarshal([]byte(`{"n":3,"max":1,"b":[[1,1]]}`), &back); err == nil {
		t.Fatal("a histogram whose counts disagree was accepted")
	}
	if err := json.Unmarshal([]byte(`{"n":1,"max":1,"b":[[100000,1]]}`), &back); err == nil {
		t.Fatal("a bucket out of range was accepted")
	}
}

func TestLinkModel(t *testing.T) {
	m := NewLinkModel(map[string]Target{"b": {Latency: time.Millisecond, Rate: 1e6}, "inf": {Latency: 10 * time.Microsecond}})
	// 1000 bytes at 1 MB/s: 1 ms, then 1 ms latency.
	due, back, ok := m.Stamp("b", 1000, 0)
	if !ok || back || due != int64(2*time.Millisecond) {
		t.Fatalf("first frame due %d backlogged %v ok %v", due, back, ok)
	}
	// Sent at 0.5 ms: queues behind the first (free at 1 ms) for 0.5 ms
	// and is 1 ms on the wire itself: its arrival measures the rate.
	due, back, _ = m.Stamp("b", 1000, int64(500*time.Microsecond))
	if !back || due != int64(3*time.Millisecond) {
		t.Fatalf("second frame due %d backlogged %v", due, back)
	}
	// 10 bytes sent at 2 ms wait 0 ms behind the second (free at 2 ms):
	// an idle link.
	if _, back, _ = m.Stamp("b", 10, int64(2*time.Millisecond)); back {
		t.Fatal("a frame on a link free at its send time counted as backlogged")
	}
	// 10 bytes right behind another 10: a 10 µs wait and 10 µs on the wire
	// against a 1 ms latency: the latency sets its arrival, not the rate.
	now := int64(10 * time.Millisecond)
	m.Stamp("b", 10, now)
	if _, back, _ = m.Stamp("b", 10, now); back {
		t.Fatal("a short wait behind a small frame counted as a rate measurement")
	}
	due, back, _ = m.Stamp("inf", 1<<20, 5)
	if back || due != 5+int64(10*time.Microsecond) {
		t.Fatalf("unlimited link due %d backlogged %v", due, back)
	}
	if _, _, ok := m.Stamp("nowhere", 1, 0); ok {
		t.Fatal("unknown destination has a model")
	}
	var none *LinkModel
	if _, _, ok := none.Stamp("b", 1, 0); ok {
		t.Fatal("nil model stamped")
	}
}

// A deliberately slowed computation and a deliberately late link must each
// be caught; an on-time run must pass.
func TestVerdict(t *testing.T) {
	onTime := func() *Probe {
		p := NewProbe()
		for i := 0; i < 1000; i++ {
			p.Compute(10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond+50*time.Microsecond) // 0.5 % late
			p.Frame("a>b", 0, 1000, 1020, false)                                                         // 2 % late
			p.Frame("a>b", 0, 1000, 1010, true)                                                          // 1 % late
		}
		return p
	}
	good := onTime().Snapshot()
	if f := Judge(&good, DefaultThresholds()); f.Verdict != Faithful {
		t.Fatalf("on-time run judged %s: %v", f.Verdict, f.Reasons)
	}

	slow := onTime()
	for i := 0; i < 100; i++ { // 10 % of the calls take 20 % longer
		slow.Compute(10*time.Millisecond, 10*time.Millisecond, 12*time.Millisecond)
	}
	s := slow.Snapshot()
	f := Judge(&s, DefaultThresholds())
	if f.Verdict != Degraded || !strings.Contains(strings.Join(f.Reasons, ";"), "compute") {
		t.Fatalf("slowed compute judged %s: %v", f.Verdict, f.Reasons)
	}
	if math.Abs(s.Stretch()-(1000*10.05+100*12)/(1100*10)) > 1e-9 {
		t.Errorf("stretch %g", s.Stretch())
	}

	late := onTime()
	for i := 0; i < 100; i++ { // frames 50 % late
		late.Frame("a>c", 0, 1000, 1500, false)
	}
	s = late.Snapshot()
	f = Judge(&s, DefaultThresholds())
	if f.Verdict != Degraded || !strings.Contains(strings.Join(f.Reasons, ";"), "link delay") {
		t.Fatalf("late link judged %s: %v", f.Verdict, f.Reasons)
	}
	rep := NewReport(map[string]*Stats{"j1": &good, "j2": &s}, nil, DefaultThresholds())
	if rep.Verdict != Degraded || rep.Degraded != 1 || rep.WorstJobs[0].Job != "j2" || rep.WorstLinks[0].Pair != "a>c" {
		t.Fatalf("report %+v", rep)
	}

	var nothing Stats
	if f := Judge(&nothing, DefaultThresholds()); f.Verdict != Unmeasured {
		t.Fatalf("empty stats judged %s", f.Verdict)
	}
}

// A link that delivers faster than its latency and rate is caught as one
// that delivers slower is: frames arriving half their target early, 5 % of
// them, make the run degraded with an "early" reason, and the worst link
// is that pair; a handful of slightly early frames (a delay line's release
// within its coalescing window) do not.
func TestEarlyFramesCaught(t *testing.T) {
	mk := func(early int, by int64) Stats {
		p := NewProbe()
		for i := 0; i < 2000; i++ {
			p.Frame("a>b", 0, 1000, 1010, false) // 1 % late
		}
		for i := 0; i < early; i++ {
			p.Frame("a>c", 0, 1000, 1000-by, i%2 == 0)
		}
		return p.Snapshot()
	}
	fast := mk(105, 500)
	f := Judge(&fast, DefaultThresholds())
	if f.Verdict != Degraded || !strings.Contains(strings.Join(f.Reasons, ";"), "early") {
		t.Fatalf("early link judged %s: %v", f.Verdict, f.Reasons)
	}
	if f.Early.N != 105 || f.Early.P99 < 0.45 || f.Early.P50 != 0 {
		t.Fatalf("early figures %+v: want 105 early, p99 about 50 %%, p50 0", f.Early)
	}
	rep := NewReport(map[string]*Stats{"j1": &fast}, nil, DefaultThresholds())
	if rep.WorstLinks[0].Pair != "a>c" || rep.WorstLinks[0].Early.P99 < 0.45 {
		t.Fatalf("worst links %+v", rep.WorstLinks)
	}
	nearly := mk(105, 20) // 2 % early
	if f := Judge(&nearly, DefaultThresholds()); f.Verdict != Faithful {
		t.Fatalf("frames 2 %% early judged %s: %v", f.Verdict, f.Reasons)
	}
	few := mk(5, 500) // five frames: a tail the judged quantile leaves above it
	if f := Judge(&few, DefaultThresholds()); f.Verdict != Faithful {
		t.Fatalf("five early frames judged %s: %v", f.Verdict, f.Reasons)
	}
}

// QuantileAmong reads a histogram of the largest values among more that
// were not recorded (zeros).
func TestQuantileAmong(t *testing.T) {
	var h Hist
	for i := 1; i <= 10; i++ {
		h.Add(float64(i) / 10)
	}
	for _, c := range []struct {
		q     float64
		total uint64
		want  float64
	}{
		{0.5, 100, 0}, {0.9, 100, 0}, {0.95, 100, 0.5}, {1, 100, 1}, {0.5, 10, 0.5}, {0.5, 5, 0.5},
	} {
		if got := h.QuantileAmong(c.q, c.total); math.Abs(got-c.want) > 0.02*c.want+1e-12 {
			t.Errorf("q %g among %d: %g, want %g", c.q, c.total, got, c.want)
		}
	}
}

// A job of few frames is judged on its tenth-worst, not on its worst: one
// stall does not make it degraded, ten late frames do; a run of thousands
// of frames is judged on its p99.
func TestJudgedQuantile(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want float64
	}{{5, 0.5}, {19, 0.5}, {20, 9.5 / 20}, {160, 149.5 / 160}, {1000, 989.5 / 1000}, {1050, 0.99}, {100000, 0.99}} {
		if got := JudgedQuantile(c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("JudgedQuantile(%d) = %g, want %g", c.n, got, c.want)
		}
	}
	job := func(late int) Figures {
		p := NewProbe()
		for i := 0; i < 160; i++ {
			due := int64(1010)
			if i < late {
				due = 2000 // 100 % late
			}
			p.Frame("a>b", 0, 1000, due, false)
		}
		s := p.Snapshot()
		return Judge(&s, DefaultThresholds())
	}
	if f := job(1); f.Verdict != Faithful || f.Link.Max < 0.9 {
		t.Errorf("one stall in 160 frames: %s %v (worst %g)", f.Verdict, f.Reasons, f.Link.Max)
	}
	if f := job(10); f.Verdict != Faithful {
		t.Errorf("10 late frames in 160: %s %v", f.Verdict, f.Reasons)
	}
	f := job(11)
	if f.Verdict != Degraded || !strings.Contains(strings.Join(f.Reasons, ";"), "(10 of 160 above it)") {
		t.Errorf("11 late frames in 160: %s %v", f.Verdict, f.Reasons)
	}
}

func TestCompensationCounted(t *testing.T) {
	p := NewProbe()
	p.Compute(10*time.Millisecond, 10*time.Millisecond, 11*time.Millisecond)
	p.Compute(10*time.Millisecond, 9*time.Millisecond, 9*time.Millisecond) // pays back 1 ms
	s := p.Snapshot()
	if s.Compensated != time.Millisecond || s.Stretch() != 1 {
		t.Fatalf("compensated %s stretch %g", s.Compensated, s.Stretch())
	}
}

func TestChoose(t *testing.T) {
	capa := Capacity{MsgsPerSec: 100e3, BytesPerSec: 1e9, Floor: 20 * time.Microsecond}
	cases := []struct {
		name string
		d    Demand
		want float64
		why  string
	}{
		{"idle", Demand{MsgsPerSec: 10, BytesPerSec: 10, MinLatency: time.Second}, 1, "real time"},
		{"messages", Demand{MsgsPerSec: 1e6, BytesPerSec: 1e6, MinLatency: time.Second}, 20, "message rate"},
		{"bytes", Demand{MsgsPerSec: 1, BytesPerSec: 9e9, MinLatency: time.Second}, 20, "byte rate"},              // 18 -> 20
		{"floor", Demand{MsgsPerSec: 1, BytesPerSec: 1, MinLatency: 30 * time.Microsecond}, 15, "lateness floor"}, // 13.3 -> 15
		{"exact rung", Demand{MsgsPerSec: 150e3, MinLatency: time.Second}, 3, "message rate"},
		{"beyond the cap", Demand{MsgsPerSec: 1e12, MinLatency: time.Second}, MaxAuto, "expect a degraded run"},
		// 62 messages at 100,000/s take 620 µs, 3.5 times that in a run
		// (BurstMargin), plus the 20 µs floor, against 10 % of 1 ms:
		// 21.9 -> 25.
		{"burst", Demand{MsgsPerSec: 1, MinLatency: time.Millisecond, Burst: 62}, 25, "message burst"},
		// Against 30 µs the same burst needs 730 -> 800.
		{"burst on a cluster link", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 62}, 800, "message burst"},
		// 500 messages need 5840: capped at 1000, and the links under
		// 30 µs x 5840 / 1000 are named.
		{"burst beyond the cap", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 500}, MaxAuto, "shorter than 175µs"},
		// A measured burst cost replaces the message rate's share: 3.5 x
		// 62 x 8 µs + 20 µs = 1756 µs against 10 % of 30 µs: 585.3 -> 600
		// (the message rate's share would ask 800).
		{"measured burst", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 62}, 600, "take 1.736ms"},
		// A job whose one exchange is its burst is charged BurstOnceMargin:
		// 11 x 16 x 10 µs + 20 µs = 1780 µs against 10 % of 30 µs: 593.3 ->
		// 600, where the same burst every step asks 3.5 x 16 x 10 µs + 20
		// µs: 580 µs, 193.3 -> 200.
		{"one-off burst", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, BurstOnce: 16}, 600, "16 messages at once, a job's one exchange, take 1.76ms"},
		{"the same burst every step", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 16}, 200, "take 560µs"},
		// Both: the larger of the two (11 x 16 = 176 against 3.5 x 40 = 140).
		{"one-off and every step", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 40, BurstOnce: 16}, 600, "16 messages at once, a job's one exchange, take 1.76ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			capa := capa
			if c.name == "measured burst" {
				capa.BurstPerMsg = 8 * time.Microsecond
			}
			ch := Choose(capa, c.d)
			if ch.Dilation != c.want || !strings.Contains(ch.Reason, c.why) {
				t.Fatalf("dilation %g (%s), want %g (%s)", ch.Dilation, ch.Reason, c.want, c.why)
			}
		})
	}
}

// Runs that share the host each get their share: half the rates and twice
// the time per message of a burst for two, the floor unchanged.
func TestChooseShared(t *testing.T) {
	capa := Capacity{MsgsPerSec: 100e3, BytesPerSec: 1e9, Floor: 20 * time.Microsecond, BurstPerMsg: 8 * time.Microsecond}
	if got := capa.Shared(1); got != capa {
		t.Fatalf("Shared(1) = %+v, want the whole host", got)
	}
	two := capa.Shared(2)
	if two.MsgsPerSec != 50e3 || two.BytesPerSec != 0.5e9 || two.BurstPerMsg != 16*time.Microsecond || two.Floor != capa.Floor {
		t.Fatalf("Shared(2) = %+v", two)
	}
	// A burst of 62 charged at 5 µs a message (from the message rate) when
	// no burst was measured: twice that when shared by two.
	if got := (Capacity{MsgsPerSec: 200e3}).Shared(2).BurstPerMsg; got != 10*time.Microsecond {
		t.Fatalf("unmeasured burst shared by two: %s a message, want 10µs", got)
	}
	cases := []struct {
		name       string
		d          Demand
		alone, two float64
	}{
		// 1e6 messages/s: 20 alone, 40 shared.
		{"messages", Demand{MsgsPerSec: 1e6, MinLatency: time.Second}, 20, 40},
		// 3.5 x 62 x 8 µs + 20 µs = 1756 µs against 3 µs: 585.3 -> 600;
		// shared, 3.5 x 62 x 16 µs + 20 µs = 3492 µs: 1164 -> capped at 1000.
		{"burst", Demand{MsgsPerSec: 1, MinLatency: 30 * time.Microsecond, Burst: 62}, 600, MaxAuto},
		// The floor is the machine's: 15 either way.
		{"floor", Demand{MsgsPerSec: 1, BytesPerSec: 1, MinLatency: 30 * time.Microsecond}, 15, 15},
	}
	for _, c := range cases {
		if got := Choose(capa, c.d).Dilation; got != c.alone {
			t.Errorf("%s alone: dilation %g, want %g", c.name, got, c.alone)
		}
		if got := Choose(two, c.d).Dilation; got != c.two {
			t.Errorf("%s shared by two: dilation %g, want %g", c.name, got, c.two)
		}
	}
}

func TestParseCPU(t *testing.T) {
	a, err := parseCPU("cpu  100 0 50 800 50 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := parseCPU("cpu  200 0 100 850 50 0 0 0 0 0")
	busy, ok := a.busySince(b)
	if !ok || math.Abs(busy-75) > 1e-9 {
		t.Fatalf("busy %g ok %v", busy, ok)
	}
	if _, err := parseCPU("intr 1 2 3"); err == nil {
		t.Fatal("a non-cpu line was accepted")
	}
	h := StartHost(time.Millisecond)
	if got := h.Stop(); got == nil || got.CPUMeanPct < 0 || got.CPUMeanPct > 100 {
		t.Fatalf("host %+v", got)
	}
}

// TestHostCountsCollections: the collections made while the sampler runs
// are counted, and the collector's CPU share is a share.
func TestHostCountsCollections(t *testing.T) {
	h := StartHost(time.Hour)
	for range 3 {
		runtime.GC()
	}
	got := h.Stop()
	if got.GCCycles < 3 {
		t.Fatalf("%d collections counted, made 3", got.GCCycles)
	}
	if got.GCCPUPct < 0 || got.GCCPUPct > 100 {
		t.Fatalf("GC CPU share %g%%", got.GCCPUPct)
	}
	if got.GCPauseP99Ms <= 0 {
		t.Fatalf("no pause recorded for 3 collections: %+v", got)
	}
}

func TestMonoAdvances(t *testing.T) {
	a := Mono()
	b := Mono()
	if a <= 0 || b < a {
		t.Fatalf("mono %d then %d", a, b)
	}
}

// BenchmarkMonitorPerFrame is what the monitor adds to one message: the
// sender's stamp (Mono and the link model) and the receiver's record (Mono
// and the probe). Divided by the host's cost per message (`koala-emu host`:
// cores / messages per second) it is the monitor's share of a run's CPU.
func BenchmarkMonitorPerFrame(b *testing.B) {
	m := NewLinkModel(map[string]Target{"b": {Latency: time.Millisecond, Rate: 1e8}})
	p := NewProbe()
	for i := 0; i < b.N; i++ {
		now := Mono()
		due, back, _ := m.Stamp("b", 64, now)
		p.Frame("a>b", now, due, Mono(), back)
	}
}

// BenchmarkMonitorPerCompute is what the monitor adds to one Compute.
func BenchmarkMonitorPerCompute(b *testing.B) {
	p := NewProbe()
	for i := 0; i < b.N; i++ {
		p.Compute(time.Millisecond, time.Millisecond, time.Millisecond+time.Duration(i%1000))
	}
}

// The others' share is the machine's busy share less this process's CPU
// over every CPU for the interval.
func TestOthersShare(t *testing.T) {
	for _, tc := range []struct {
		busy, total uint64
		self, wall  time.Duration
		ncpu        int
		want        float64
	}{
		{busy: 500, total: 1000, self: 0, wall: time.Second, ncpu: 2, want: 0.5},
		{busy: 500, total: 1000, self: time.Second, wall: time.Second, ncpu: 2, want: 0},     // all of it ours
		{busy: 1000, total: 1000, self: time.Second, wall: time.Second, ncpu: 2, want: 0.5},  // one core ours, one another's
		{busy: 100, total: 1000, self: 2 * time.Second, wall: time.Second, ncpu: 2, want: 0}, // tick rounding: never below 0
		{busy: 0, total: 0, self: 0, wall: time.Second, ncpu: 2, want: 0},                    // nothing read
		{busy: 300, total: 1000, self: 0, wall: 0, ncpu: 0, want: 0.3},                       // no interval: the machine's share
	} {
		if got := OthersShare(tc.busy, tc.total, tc.self, tc.wall, tc.ncpu); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("OthersShare(%d, %d, %s, %s, %d) = %v, want %v", tc.busy, tc.total, tc.self, tc.wall, tc.ncpu, got, tc.want)
		}
	}
	if !(Capacity{OthersCPU: 0.3}).Busy() || (Capacity{OthersCPU: 0.2}).Busy() {
		t.Error("Busy: 30 % of others' CPU must be busy, 20 % not")
	}
}
