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

// loadRecorder is a FaultApplier with the LoadApplier capability that
// records every node's programs.
type loadRecorder struct{ calls []string }

func (*loadRecorder) Kill(string, string) error                { return nil }
func (*loadRecorder) Cut(string, bool) error                   { return nil }
func (*loadRecorder) SetLink(string, string, netem.Link) error { return nil }
func (l *loadRecorder) Load(node, cluster string, programs int) error {
	l.calls = append(l.calls, fmt.Sprintf("%s/%s=%d", cluster, node, programs))
	return nil
}

// noLoad is a FaultApplier without it.
type noLoad struct{ loadRecorder }

func (noLoad) Load() {}

// Loads on a cluster and on one of its nodes add up per node, and an
// unload takes off what its load put on; an applier that cannot load says
// so.
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
	err := FaultRun{Plan: plan, Env: run.Env, Applier: &noLoad{}}.load(scenarios.Fault{Kind: scenarios.FaultLoad, Target: node, Programs: 1}, map[string]int{})
	if err == nil || !strings.Contains(err.Error(), "cannot load nodes") {
		t.Errorf("an applier without Load: %v", err)
	}
}
