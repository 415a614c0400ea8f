package rescheduler

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/qr"
)

func testConfig(t *testing.T, cost migrate.CostModel, invert bool) Config {
	t.Helper()
	wan := netem.Link{Latency: 10 * time.Millisecond, Bandwidth: 5e6}
	m := netem.Matrix{Clusters: []string{"fast", "slow"}, Links: [][]netem.Link{
		{{Latency: 50 * time.Microsecond, Bandwidth: 12.5e6}, wan},
		{wan, {Latency: 10 * time.Microsecond, Bandwidth: 160e6}},
	}}
	return Config{Clusters: []Cluster{{"fast", 4, 1}, {"slow", 8, 0.5}}, Links: m, Cost: cost, Threshold: migrate.DefaultThreshold, Invert: invert}
}

// gridCost is the registry's predicted cost on a grid of a 10 s start-up
// and a 10 s scan period.
func gridCost() migrate.CostModel {
	return migrate.Predicted{Grid: &migrate.Grid{StartupDelay: 10 * time.Second, ScanPeriod: 10 * time.Second}}
}

// The decision migrates a job slowed enough that the other cluster wins
// after the move's cost, and keeps one that is not; the worst-case cost
// keeps a job whose remaining time is short; Invert forces the opposite.
func TestDecide(t *testing.T) {
	args := map[string]float64{"n": 8000, "mflops": 600}
	req := func(phase int32, ratio float64) *msg.MigrationRequest {
		return &msg.MigrationRequest{JobId: "j", App: "qr", Args: args, Cluster: "fast", Size: 4, Phase: phase, AverageRatio: ratio}
	}
	pred := gridCost()
	cases := []struct {
		name    string
		cost    migrate.CostModel
		invert  bool
		req     *msg.MigrationRequest
		migrate bool
	}{
		{"loaded early, predicted cost", pred, false, req(4, 11), true},
		{"unloaded", pred, false, req(4, 1), false},
		{"loaded early, worst case", migrate.WorstCase{}, false, req(4, 11), true},
		{"loaded near the end, worst case", migrate.WorstCase{}, false, req(30, 11), false},
		{"loaded early, forced opposite", pred, true, req(4, 11), false},
		{"unloaded, forced opposite", pred, true, req(4, 1), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRescheduler(testConfig(t, tc.cost, tc.invert))
			d := r.Decide(tc.req)
			if d.Migrate != tc.migrate || d.Cluster != "slow" || d.Size != 8 || d.Forced != tc.invert {
				t.Fatalf("decision %+v, want migrate %v to slow:8", d, tc.migrate)
			}
			if !tc.invert && d.Migrate != (d.Gain > migrate.DefaultThreshold) {
				t.Errorf("gain %v against the threshold, migrate %v", d.Gain, d.Migrate)
			}
			if d.CostS <= 0 || d.HereS <= 0 || d.ThereS <= 0 || d.CostModel != tc.cost.Name() {
				t.Errorf("figures %+v", d)
			}
			if tc.cost.Name() == "worst-case" && d.CostS != 900 {
				t.Errorf("worst-case cost %v s", d.CostS)
			}
		})
	}
	// Forced opposite: the first decision only; later ones decline.
	r := newRescheduler(testConfig(t, pred, true))
	if d := r.Decide(req(4, 1)); !d.Migrate {
		t.Errorf("first forced decision %+v", d)
	}
	if d := r.Decide(req(8, 1)); d.Migrate || d.Reason != ReasonForcedOnce {
		t.Errorf("second forced decision %+v", d)
	}
	// Predicted cost: the 10 s start-up plus 512 MB over 5 MB/s from 4
	// nodes (the slow cluster idle: no wait for the scheduler).
	d := newRescheduler(testConfig(t, pred, false)).Decide(req(4, 11))
	if d.CostS < 10+512e6/4/5e6 || d.CostS > 10+2*512e6/5e6 {
		t.Errorf("predicted cost %v s", d.CostS)
	}
	if d := newRescheduler(testConfig(t, pred, false)).Decide(&msg.MigrationRequest{Cluster: "mars"}); d.Migrate || !strings.Contains(d.Reason, "unknown cluster") {
		t.Errorf("unknown cluster: %+v", d)
	}
}

