package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeEnv knows the project's applications, placement policies and
// malleability profiles, approaches and policies; every application takes
// 200 s on 32 nodes and scales perfectly.
func fakeEnv() Env {
	return Env{
		Apps:          []string{"prime", "poisson", "wave", "allgather", "ccr", "ft", "nbody", "qr"},
		Policies:      []string{"wf", "cf", "cm", "fcm", "ca"},
		MalleableApps: []string{"ft", "nbody"},
		Profiles: map[string]ProfileBounds{
			"ft":    {Min: 2, Max: 32, PowerOfTwo: true},
			"nbody": {Min: 2, Max: 46},
		},
		Approaches:           []string{"pra", "pwa"},
		MalleabilityPolicies: []string{"fpsma", "egs"},
		Nominal: func(app string, nodes int) (time.Duration, error) {
			if nodes < 1 {
				return 0, fmt.Errorf("%s: %d nodes", app, nodes)
			}
			return 200 * time.Second * 32 / time.Duration(nodes), nil
		},
	}
}

// base is a valid scenario; the malformed cases below edit it.
const base = `name: t
seed: 7
topology:
  clusters:
    - {name: vrije, nodes: 85, cpu_ghz: 2.4, speed: 0.9375}
    - {name: amsterdam, nodes: 41, cpu_ghz: 2.2, speed: 0.857}
    - {name: delft, nodes: 68, cpu_ghz: 2.4, speed: 0.9375, interconnect: gbe}
    - {name: multimedian, nodes: 46, cpu_ghz: 2.4, speed: 0.9375}
    - {name: leiden, nodes: 32, cpu_ghz: 2.6}
  exclude: [delft]
  links:
    preset: das3
    pairs:
      - {a: vrije, b: amsterdam, latency_ms: 0.5}
workload:
  application: wave
  arrivals: {net_utilization: 0.4}
  duration_s: 3600
  sizes: [8, 16, 32]
  request: flexible
policy:
  placement: fcm
`

// edit is one textual replacement of base; old must occur in base.
type edit struct{ old, new string }

