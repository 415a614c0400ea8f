package wiring

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	abatch "github.com/koala-emu/koala-emu/actors/batch"
	"github.com/koala-emu/koala-emu/actors/policy/batch"
	rp "github.com/koala-emu/koala-emu/actors/policy/realloc"
	"github.com/koala-emu/koala-emu/scenarios"
)

// The names a batch grid scenario accepts are the registries' names.
func TestBatchNamesMatchRegistries(t *testing.T) {
	if got := slices.Sorted(slices.Values(scenarios.BatchPolicies)); !slices.Equal(got, batch.Names()) {
		t.Errorf("scenarios accept batch policies %v, the registry has %v", got, batch.Names())
	}
	if got := slices.Sorted(slices.Values(scenarios.ReallocHeurists)); !slices.Equal(got, rp.HeuristicNames()) {
		t.Errorf("scenarios accept heuristics %v, the registry has %v", got, rp.HeuristicNames())
	}
	modes := append(rp.AlgorithmNames(), "none")
	if got := slices.Sorted(slices.Values(scenarios.ReallocModes)); !slices.Equal(got, slices.Sorted(slices.Values(modes))) {
		t.Errorf("scenarios accept modes %v, the registry has %v and none", got, modes)
	}
}

// A job's type depends on the seed and its ID only, and the shares follow
// SPEC §5 roughly.
func TestJobTypeDraw(t *testing.T) {
	if JobType(1, "ctc-7") != JobType(1, "ctc-7") {
		t.Fatal("the draw is not reproducible")
	}
	n := map[string]int{}
	for i := range 4000 {
		n[JobType(1, "x-"+strconv.Itoa(i)).Name]++
	}
	if n["t1"] < 1800 || n["t1"] > 2200 || n["t4"] < 120 || n["t4"] > 280 {
		t.Errorf("type counts %v over 4000 jobs", n)
	}
}

// StartBatch gives every batch cluster a node actor a processor, named as
// every backend names nodes, before its manager, unless the host's clock
// is virtual: there the managers hold processors on timers and no node is
// spawned.
func TestStartBatchNodes(t *testing.T) {
	plan := &scenarios.Plan{Seed: 1, TimeScale: 100, Dilation: 1, Batch: &scenarios.BatchPlan{Policy: "cbf",
		Clusters: []scenarios.BatchCluster{{Name: "a", Processors: 3, Speed: 1}, {Name: "b", Processors: 2, Speed: 1.4}},
		Mode:     "none", Heuristic: "mct", Period: time.Hour, Threshold: time.Minute}}
	for _, virtual := range []bool{false, true} {
		var names []string
		host := BatchHost{Virtual: virtual, At: func(time.Duration, func()) {},
			Spawn: func(_ *actor.Props, name string) (*actor.PID, error) {
				names = append(names, name)
				return actor.NewPID("test", name), nil
			}}
		if err := StartBatch(actors.Env{}, plan, host); err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, n := range names {
			if strings.HasPrefix(n, NodeActor("")) {
				nodes = append(nodes, n)
			}
		}
		want := []string{NodeActor(NodeName("a", 0)), NodeActor(NodeName("a", 1)), NodeActor(NodeName("a", 2)),
			NodeActor(NodeName("b", 0)), NodeActor(NodeName("b", 1))}
		wantExec := abatch.OnNodes
		if virtual {
			want, wantExec = nil, abatch.OnTimers
		}
		if !slices.Equal(nodes, want) {
			t.Errorf("virtual %v: node actors %v, want %v", virtual, nodes, want)
		}
		if got := host.Execution(); got != wantExec {
			t.Errorf("virtual %v: execution %v, want %v", virtual, got, wantExec)
		}
		if i, j := slices.Index(names, NodeActor(NodeName("b", 1))), slices.Index(names, BatchActor("b")); !virtual && (i < 0 || i > j) {
			t.Errorf("b's manager spawned before its nodes: %v", names)
		}
	}
}