// The target cluster's load, as the information service reports it, slows
// the prediction there: a move that pays onto unloaded nodes does not onto
// nodes loaded six times (10 programs on 2 processors).
func TestDecideUsesTargetLoad(t *testing.T) {
	req := &msg.MigrationRequest{JobId: "j", App: "qr", Args: map[string]float64{"n": 8000, "mflops": 600},
		Cluster: "fast", Size: 4, Phase: 4, AverageRatio: 6}
	r := newRescheduler(testConfig(t, gridCost(), false))
	free := r.Decide(req)
	programs := map[string]int32{}
	for i := range 8 {
		programs[fmt.Sprintf("slow-n%03d", i)] = 10
	}
	r.status["slow"] = &msg.ClusterStatus{Cluster: "slow", Processors: 2, NodePrograms: programs}
	loaded := r.Decide(req)
	if !free.Migrate || loaded.Migrate {
		t.Fatalf("unloaded target: %+v; loaded target: %+v; want migrate then stay", free, loaded)
	}
	// The phase under way runs here at the job's pace, loaded there or not.
	here := 6 * underWay(t, req.Args, 4).Seconds()
	if ratio := (loaded.ThereS - here) / (free.ThereS - here); ratio < 5.5 || ratio > 6.5 {
		t.Errorf("remaining there loaded %v s, unloaded %v s, %v s of them here: ratio %v, want about 6", loaded.ThereS, free.ThereS, here, ratio)
	}
	// One loaded node of eight: the slowest node sets the pace.
	r.status["slow"] = &msg.ClusterStatus{Cluster: "slow", Processors: 2, NodePrograms: map[string]int32{"slow-n003": 10}}
	if one := r.Decide(req); one.ThereS-here <= (free.ThereS-here)*2 {
		t.Errorf("one loaded node: remaining there %v s, unloaded %v s", one.ThereS, free.ThereS)
	}
}

// The job stops at the safe point after the phase under way, so that phase
// runs here at the job's pace: the time there of a job eleven times slower
// than predicted exceeds that of a job on prediction by ten times that
// phase's time here. A job in its last phase (no safe point left) has as
// much left there as here, and stays.
func TestDecideCountsPhaseUnderWay(t *testing.T) {
	args := map[string]float64{"n": 8000, "mflops": 600}
	req := func(phase int32, ratio float64) *msg.MigrationRequest {
		return &msg.MigrationRequest{JobId: "j", App: "qr", Args: args, Cluster: "fast", Size: 4, Phase: phase, AverageRatio: ratio, Ratio: ratio}
	}
	r := newRescheduler(testConfig(t, gridCost(), false))
	onPace, slowed := r.Decide(req(4, 1)), r.Decide(req(4, 11))
	if got, want := slowed.ThereS-onPace.ThereS, 10*underWay(t, args, 4).Seconds(); math.Abs(got-want) > 1e-6 || want <= 0 {
		t.Errorf("time there at pace 11 minus at pace 1: %v s, want 10 x the phase under way here, %v s", got, want)
	}
	m, _, err := apps.QRModel(args, 4)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Decide(req(int32(len(m.Phases())-1), 11))
	if last.Migrate || last.ThereS != last.HereS || last.HereS <= 0 {
		t.Errorf("in the last phase: %+v, want as much there as here, and stay", last)
	}
}

// A target whose nodes are not all idle in the information service's last
// status makes the restart wait for the scheduler's next scan: the
// predicted cost grows by the 10 s scan period; the worst case stays 900 s.
func TestDecideBusyTarget(t *testing.T) {
	req := &msg.MigrationRequest{JobId: "j", App: "qr", Args: map[string]float64{"n": 8000, "mflops": 600},
		Cluster: "fast", Size: 4, Phase: 4, AverageRatio: 6, Ratio: 6}
	for _, c := range []struct {
		cost migrate.CostModel
		more float64
	}{{gridCost(), 10}, {migrate.WorstCase{}, 0}} {
		r := newRescheduler(testConfig(t, c.cost, false))
		r.status["slow"] = &msg.ClusterStatus{Cluster: "slow", Idle: 8, Processors: 2}
		idle := r.Decide(req)
		r.status["slow"] = &msg.ClusterStatus{Cluster: "slow", Idle: 7, Processors: 2}
		busy := r.Decide(req)
		if got := busy.CostS - idle.CostS; math.Abs(got-c.more) > 1e-9 {
			t.Errorf("%s: a busy target costs %v s more (%v against %v), want %v", c.cost.Name(), got, busy.CostS, idle.CostS, c.more)
		}
	}
}

// underWay is the model's time of phase k of a qr job of args on the 4
// unloaded nodes of testConfig's fast cluster.
func underWay(t *testing.T, args map[string]float64, k int) time.Duration {
	t.Helper()
	m, rate, err := apps.QRModel(args, 4)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []qr.Node{{Speed: rate}, {Speed: rate}, {Speed: rate}, {Speed: rate}}
	ts, err := m.Predict(k, k+1, nodes, func(int, int) (time.Duration, float64) { return 50 * time.Microsecond, 12.5e6 })
	if err != nil {
		t.Fatal(err)
	}
	return ts[0]
}