func mutate(t *testing.T, edits ...edit) string {
	t.Helper()
	s := base
	for _, e := range edits {
		if !strings.Contains(s, e.old) {
			t.Fatalf("test bug: %q not in base scenario", e.old)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return s
}

func TestBaseIsValid(t *testing.T) {
	s, err := Parse([]byte(base), "base")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(fakeEnv()); err != nil {
		t.Fatalf("base scenario invalid:\n%v", err)
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		name  string
		edits []edit
		want  string // substring of one error line, starting with the field path
	}{
		// Reading the YAML.
		{"unknown top-level field", []edit{{"seed: 7", "seeed: 7"}}, "seeed: line 2: unknown field"},
		{"unknown nested field", []edit{{"{name: leiden, nodes: 32", "{name: leiden, nodes: 32, gpus: 4"}},
			"topology.clusters[4].gpus: line 9: unknown field"},
		{"wrong type scalar", []edit{{"{name: vrije, nodes: 85", "{name: vrije, nodes: many"}},
			`topology.clusters[0].nodes: line 5: "many" is not an integer`},
		{"wrong type list", []edit{{"exclude: [delft]", "exclude: delft"}},
			`topology.exclude: line 10: expected a list, found "delft"`},
		{"wrong type float in list", []edit{{"sizes: [8, 16, 32]", "sizes: [8, 16.5, 32]"}},
			`workload.sizes[1]: line 19: "16.5" is not an integer`},
		{"field given twice", []edit{{"seed: 7", "seed: 7\nseed: 8"}}, "seed: line 3: given twice (first at line 2)"},

		// Top level.
		{"missing name", []edit{{"name: t\n", ""}}, "name: is required"},
		{"time_scale zero", []edit{{"seed: 7", "seed: 7\ntime_scale: 0"}}, "time_scale: must be greater than 0"},
		{"time_scale negative", []edit{{"seed: 7", "seed: 7\ntime_scale: -2"}}, "time_scale: must be greater than 0, got -2"},
		{"dilation below 1", []edit{{"seed: 7", "seed: 7\ndilation: 0.5"}}, "dilation: must be at least 1"},

		// Topology.
		{"nodes zero", []edit{{"{name: delft, nodes: 68", "{name: delft, nodes: 0"}}, "topology.clusters[2].nodes: must be at least 1"},
		{"duplicate cluster", []edit{{"{name: leiden, nodes: 32", "{name: vrije, nodes: 32"}},
			`topology.clusters[4].name: duplicate cluster name "vrije" (also topology.clusters[0])`},
		{"non-DAS-3 name with das3 preset", []edit{{"{name: leiden, nodes: 32", "{name: foo, nodes: 32"}},
			`topology.clusters[4].name: "foo" is not a DAS-3 cluster`},
		{"bad interconnect", []edit{{"interconnect: gbe", "interconnect: infiniband"}},
			`topology.clusters[2].interconnect: unknown interconnect "infiniband"`},
		{"speed zero", []edit{{"cpu_ghz: 2.6}", "cpu_ghz: 2.6, speed: 0}"}}, "topology.clusters[4].speed: must be greater than 0"},
		{"include and exclude", []edit{{"exclude: [delft]", "exclude: [delft]\n  include: [vrije]"}},
			"topology.exclude: give include or exclude, not both"},
		{"empty include", []edit{{"exclude: [delft]", "include: []"}}, "topology.include: must name at least one cluster"},
		{"include unknown", []edit{{"exclude: [delft]", "include: [vrije, nowhere]"}}, `topology.include[1]: unknown cluster "nowhere"`},
		{"exclude everything", []edit{{"exclude: [delft]", "exclude: [vrije, amsterdam, delft, multimedian, leiden]"}},
			"topology.exclude: excludes every cluster"},
		{"unknown preset", []edit{{"preset: das3", "preset: infiniband"}}, `topology.links.preset: unknown preset "infiniband" (known: das3, gbe, myri10g)`},
		{"pair unknown cluster", []edit{{"{a: vrije, b: amsterdam", "{a: foo, b: amsterdam"}}, `topology.links.pairs[0].a: unknown cluster "foo"`},
		{"pair names a cluster twice", []edit{{"{a: vrije, b: amsterdam", "{a: vrije, b: vrije"}},
			`topology.links.pairs[0].b: names cluster "vrije" twice`},
		{"pair given twice", []edit{{"- {a: vrije, b: amsterdam, latency_ms: 0.5}", "- {a: vrije, b: amsterdam, latency_ms: 0.5}\n      - {a: amsterdam, b: vrije, bandwidth_mbps: 100}"}},
			"topology.links.pairs[1]: pair amsterdam-vrije already overridden by topology.links.pairs[0]"},
		{"negative latency", []edit{{"latency_ms: 0.5", "latency_ms: -0.5"}}, "topology.links.pairs[0].latency_ms: must not be negative"},
		{"zero bandwidth", []edit{{"latency_ms: 0.5", "bandwidth_mbps: 0"}}, "topology.links.pairs[0].bandwidth_mbps: must be greater than 0"},
		{"pair overrides nothing", []edit{{", latency_ms: 0.5}", "}"}}, "topology.links.pairs[0]: overrides nothing"},

		// Policy.
		{"unknown policy", []edit{{"placement: fcm", "placement: xx"}}, `policy.placement: unknown policy "xx" (known: ca, cf, cm, fcm, wf)`},
		{"missing policy", []edit{{"placement: fcm", "max_clusters: 2"}}, "policy.placement: is required"},
		{"bad ca metric", []edit{{"placement: fcm", "placement: ca\n  ca_metric: hops"}}, `policy.ca_metric: unknown metric "hops"`},
		{"scan period zero", []edit{{"placement: fcm", "placement: fcm\n  scan_period_s: 0"}}, "policy.scan_period_s: must be greater than 0"},
		{"tries zero", []edit{{"placement: fcm", "placement: fcm\n  placement_tries: 0"}}, "policy.placement_tries: must be at least 1"},

		// Workload.
		{"unknown application", []edit{{"application: wave", "application: doom"}}, `workload.application: unknown application "doom"`},
		{"arrivals both", []edit{{"{net_utilization: 0.4}", "{net_utilization: 0.4, mean_interarrival_s: 60}"}},
			"workload.arrivals: give exactly one of net_utilization or mean_interarrival_s"},
		{"arrivals neither", []edit{{"{net_utilization: 0.4}", "{}"}}, "workload.arrivals: give exactly one of net_utilization or mean_interarrival_s"},
		{"utilisation above 1", []edit{{"{net_utilization: 0.4}", "{net_utilization: 1.5}"}}, "workload.arrivals.net_utilization: must be in (0, 1]"},
		{"no arrivals and no jobs", []edit{{"  arrivals: {net_utilization: 0.4}\n", ""}}, "workload: give arrivals"},
		{"size too large", []edit{{"sizes: [8, 16, 32]", "sizes: [8, 300]"}},
			"workload.sizes[1]: 300 exceeds the largest possible allocation (204 nodes on vrije, amsterdam, multimedian, leiden)"},
		{"size too large under max_clusters", []edit{{"sizes: [8, 16, 32]", "sizes: [8, 140]"}, {"placement: fcm", "placement: fcm\n  max_clusters: 2"}},
			"workload.sizes[1]: 140 exceeds the largest possible allocation (131 nodes on vrije, multimedian)"},
		{"size too large with both delft and leiden", []edit{{"exclude: [delft]", "exclude: [vrije]"}, {"sizes: [8, 16, 32]", "sizes: [8, 180]"}},
			"workload.sizes[1]: 180 exceeds the largest possible allocation (155 nodes on amsterdam, delft, multimedian)"},
		{"non-fixed components too large", []edit{{"request: flexible", "request: non-fixed\n  components: 2"}, {"sizes: [8, 16, 32]", "sizes: [8, 180]"}},
			"workload.sizes[1]: 180 exceeds the largest possible allocation: 2 components of 90+90 nodes"},
		{"components with flexible", []edit{{"request: flexible", "request: flexible\n  components: 2"}},
			"workload.components: applies to fixed and non-fixed requests only"},
		{"fixed clusters unavailable pair", []edit{{"exclude: [delft]", "exclude: [vrije]"}, {"request: flexible", "request: fixed\n  components: 2\n  fixed_clusters: [delft, leiden]"}},
			"workload.fixed_clusters: delft and leiden form an unavailable pair"},
		{"fixed clusters count mismatch", []edit{{"request: flexible", "request: fixed\n  components: 2\n  fixed_clusters: [vrije]"}},
			"workload.fixed_clusters: names 1 clusters for 2 components"},
		{"fixed clusters excluded", []edit{{"request: flexible", "request: fixed\n  components: 2\n  fixed_clusters: [vrije, delft]"}},
			`workload.fixed_clusters[1]: cluster "delft" is not included in this scenario`},
		{"replica of excluded cluster", []edit{{"application: wave", "application: wave\n  input_files: [{name: data, size_mb: 512, replicas: [delft]}]"}},
			`workload.input_files[0].replicas[0]: cluster "delft" is not included`},
		{"background max below min", []edit{{"request: flexible", "request: flexible\n  background: {min: 0.3, max: 0.1}"}},
			"workload.background.max: must not be below min"},
		{"explicit impossible job", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 0, size: 400}]"}},
			"workload.jobs[0].size: 400 exceeds the largest possible allocation"},
		{"explicit fixed job on an unavailable pair", []edit{{"exclude: [delft]", "exclude: [vrije]"}, {"request: flexible", "request: flexible\n  jobs: [{at_s: 0, request: fixed, components: [{cluster: delft, size: 8}, {cluster: leiden, size: 8}]}]"}},
			"workload.jobs[0].components: delft and leiden form an unavailable pair"},
		{"explicit fixed component too large", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 0, request: fixed, components: [{cluster: leiden, size: 40}]}]"}},
			"workload.jobs[0].components[0].size: 40 exceeds the 32 nodes of leiden"},
		{"explicit job outside window", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 4000, size: 8}]"}},
			"workload.jobs[0].at_s: 4000 is outside the submission window [0, 3600)"},
		{"explicit job unknown app", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 1, size: 8, application: doom}]"}},
			`workload.jobs[0].application: unknown application "doom"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := mutate(t, tc.edits...)
			s, err := Parse([]byte(doc), tc.name)
			if err == nil {
				err = s.Validate(fakeEnv())
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			found := false
			for _, e := range es {
				if strings.HasPrefix(e.Error(), tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want an error line with %q, got:\n%v", tc.want, err)
			}
		})
	}
	if len(cases) < 14 {
		t.Fatalf("only %d cases", len(cases))
	}
}

// TestAllErrorsCollected checks that validation reports every problem, not
// the first one, one per line.
func TestAllErrorsCollected(t *testing.T) {
	doc := mutate(t,
		edit{"seed: 7", "seed: 7\ntime_scale: 0"},
		edit{"{name: delft, nodes: 68", "{name: delft, nodes: 0"},
		edit{"latency_ms: 0.5", "latency_ms: -1"},
		edit{"placement: fcm", "placement: xx"},
	)
	s, err := Parse([]byte(doc), "many")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(fakeEnv())
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %v", err)
	}
	for _, p := range []string{"time_scale", "topology.clusters[2].nodes", "topology.links.pairs[0].latency_ms", "policy.placement"} {
		if !es.HasPath(p) {
			t.Errorf("no error at %s in:\n%v", p, err)
		}
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(es) {
		t.Errorf("Error() has %d lines for %d errors", got, len(es))
	}
}

// TestParseCollectsAllReadErrors checks that unknown fields and type errors
// are reported together, each with its path and line.
func TestParseCollectsAllReadErrors(t *testing.T) {
	doc := mutate(t,
		edit{"seed: 7", "sed: 7"},
		edit{"{name: vrije, nodes: 85", "{name: vrije, nodes: lots"},
		edit{"duration_s: 3600", "duration_s: [1]"},
	)
	_, err := Parse([]byte(doc), "read")
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
	for _, p := range []string{"sed", "topology.clusters[0].nodes", "workload.duration_s"} {
		if !es.HasPath(p) {
			t.Errorf("no error at %s in:\n%v", p, err)
		}
	}
}

func TestSyntaxErrorNamesFile(t *testing.T) {
	_, err := Parse([]byte("name: [unclosed\n"), "broken.yaml")
	if err == nil || !strings.Contains(err.Error(), "broken.yaml") || !strings.Contains(err.Error(), "line") {
		t.Fatalf("want a syntax error naming the file and line, got %v", err)
	}
	_, err = Parse(nil, "empty.yaml")
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("want an empty-document error, got %v", err)
	}
	_, err = Parse([]byte(base+"---\nname: second\n"), "two.yaml")
	if err == nil || !strings.Contains(err.Error(), "one YAML document") {
		t.Fatalf("want a two-documents error, got %v", err)
	}
}

func TestValidateNilEnvListsSkipChecks(t *testing.T) {
	s, err := Parse([]byte(mutate(t, edit{"application: wave", "application: anything"}, edit{"placement: fcm", "placement: whatever"})), "nil")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeEnv()
	env.Apps, env.Policies = nil, nil
	if err := s.Validate(env); err != nil {
		t.Fatalf("nil lists must skip the name checks: %v", err)
	}
	env.Nominal = nil
	if err := s.Validate(env); err == nil || !strings.Contains(err.Error(), "workload.arrivals.net_utilization: needs") {
		t.Fatalf("net utilisation without Nominal must fail, got %v", err)
	}
}

func TestNominalErrorIsReported(t *testing.T) {
	s, err := Parse([]byte(base), "nominal")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeEnv()
	env.Nominal = func(app string, nodes int) (time.Duration, error) {
		if nodes == 16 {
			return 0, errors.New("no profile")
		}
		return time.Minute, nil
	}
	err = s.Validate(env)
	if err == nil || !strings.Contains(err.Error(), "workload.sizes[1]: nominal time of wave on 16 nodes: no profile") {
		t.Fatalf("got %v", err)
	}
}
