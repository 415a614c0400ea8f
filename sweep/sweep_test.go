package sweep

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/scenarios"
)

// testEnv knows the project's applications and placement policies; every
// application takes 200 s on 32 nodes and scales perfectly.
func testEnv() *scenarios.Env {
	return &scenarios.Env{
		Apps:     []string{"prime", "poisson", "wave", "allgather", "ccr", "ft", "nbody"},
		Policies: []string{"wf", "cf", "cm", "fcm", "ca"},
		Nominal: func(app string, nodes int) (time.Duration, error) {
			if nodes < 1 {
				return 0, fmt.Errorf("%s: %d nodes", app, nodes)
			}
			return 200 * time.Second * 32 / time.Duration(nodes), nil
		},
	}
}

func load(t *testing.T, path string) *Sweep {
	t.Helper()
	sw, err := Load(path)
	if err != nil {
		t.Fatalf("Load %s: %v", path, err)
	}
	return sw
}

// inline parses a sweep document as if it were a file in testdata/.
func inline(t *testing.T, doc string) *Sweep {
	t.Helper()
	sw, err := Parse([]byte(doc), "testdata/inline.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return sw
}

func parseCell(t *testing.T, c Cell) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Parse(c.Scenario, c.ID)
	if err != nil {
		t.Fatalf("cell %s: %v\n%s", c.ID, err, c.Scenario)
	}
	return s
}

func TestGridProductAndIDs(t *testing.T) {
	sw := load(t, "testdata/small.yaml")
	if sw.Backend != "inproc" || sw.Parallel != 2 {
		t.Fatalf("backend %q parallel %d, want inproc and 2", sw.Backend, sw.Parallel)
	}
	cells, err := sw.Cells(testEnv())
	if err != nil {
		t.Fatalf("Cells: %v", err)
	}
	var ids []string
	for _, c := range cells {
		ids = append(ids, c.ID)
	}
	want := []string{
		"net_utilization=0.2,placement=wf,seed=1", "net_utilization=0.2,placement=wf,seed=2",
		"net_utilization=0.2,placement=fcm,seed=1", "net_utilization=0.2,placement=fcm,seed=2",
		"net_utilization=0.4,placement=wf,seed=1", "net_utilization=0.4,placement=wf,seed=2",
		"net_utilization=0.4,placement=fcm,seed=1", "net_utilization=0.4,placement=fcm,seed=2",
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("cells\n%q\nwant\n%q", ids, want)
	}
	if got := sw.Columns(); !slices.Equal(got, []string{"net_utilization", "placement", "seed"}) {
		t.Fatalf("columns %q", got)
	}
	c := cells[6] // 0.4, fcm, seed 1
	if c.Index != 6 || c.Dir != c.ID {
		t.Fatalf("cell 6: index %d dir %q", c.Index, c.Dir)
	}
	s := parseCell(t, c)
	if *s.Workload.Arrivals.NetUtilization != 0.4 || s.Policy.Placement != "fcm" || *s.Seed != 1 || s.Workload.DurationS != 1800 {
		t.Fatalf("cell %s: net %v placement %s seed %d duration %v", c.ID, *s.Workload.Arrivals.NetUtilization,
			s.Policy.Placement, *s.Seed, s.Workload.DurationS)
	}
	// Untouched fields keep the base's values.
	if s.Name != "sweep-base" || len(s.Topology.Clusters) != 4 || s.Workload.Application != "wave" {
		t.Fatalf("cell %s lost base fields: %+v", c.ID, s)
	}
}

func TestRangeValues(t *testing.T) {
	r := Range{From: 0.10, To: 0.90, Step: 0.05}
	nodes, err := r.values()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, n.Value)
	}
	want := []string{"0.1", "0.15", "0.2", "0.25", "0.3", "0.35", "0.4", "0.45", "0.5", "0.55", "0.6", "0.65",
		"0.7", "0.75", "0.8", "0.85", "0.9"}
	if !slices.Equal(got, want) {
		t.Fatalf("range %v, want %v", got, want)
	}
	for _, bad := range []Range{{0, 1, 0}, {1, 0, 0.1}, {0, 1, -1}, {0, 1e9, 1e-9}} {
		if _, err := bad.values(); err == nil {
			t.Errorf("range %+v: no error", bad)
		}
	}
}

