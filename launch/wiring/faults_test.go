package wiring

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// loadRecorder is a FaultApplier that records every node's programs.
type loadRecorder struct{ calls []string }

func (*loadRecorder) Kill(string, string) error                { return nil }
func (*loadRecorder) Cut(string, bool) error                   { return nil }
func (*loadRecorder) SetLink(string, string, netem.Link) error { return nil }
func (l *loadRecorder) Load(loads []NodePrograms) error {
	for _, x := range loads {
		l.calls = append(l.calls, fmt.Sprintf("%s/%s=%d", x.Cluster, x.Node, x.Programs))
	}
	return nil
}

// Loads on a cluster and on one of its nodes add up per node, and an
// unload takes off what its load put on; a target that is neither a node
// nor a cluster of the plan is an error.
func TestFaultRunLoadsAddUp(t *testing.T) {
	plan := testPlan(t)
	c := plan.Clusters[0]
	node := scenarios.NodeName(c.Name, 1)
	rec := &loadRecorder{}
	run := FaultRun{Plan: plan, Env: actors.Env{Clock: clock.NewScaled(1)}, Applier: rec}
	loads := map[string]int{}
	for _, f := range []scenarios.Fault{
		{Kind: scenarios.FaultLoad, Target: c.Name, Programs: 10},
		{Kind: scenarios.FaultLoad, Target: node, Programs: 3},
		{Kind: scenarios.FaultUnload, Target: c.Name, Programs: 10},
	} {
		rec.calls = nil
		run.apply(f, loads)
	}
	sort.Strings(rec.calls)
	if len(rec.calls) != c.Nodes {
		t.Fatalf("unload told %d nodes, want the %d of %s: %v", len(rec.calls), c.Nodes, c.Name, rec.calls)
	}
	for _, call := range rec.calls {
		want := "=0"
		if strings.HasPrefix(call, c.Name+"/"+node+"=") {
			want = "=3"
		}
		if !strings.HasSuffix(call, want) {
			t.Errorf("after the unload %s, want %s", call, want)
		}
	}
	if loads[node] != 3 || loads[scenarios.NodeName(c.Name, 0)] != 0 {
		t.Errorf("loads %v", loads)
	}
	err := run.load(scenarios.Fault{Kind: scenarios.FaultLoad, Target: "nowhere", Programs: 1}, loads)
	if err == nil || !strings.Contains(err.Error(), "no node or cluster nowhere") {
		t.Errorf("a load of an unknown target: %v", err)
	}
}
