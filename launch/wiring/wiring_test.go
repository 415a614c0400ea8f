package wiring

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/scenarios"
)

func testPlan(t *testing.T) *scenarios.Plan {
	t.Helper()
	var plan *scenarios.Plan
	s, err := scenarios.LoadBuiltin("das3-malleable-smoke")
	if err == nil {
		plan, err = s.Expand(ScenarioEnv(), scenarios.Overrides{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// The Spec of a plan carries what the roles need, survives JSON (the grid
// backends send it to every host) and knows every malleable job's bounds.
func TestSpecFromPlan(t *testing.T) {
	plan := testPlan(t)
	s := SpecFromPlan(plan, 1234)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if got := s.Order(); !reflect.DeepEqual(got, []string{"multimedian", "leiden"}) {
		t.Errorf("order %v", got)
	}
	malleable := 0
	for _, j := range plan.Jobs {
		b, ok := s.Malleable[j.ID]
		if ok != j.Malleable || (ok && (b.Min != j.Min || b.Max != j.Max)) {
			t.Errorf("job %s: malleable %v [%d, %d], spec %v %+v", j.ID, j.Malleable, j.Min, j.Max, ok, b)
		}
		if j.Malleable {
			malleable++
		}
	}
	if malleable != 5 {
		t.Errorf("%d malleable jobs, want 5", malleable)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.ProbeBytes != 1234 || back.Policy.Malleability == nil || back.Policy.Malleability.ThresholdOf("leiden") != 0.25 ||
		len(back.Malleable) != 5 || back.Factor() != 60 {
		t.Errorf("round trip lost fields: %+v", back)
	}
	if _, err := back.NodeConfig(actors.Env{}, "nowhere", "x-n001", nil, ""); err == nil {
		t.Error("a node of an unknown cluster got a configuration")
	}
}

// A job's wire form keeps every field the runner and the scheduler read.
func TestJobSpec(t *testing.T) {
	j := scenarios.Job{ID: "j0007", App: "nbody", Args: map[string]float64{"iterations": 10}, Size: 2, Request: scenarios.Fixed,
		Submit: 90 * time.Second, Components: []scenarios.Component{{Cluster: "leiden", Size: 2}},
		Files: []scenarios.File{{Name: "f", Size: 3, Replicas: []string{"leiden"}}}}
	spec := JobSpec(j, "leiden")
	if spec.Id != "j0007" || spec.App != "nbody" || spec.Size != 2 || spec.Request != "fixed" || spec.SubmitS != 90 ||
		spec.Site != "leiden" || len(spec.Components) != 1 || spec.Components[0].Cluster != "leiden" ||
		len(spec.Files) != 1 || spec.Files[0].Replicas[0] != "leiden" || spec.Args["iterations"] != 10 {
		t.Errorf("job spec %v", spec)
	}
}

// The hosts' invariant counters add up at the launcher.
func TestInvariantReport(t *testing.T) {
	a := invariant.Summary{Checks: map[string]int{"size_bounds": 3, "threshold": 1}, Violations: map[string]int{"threshold": 1},
		Details: []string{"threshold: over"}}
	b := invariant.Summary{Checks: map[string]int{"size_bounds": 2}, Violations: map[string]int{}}
	var sum invariant.Summary
	sum = AddInvariantReport(sum, InvariantReport(a))
	sum = AddInvariantReport(sum, InvariantReport(b))
	want := invariant.Summary{Checks: map[string]int{"size_bounds": 5, "threshold": 1}, Violations: map[string]int{"threshold": 1},
		Details: []string{"threshold: over"}}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("sum %+v, want %+v", sum, want)
	}
}

// Undo runs every step once, last first, and joins the errors.
func TestUndo(t *testing.T) {
	var order []int
	var u Undo
	boom := errors.New("boom")
	for i := 0; i < 3; i++ {
		u.Push(func() error {
			order = append(order, i)
			if i == 1 {
				return boom
			}
			return nil
		})
	}
	if err := u.Run(); !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
	if err := u.Run(); err != nil || !reflect.DeepEqual(order, []int{2, 1, 0}) {
		t.Errorf("order %v (second run %v), want [2 1 0] once", order, err)
	}
}

// A run that ends without Finish (an error before the results) keeps the
// events it recorded: closing the results writes what the recorder buffers.
func TestResultsCloseKeepsEvents(t *testing.T) {
	out := t.TempDir()
	var u Undo
	r, err := OpenResults(testPlan(t), out, &u)
	if err != nil {
		t.Fatal(err)
	}
	r.Recorder().Record(&msg.Event{Kind: msg.EventSubmit, JobId: "j0001", TS: 1})
	if err := u.Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"j0001"`) {
		t.Fatalf("events.jsonl after close: %q", b)
	}
	if err := r.Close(); err != nil {
		t.Errorf("a second close: %v", err)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.WithDefaults()
	if o.ProgressEvery != DefaultProgressEvery || o.Drain != DefaultDrain || o.ProbeBytes != DefaultProbeBytes || o.Progress != io.Discard {
		t.Errorf("defaults %+v", o)
	}
	if o := (Options{ProbeBytes: -1, Drain: time.Minute}).WithDefaults(); o.ProbeBytes != -1 || o.Drain != time.Minute {
		t.Errorf("set fields changed: %+v", o)
	}
}

// Probes get the time dilated links need: about two minutes at dilation 1, and
// at dilation 1000 more than a minute for the slowest link (the das3
// wide-area links are 0.4-1 ms, 77-185 MB/s) and the round, whose links are
// probed at once, twice the slowest plus that.
func TestProbeTimeouts(t *testing.T) {
	plan := testPlan(t)
	s := SpecFromPlan(plan, 256<<10)
	s.Dilation = 1
	if per, round := s.ProbeTimeouts(); per != minProbeWait || round < per || round > per+10*time.Second {
		t.Fatalf("dilation 1: per link %s, round %s", per, round)
	}
	s.Dilation = 1000
	per, round := s.ProbeTimeouts()
	slowest := time.Duration(0)
	for _, a := range s.Clusters {
		for _, b := range s.Clusters {
			l, err := s.Links.Link(a.Name, b.Name)
			if err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, probeOptions(s.ProbeBytes).Expected(time.Duration(float64(l.Latency)*1000), l.Bandwidth/1000))
		}
	}
	if slowest < time.Minute/2 || per != max(minProbeWait, 3*slowest) || round < per+2*slowest {
		t.Fatalf("dilation 1000: slowest probe %s, per link %s, round %s", slowest, per, round)
	}
}
