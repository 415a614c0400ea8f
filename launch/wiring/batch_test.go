package wiring

import (
	"slices"
	"strconv"
	"testing"

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
