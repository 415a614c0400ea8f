// Package faultstest checks a run of launch/testdata/faults-load.yaml the
// same way on every backend (inproc, the grid's host processes, netns and
// docker): test support only.
package faultstest

import (
	"maps"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/results"
)

// CheckLoadRun checks a run of faults-load.yaml: two programs on each
// leiden node from 50 s to 150 s halve its speed for 100 s, so the leiden
// job runs about 50 s longer than the vrije job, which nothing loads (about
// 200 s). slack widens both bounds (seconds) for backends whose messages
// take longer to reach a host. Each execution time is taken as the host
// delivered the computation: divided by the job's computation stretch (the
// fidelity monitor's actual over asked, when above 1), so a busy host that
// fell behind the waits Compute asked for does not fail the check, while a
// load applied twice, or not at all, still does. Every job completed, the load and the
// unload of leiden were applied without error, and each leiden node
// recorded its load and its unload (loads: node_load events by node).
func CheckLoadRun(t testing.TB, jobs []results.Job, applied []results.FaultRecord, loads map[string]int, slack float64) {
	t.Helper()
	exec := map[string]float64{}
	for _, j := range jobs {
		if j.Status != results.StatusCompleted {
			t.Fatalf("job %s: %s %q, want completed", j.ID, j.Status, j.Reason)
		}
		stretch := 1.0
		if j.Figures != nil && j.Figures.Stretch > 1 {
			stretch = j.Figures.Stretch
		}
		t.Logf("job %s on %s: execution %.1f s, computation stretch %.3f", j.ID, j.Components, j.Exec(), stretch)
		exec[strings.SplitN(j.Components, ":", 2)[0]] = j.Exec() / stretch
	}
	lei, vu := exec["leiden"], exec["vrije"]
	t.Logf("execution over stretch: leiden (loaded) %.1f s, vrije %.1f s", lei, vu)
	if vu < 195 || vu > 215+slack {
		t.Errorf("unloaded vrije job ran %.1f s, want about 200", vu)
	}
	if d := lei - vu; d < 40-slack || d > 60+slack {
		t.Errorf("loaded leiden job ran %.1f s, %.1f s longer than the vrije job; want about 50 s longer", lei, d)
	}
	var kinds []string
	for _, a := range applied {
		kinds = append(kinds, a.Kind+" "+a.Target)
		if a.Error != "" {
			t.Errorf("%s %s: %s", a.Kind, a.Target, a.Error)
		}
	}
	if got := strings.Join(kinds, ", "); got != "load leiden, unload leiden" {
		t.Errorf("faults applied: %s", got)
	}
	if want := map[string]int{"leiden-n001": 2, "leiden-n002": 2}; !maps.Equal(loads, want) {
		t.Errorf("node_load events by node %v, want %v", loads, want)
	}
}