func TestOverridePaths(t *testing.T) {
	sw := inline(t, `base: base.yaml
set:
  workload.background.max: 0.3
grid:
  - path: topology.links.pairs[0].latency_ms
    values: [2.5]
  - name: leiden_speed
    path: topology.clusters[name=leiden].speed
    values: [1.25]
  - path: topology.clusters[1].nodes
    values: [40]
  - name: iterations
    path: workload.args.iterations
    values: [7]
  - path: policy.scan_period_s
    values: [15]
  - path: workload.background.min
    values: [0.1]
  - path: workload.sizes
    values: [[4, 8]]
`)
	cells, err := sw.Cells(testEnv())
	if err != nil {
		t.Fatalf("Cells: %v", err)
	}
	if len(cells) != 1 {
		t.Fatalf("%d cells, want 1", len(cells))
	}
	c := cells[0]
	wantID := "latency_ms=2.5,leiden_speed=1.25,nodes=40,iterations=7,scan_period_s=15,min=0.1,sizes=[4, 8]"
	if c.ID != wantID {
		t.Fatalf("ID %q, want %q", c.ID, wantID)
	}
	if c.Dir != "latency_ms=2.5,leiden_speed=1.25,nodes=40,iterations=7,scan_period_s=15,min=0.1,sizes=_4,_8_" {
		t.Fatalf("dir %q", c.Dir)
	}
	s := parseCell(t, c)
	if got := *s.Topology.Links.Pairs[0].LatencyMS; got != 2.5 {
		t.Errorf("pairs[0].latency_ms = %v, want 2.5", got)
	}
	if got := *s.Topology.Clusters[3].Speed; got != 1.25 {
		t.Errorf("leiden speed = %v, want 1.25", got)
	}
	if s.Topology.Clusters[2].Speed == nil || *s.Topology.Clusters[2].Speed != 0.9375 {
		t.Errorf("multimedian speed changed: %v", s.Topology.Clusters[2].Speed)
	}
	if got := s.Topology.Clusters[1].Nodes; got != 40 {
		t.Errorf("clusters[1].nodes = %d, want 40", got)
	}
	if got := s.Workload.Args["iterations"]; got != 7 {
		t.Errorf("args.iterations = %v, want 7", got)
	}
	// Absent in the base, optional in the schema: created.
	if s.Policy.ScanPeriodS == nil || *s.Policy.ScanPeriodS != 15 {
		t.Errorf("policy.scan_period_s = %v, want 15 (created)", s.Policy.ScanPeriodS)
	}
	if s.Workload.Background == nil || s.Workload.Background.Min != 0.1 || s.Workload.Background.Max != 0.3 {
		t.Errorf("workload.background = %+v, want min 0.1 and max 0.3 (created)", s.Workload.Background)
	}
	if !slices.Equal(s.Workload.Sizes, []int{4, 8}) {
		t.Errorf("sizes = %v, want [4 8]", s.Workload.Sizes)
	}
}

func TestOverrideErrors(t *testing.T) {
	for _, c := range []struct {
		name, axis, want string
	}{
		{"unknown field", "{path: workload.arival.rate, values: [1]}",
			"path workload.arival.rate: workload.arival is not a scenario field (known here:"},
		{"unknown leaf", "{path: policy.placment, values: [wf]}", "path policy.placment: policy.placment is not a scenario field"},
		{"no such name", "{path: 'topology.clusters[name=delft].speed', values: [1]}",
			"path topology.clusters[name=delft].speed: topology.clusters[name=delft]: no element with name=delft (have: vrije, amsterdam, multimedian, leiden)"},
		{"index out of range", "{path: 'topology.links.pairs[3].latency_ms', values: [1]}",
			"topology.links.pairs[3]: index 3 is out of range (the list has 1 elements)"},
		{"select in a non-list", "{path: 'policy[0].placement', values: [wf]}", "selects in a list"},
		{"select in an absent list", "{path: 'workload.jobs[0].size', values: [1]}", "does not exist in the base scenario: no element to select"},
		{"under a scalar", "{path: workload.duration_s.x, values: [1]}", "workload.duration_s.x: the value before it is float64"},
		{"type: string for a number", "{path: workload.arrivals.net_utilization, values: [high]}",
			`workload.arrivals.net_utilization: line`},
		{"type: float for an integer", "{path: policy.max_clusters, values: [2.5]}", "policy.max_clusters"},
		{"type: quoted number", `{path: 'topology.clusters[0].nodes', values: ["85"]}`, "topology.clusters[0].nodes"},
	} {
		sw, err := Parse([]byte("base: base.yaml\ngrid:\n  - "+c.axis+"\n"), "testdata/inline.yaml")
		if err == nil {
			_, err = sw.Cells(nil)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant one containing %q", c.name, err, c.want)
		}
	}
}

