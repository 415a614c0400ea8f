package rescheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/migrate"
	"github.com/koala-emu/koala-emu/netem"
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

// The decision migrates a job slowed enough that the other cluster wins
// after the move's cost, and keeps one that is not; the worst-case cost
// keeps a job whose remaining time is short; Invert forces the opposite.
func TestDecide(t *testing.T) {
	args := map[string]float64{"n": 8000, "mflops": 600}
	req := func(phase int32, ratio float64) *msg.MigrationRequest {
		return &msg.MigrationRequest{JobId: "j", App: "qr", Args: args, Cluster: "fast", Size: 4, Phase: phase, AverageRatio: ratio}
	}
	pred := migrate.Predicted{Fixed: migrate.FixedParts()}
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
	// Predicted cost: 360 s fixed plus 512 MB over 5 MB/s from 4 nodes.
	d := newRescheduler(testConfig(t, pred, false)).Decide(req(4, 11))
	if d.CostS < 360+512e6/4/5e6 || d.CostS > 360+2*512e6/5e6 {
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
	r := newRescheduler(testConfig(t, migrate.Predicted{Fixed: migrate.FixedParts()}, false))
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
	if ratio := loaded.ThereS / free.ThereS; ratio < 5.5 || ratio > 6.5 {
		t.Errorf("remaining there loaded %v s, unloaded %v s: ratio %v, want about 6", loaded.ThereS, free.ThereS, ratio)
	}
	// One loaded node of eight: the slowest node sets the pace.
	r.status["slow"] = &msg.ClusterStatus{Cluster: "slow", Processors: 2, NodePrograms: map[string]int32{"slow-n003": 10}}
	if one := r.Decide(req); one.ThereS <= free.ThereS*2 {
		t.Errorf("one loaded node: remaining there %v s, unloaded %v s", one.ThereS, free.ThereS)
	}
}