func TestMissingRequiredField(t *testing.T) {
	// name is required by the schema (no omitempty): a base without it
	// cannot get one created by an override.
	sw := inline(t, "base: base.yaml\ngrid:\n  - {path: name, values: [x]}\n")
	sw.baseData = []byte("seed: 1\n")
	_, err := sw.Cells(nil)
	if err == nil || !strings.Contains(err.Error(), "path name: name does not exist in the base scenario") {
		t.Fatalf("error %v", err)
	}
}

func TestSweepFileErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"no base", "grid: []\n", "base: a scenario file or built-in name is required"},
		{"unknown field", "base: base.yaml\ngird: []\n", "field gird not found"},
		{"missing base file", "base: ./nope.yaml\n", "nope.yaml"},
		{"unknown builtin", "base: nope\n", `built-in scenario "nope"`},
		{"negative parallel", "base: base.yaml\nparallel: -1\n", "parallel: -1 is negative"},
		{"values and range", "base: base.yaml\ngrid:\n  - {path: seed, values: [1], range: {from: 1, to: 2, step: 1}}\n", "give values or range, not both"},
		{"no values", "base: base.yaml\ngrid:\n  - {path: seed}\n", "values or range is required"},
		{"same name twice", "base: base.yaml\ngrid:\n  - {path: seed, values: [1]}\nseeds: [1]\n", `two axes are named "seed"`},
		{"same path twice", "base: base.yaml\ngrid:\n  - {name: a, path: seed, values: [1]}\n  - {name: b, path: seed, values: [2]}\n", "both set seed"},
		{"duplicate value", "base: base.yaml\ngrid:\n  - {path: seed, values: [1, 1]}\n", "value 1 given twice"},
		{"bad selector", "base: base.yaml\ngrid:\n  - {path: 'topology.clusters[x', values: [1]}\n", "is not field[selector]"},
		{"variant without name", "base: base.yaml\ngrid:\n  - variants: [{set: {seed: 1}}]\n", "name is required"},
		{"path and variants", "base: base.yaml\ngrid:\n  - {path: seed, variants: [{name: a, set: {seed: 1}}]}\n", "not both"},
	} {
		_, err := Parse([]byte(c.doc), "testdata/inline.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant one containing %q", c.name, err, c.want)
		}
	}
}

func TestBuiltinBase(t *testing.T) {
	sw := inline(t, "base: das3-smoke\ngrid:\n  - {path: seed, values: [3]}\n")
	if _, name := sw.BaseScenario(); name != "builtin:das3-smoke" {
		t.Fatalf("base from %s", name)
	}
	cells, err := sw.Cells(nil)
	if err != nil {
		t.Fatalf("Cells: %v", err)
	}
	if s := parseCell(t, cells[0]); *s.Seed != 3 {
		t.Fatalf("seed %d", *s.Seed)
	}
}

func TestCoallocUtilisationSweep(t *testing.T) {
	sw := load(t, "testdata/coalloc-utilisation.yaml")
	if sw.Backend != "sim" {
		t.Fatalf("backend %q, want sim", sw.Backend)
	}
	cells, err := sw.Cells(testEnv())
	if err != nil {
		t.Fatalf("Cells: %v", err)
	}
	if len(cells) != 4*17*3 {
		t.Fatalf("%d cells, want 204", len(cells))
	}
	if got := sw.Columns(); !slices.Equal(got, []string{"policy", "net_utilization", "app"}) {
		t.Fatalf("columns %q", got)
	}
	if cells[0].ID != "policy=wf,net_utilization=0.1,app=prime" || cells[203].ID != "policy=ca,net_utilization=0.9,app=wave" {
		t.Fatalf("first %s last %s", cells[0].ID, cells[203].ID)
	}
	placement := map[string]string{"wf": "wf", "fcm": "fcm", "fcm-2": "fcm", "ca": "ca"}
	caps := map[string]int{"fcm-2": 2}
	for _, c := range cells {
		s := parseCell(t, c)
		policy, net, app := c.Values[0].Value, c.Values[1].Value, c.Values[2].Value
		if s.Policy.Placement != placement[policy] || s.Policy.MaxClusters != caps[policy] {
			t.Fatalf("cell %s: placement %s max_clusters %d", c.ID, s.Policy.Placement, s.Policy.MaxClusters)
		}
		if got := fmt.Sprint(*s.Workload.Arrivals.NetUtilization); got != net {
			t.Fatalf("cell %s: net utilisation %s", c.ID, got)
		}
		if s.Workload.Application != app || s.Workload.DurationS != 86400 {
			t.Fatalf("cell %s: application %s duration %v", c.ID, s.Workload.Application, s.Workload.DurationS)
		}
		if !slices.Equal(s.Topology.Exclude, []string{"delft"}) {
			t.Fatalf("cell %s: exclude %v, want [delft]", c.ID, s.Topology.Exclude)
		}
	}
}
