package scenarios

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func expand(t *testing.T, doc string, env Env, o Overrides) *Plan {
	t.Helper()
	s, err := Parse([]byte(doc), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Expand(env, o)
	if err != nil {
		t.Fatalf("expand:\n%v", err)
	}
	return p
}

func TestSplit(t *testing.T) {
	cases := []struct {
		total, parts int
		want         []int
	}{
		{32, 3, []int{11, 11, 10}},
		{32, 2, []int{16, 16}},
		{32, 1, []int{32}},
		{10, 4, []int{3, 3, 2, 2}},
		{8, 8, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{7, 8, nil},
		{8, 0, nil},
	}
	for _, c := range cases {
		got := Split(c.total, c.parts)
		if !slices.Equal(got, c.want) {
			t.Errorf("Split(%d, %d) = %v, want %v", c.total, c.parts, got, c.want)
		}
		if got != nil {
			sum := 0
			for _, x := range got {
				sum += x
			}
			if sum != c.total || got[0]-got[len(got)-1] > 1 {
				t.Errorf("Split(%d, %d) = %v: not a near-equal split", c.total, c.parts, got)
			}
		}
	}
}

func TestPlanBasics(t *testing.T) {
	p := expand(t, base, fakeEnv(), Overrides{})
	if p.Name != "t" || p.Seed != 7 || p.TimeScale != 1 || p.Dilation != 1 {
		t.Errorf("header: %+v", p)
	}
	var names []string
	for _, c := range p.Clusters {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"vrije", "amsterdam", "multimedian", "leiden"}) {
		t.Errorf("clusters %v", names)
	}
	if p.TotalNodes() != 204 {
		t.Errorf("TotalNodes = %d, want 204", p.TotalNodes())
	}
	if c, _ := p.Cluster("leiden"); c.Processors != 2 || c.Speed != 1 || c.Interconnect != Myri10G {
		t.Errorf("leiden defaults: %+v", c)
	}
	if !slices.Equal(p.Links.Clusters, names) {
		t.Errorf("link matrix clusters %v", p.Links.Clusters)
	}
	// Override applied in both directions, the rest from the preset.
	va, _ := p.Links.Link("vrije", "amsterdam")
	av, _ := p.Links.Link("amsterdam", "vrije")
	if va.Latency != 500*time.Microsecond || av != va || va.MBps() != 185 {
		t.Errorf("vrije-amsterdam %v / %v", va, av)
	}
	if l, _ := p.Links.Link("leiden", "leiden"); l.MBps() != 530 {
		t.Errorf("leiden intra %v", l)
	}
	want := Policy{Placement: "fcm", CAMetric: "latency", ScanPeriod: 30 * time.Second, StartupDelay: 10 * time.Second,
		ProbePeriod: 300 * time.Second, PlacementTries: 30}
	if p.Policy != want {
		t.Errorf("policy %+v, want %+v", p.Policy, want)
	}
	if len(p.Background) != 4 || p.Background[0] != (Background{}) {
		t.Errorf("background %+v, want 4 zero bands", p.Background)
	}
	if p.Duration != time.Hour {
		t.Errorf("duration %v", p.Duration)
	}
}

func TestDeterminism(t *testing.T) {
	env := fakeEnv()
	a := expand(t, base, env, Overrides{})
	b := expand(t, base, env, Overrides{})
	if len(a.Jobs) < 10 {
		t.Fatalf("only %d jobs", len(a.Jobs))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same scenario, same seed: plans differ")
	}
	seed := int64(8)
	c := expand(t, base, env, Overrides{Seed: &seed})
	if c.Seed != 8 {
		t.Errorf("seed override not applied: %d", c.Seed)
	}
	if reflect.DeepEqual(a.Jobs, c.Jobs) {
		t.Fatal("different seeds gave the same jobs")
	}
	// The placement policy does not take part in the draw.
	wf := "wf"
	d := expand(t, base, env, Overrides{Placement: &wf})
	if d.Policy.Placement != "wf" || !reflect.DeepEqual(a.Jobs, d.Jobs) {
		t.Fatal("a placement override changed the jobs or was not applied")
	}
	// The request type does not move arrivals or sizes (separate streams).
	e := expand(t, mutate(t, edit{"request: flexible", "request: non-fixed\n  components: 2"}), env, Overrides{})
	if len(e.Jobs) != len(a.Jobs) {
		t.Fatalf("request type changed the job count: %d vs %d", len(e.Jobs), len(a.Jobs))
	}
	for i := range a.Jobs {
		if a.Jobs[i].Submit != e.Jobs[i].Submit || a.Jobs[i].Size != e.Jobs[i].Size {
			t.Fatalf("job %d moved when only the request type changed", i)
		}
	}
}

func TestGeneratedJobs(t *testing.T) {
	p := expand(t, mutate(t, edit{"application: wave", "application: wave\n  args: {steps: 1000}\n  input_files: [{name: data, size_mb: 512, replicas: [vrije]}]"}), fakeEnv(), Overrides{})
	for i, j := range p.Jobs {
		if want := fmt.Sprintf("j%04d", i+1); j.ID != want {
			t.Errorf("job %d ID %s, want %s", i, j.ID, want)
		}
		if i > 0 && j.Submit < p.Jobs[i-1].Submit {
			t.Errorf("jobs not sorted at %d", i)
		}
		if j.Submit < 0 || j.Submit >= p.Duration {
			t.Errorf("%s submitted at %v, outside [0, %v)", j.ID, j.Submit, p.Duration)
		}
		if j.App != "wave" || j.Request != Flexible || len(j.Components) != 0 || !slices.Contains([]int{8, 16, 32}, j.Size) {
			t.Errorf("%s: %+v", j.ID, j)
		}
		if j.Args["steps"] != 1000 || len(j.Files) != 1 || j.Files[0].Size != 512e6 || !slices.Equal(j.Files[0].Replicas, []string{"vrije"}) {
			t.Errorf("%s args/files: %v %+v", j.ID, j.Args, j.Files)
		}
	}
	// Jobs own their maps and slices.
	p.Jobs[0].Args["steps"] = 1
	p.Jobs[0].Files[0].Replicas[0] = "x"
	if p.Jobs[1].Args["steps"] != 1000 || p.Jobs[1].Files[0].Replicas[0] != "vrije" {
		t.Error("jobs share their args or files")
	}

	capped := expand(t, mutate(t, edit{"duration_s: 3600", "duration_s: 3600\n  max_jobs: 5"}), fakeEnv(), Overrides{})
	if len(capped.Jobs) != 5 {
		t.Fatalf("max_jobs 5 gave %d jobs", len(capped.Jobs))
	}
	for i, j := range capped.Jobs {
		if j.ID != p.Jobs[i].ID || j.Submit != p.Jobs[i].Submit || j.Size != p.Jobs[i].Size {
			t.Errorf("max_jobs changed job %d: %+v vs %+v", i, j, p.Jobs[i])
		}
	}
}

// TestNetUtilisation checks M = E[size x T(size)] / (rho x total nodes) and
// that the generated arrivals follow it.
func TestNetUtilisation(t *testing.T) {
	// Constant node-seconds: 200 s x 32 nodes = 6400 node-s for every size.
	p := expand(t, base, fakeEnv(), Overrides{})
	want := 6400.0 / (0.4 * 204)
	if got := p.MeanInterarrival.Seconds(); math.Abs(got-want) > 1e-6 {
		t.Errorf("mean inter-arrival %.6f s, want %.6f s", got, want)
	}
	if p.NetUtilization != 0.4 {
		t.Errorf("net utilisation %g", p.NetUtilization)
	}

	// Sizes with different work: T(n) = 1000 s / n + 10 s, so
	// E[n T(n)] = 1000 + 10 x E[n] = 1000 + 10 x 56/3.
	env := fakeEnv()
	env.Nominal = func(_ string, n int) (time.Duration, error) {
		return time.Duration(1000/float64(n)*float64(time.Second)) + 10*time.Second, nil
	}
	const duration = 2_000_000.0
	doc := mutate(t,
		edit{"{net_utilization: 0.4}", "{net_utilization: 0.5}"},
		edit{"duration_s: 3600", fmt.Sprintf("duration_s: %.0f", duration)},
	)
	p = expand(t, doc, env, Overrides{})
	want = (1000 + 10*56.0/3) / (0.5 * 204)
	if got := p.MeanInterarrival.Seconds(); math.Abs(got-want) > 1e-6 {
		t.Fatalf("mean inter-arrival %.6f s, want %.6f s", got, want)
	}
	// The empirical mean gap of ~170000 arrivals is within 2% of M (the
	// standard error is 0.25%); the job count within 2% of duration / M.
	n := len(p.Jobs)
	expected := duration / want
	if math.Abs(float64(n)-expected) > 0.02*expected {
		t.Errorf("%d jobs, expected about %.0f", n, expected)
	}
	last := p.Jobs[n-1].Submit.Seconds()
	if mean := last / float64(n); math.Abs(mean-want) > 0.02*want {
		t.Errorf("empirical mean gap %.3f s, want %.3f s", mean, want)
	}
	// Sizes are uniform over the set.
	count := map[int]int{}
	for _, j := range p.Jobs {
		count[j.Size]++
	}
	for _, s := range []int{8, 16, 32} {
		if f := float64(count[s]) / float64(n); math.Abs(f-1.0/3) > 0.02 {
			t.Errorf("size %d drawn with frequency %.3f", s, f)
		}
	}
	// Exponential gaps: the coefficient of variation is about 1.
	var sum, sq float64
	prev := 0.0
	for _, j := range p.Jobs {
		g := j.Submit.Seconds() - prev
		prev = j.Submit.Seconds()
		sum += g
		sq += g * g
	}
	m := sum / float64(n)
	cv := math.Sqrt(sq/float64(n)-m*m) / m
	if math.Abs(cv-1) > 0.05 {
		t.Errorf("coefficient of variation of the gaps %.3f, want about 1", cv)
	}

	// An explicit mean inter-arrival is used as given.
	p = expand(t, mutate(t, edit{"{net_utilization: 0.4}", "{mean_interarrival_s: 120}"}), fakeEnv(), Overrides{})
	if p.MeanInterarrival != 2*time.Minute || p.NetUtilization != 0 {
		t.Errorf("explicit mean: %v, rho %g", p.MeanInterarrival, p.NetUtilization)
	}
}

func TestComponents(t *testing.T) {
	doc := mutate(t,
		edit{"request: flexible", "request: non-fixed\n  components: 3"},
		edit{"sizes: [8, 16, 32]", "sizes: [32]"},
	)
	p := expand(t, doc, fakeEnv(), Overrides{})
	for _, j := range p.Jobs {
		if len(j.Components) != 3 {
			t.Fatalf("%s has %d components", j.ID, len(j.Components))
		}
		got := []int{j.Components[0].Size, j.Components[1].Size, j.Components[2].Size}
		if !slices.Equal(got, []int{11, 11, 10}) {
			t.Fatalf("%s components %+v, want 11+11+10", j.ID, j.Components)
		}
		for _, c := range j.Components {
			if c.Cluster != "" {
				t.Fatalf("%s: a non-fixed component names cluster %q", j.ID, c.Cluster)
			}
		}
	}

	doc = mutate(t,
		edit{"request: flexible", "request: fixed\n  components: 2\n  fixed_clusters: [leiden, vrije]"},
	)
	p = expand(t, doc, fakeEnv(), Overrides{})
	for _, j := range p.Jobs {
		want := []Component{{"leiden", j.Size / 2}, {"vrije", j.Size / 2}}
		if !slices.Equal(j.Components, want) {
			t.Fatalf("%s components %+v, want %+v", j.ID, j.Components, want)
		}
	}
}

// TestFixedChoiceAvoidsUnavailablePairs draws fixed jobs over all five DAS-3
// clusters (Delft-Leiden unavailable) and checks every choice.
func TestFixedChoiceAvoidsUnavailablePairs(t *testing.T) {
	for _, comps := range []int{2, 3} {
		t.Run(fmt.Sprint(comps), func(t *testing.T) {
			doc := mutate(t,
				edit{"  exclude: [delft]\n", ""},
				edit{"request: flexible", fmt.Sprintf("request: fixed\n  components: %d", comps)},
				edit{"sizes: [8, 16, 32]", "sizes: [8, 16, 32, 64]"},
				edit{"duration_s: 3600", "duration_s: 36000"},
			)
			p := expand(t, doc, fakeEnv(), Overrides{})
			used := map[string]int{}
			pairs := map[string]bool{}
			for _, j := range p.Jobs {
				if len(j.Components) != comps {
					t.Fatalf("%s has %d components", j.ID, len(j.Components))
				}
				seen := map[string]bool{}
				for _, c := range j.Components {
					cl, ok := p.Cluster(c.Cluster)
					if !ok || seen[c.Cluster] || c.Size > cl.Nodes {
						t.Fatalf("%s: bad component %+v", j.ID, c)
					}
					seen[c.Cluster] = true
					used[c.Cluster]++
				}
				if seen["delft"] && seen["leiden"] {
					t.Fatalf("%s spans delft and leiden: %+v", j.ID, j.Components)
				}
				names := slices.Sorted(func(yield func(string) bool) {
					for n := range seen {
						if !yield(n) {
							return
						}
					}
				})
				pairs[strings.Join(names, "+")] = true
			}
			for _, c := range p.Clusters {
				if used[c.Name] == 0 {
					t.Errorf("cluster %s never chosen over %d jobs", c.Name, len(p.Jobs))
				}
			}
			if len(pairs) < 4 {
				t.Errorf("only %d distinct cluster sets: %v", len(pairs), pairs)
			}
		})
	}

	// Only vrije (85) and delft (68) can hold 65 nodes: every job goes there.
	doc := mutate(t,
		edit{"  exclude: [delft]\n", ""},
		edit{"request: flexible", "request: fixed\n  components: 2"},
		edit{"sizes: [8, 16, 32]", "sizes: [130]"},
	)
	p := expand(t, doc, fakeEnv(), Overrides{})
	for _, j := range p.Jobs {
		got := []string{j.Components[0].Cluster, j.Components[1].Cluster}
		slices.Sort(got)
		if !slices.Equal(got, []string{"delft", "vrije"}) {
			t.Fatalf("%s on %v, want delft and vrije", j.ID, got)
		}
	}
}

func TestExplicitJobs(t *testing.T) {
	doc := mutate(t,
		edit{"application: wave", "application: wave\n  args: {steps: 100, width: 5}"},
		edit{"request: flexible", `request: flexible
  jobs:
    - {at_s: 50, size: 16, args: {steps: 7}}
    - {at_s: 0, application: prime, request: fixed, components: [{cluster: vrije, size: 8}, {cluster: leiden, size: 4}]}
    - {at_s: 10, application: poisson, request: non-fixed, size: 12, components: [{size: 6}, {size: 6}]}
    - {at_s: 20, request: non-fixed, size: 9}`},
		edit{"duration_s: 3600", "duration_s: 3600\n  max_jobs: 3"},
	)
	p := expand(t, doc, fakeEnv(), Overrides{})
	if len(p.Jobs) != 7 {
		t.Fatalf("%d jobs, want 4 explicit + 3 generated", len(p.Jobs))
	}
	byApp := map[string][]Job{}
	for _, j := range p.Jobs {
		byApp[j.App] = append(byApp[j.App], j)
	}
	prime := byApp["prime"]
	if len(prime) != 1 || prime[0].ID != "j0001" || prime[0].Size != 12 || prime[0].Request != Fixed ||
		!slices.Equal(prime[0].Components, []Component{{"vrije", 8}, {"leiden", 4}}) || prime[0].Args != nil {
		t.Errorf("prime job %+v", prime)
	}
	poisson := byApp["poisson"]
	if len(poisson) != 1 || !slices.Equal(poisson[0].Components, []Component{{"", 6}, {"", 6}}) {
		t.Errorf("poisson job %+v", poisson)
	}
	for _, j := range p.Jobs {
		if j.Submit == 50*time.Second && j.App == "wave" && j.Size == 16 {
			if j.Args["steps"] != 7 || j.Args["width"] != 5 {
				t.Errorf("args not merged: %v", j.Args)
			}
		}
		if j.Submit == 20*time.Second && !slices.Equal(j.Components, []Component{{"", 9}}) {
			t.Errorf("non-fixed job without components: %+v", j.Components)
		}
	}
}

func TestExplicitOnlyDuration(t *testing.T) {
	doc := mutate(t,
		edit{"  arrivals: {net_utilization: 0.4}\n  duration_s: 3600\n", ""},
		edit{"request: flexible", "request: flexible\n  jobs: [{at_s: 30, size: 8}, {at_s: 90, size: 8}]"},
	)
	p := expand(t, doc, fakeEnv(), Overrides{})
	if len(p.Jobs) != 2 || p.Duration != 90*time.Second || p.MeanInterarrival != 0 || p.NetUtilization != 0 {
		t.Errorf("explicit-only plan: %d jobs, duration %v, mean %v, rho %g", len(p.Jobs), p.Duration, p.MeanInterarrival, p.NetUtilization)
	}
}

func TestOverrides(t *testing.T) {
	s, err := Parse([]byte(base), "o")
	if err != nil {
		t.Fatal(err)
	}
	ts, dil, bad := 16.0, 2.0, "xx"
	p, err := s.Expand(fakeEnv(), Overrides{TimeScale: &ts, Dilation: &dil})
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeScale != 16 || p.Dilation != 2 {
		t.Errorf("time scale %g, dilation %g", p.TimeScale, p.Dilation)
	}
	if s.TimeScale != nil || s.Dilation != nil {
		t.Error("Expand changed the scenario")
	}
	// Links stay undilated in the plan.
	if l, _ := p.Links.Link("vrije", "vrije"); l.MBps() != 561 {
		t.Errorf("links dilated in the plan: %v", l)
	}
	zero := 0.0
	_, err = s.Expand(fakeEnv(), Overrides{Placement: &bad, TimeScale: &zero})
	var es Errors
	if !errors.As(err, &es) || !es.HasPath("policy.placement") || !es.HasPath("time_scale") {
		t.Fatalf("bad overrides: %v", err)
	}
	if s.Policy.Placement != "fcm" {
		t.Error("Expand changed the scenario's policy")
	}
}

func TestPairOverrides(t *testing.T) {
	doc := mutate(t,
		edit{"  exclude: [delft]\n", ""},
		edit{"- {a: vrije, b: amsterdam, latency_ms: 0.5}", `- {a: delft, b: leiden, latency_ms: 2, bandwidth_mbps: 20}
      - {a: vrije, b: multimedian, unavailable: true}`},
		edit{"sizes: [8, 16, 32]", "sizes: [8, 200]"},
	)
	p := expand(t, doc, fakeEnv(), Overrides{})
	dl, _ := p.Links.Link("leiden", "delft")
	if dl.Unavailable || dl.Latency != 2*time.Millisecond || dl.MBps() != 20 {
		t.Errorf("delft-leiden %v", dl)
	}
	if vm, _ := p.Links.Link("multimedian", "vrije"); !vm.Unavailable {
		t.Errorf("vrije-multimedian %v, want unavailable", vm)
	}

	// Making an unavailable pair available needs both figures.
	doc = mutate(t,
		edit{"  exclude: [delft]\n", ""},
		edit{"- {a: vrije, b: amsterdam, latency_ms: 0.5}", "- {a: delft, b: leiden, latency_ms: 2}"},
	)
	s, err := Parse([]byte(doc), "half")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(fakeEnv()); err == nil || !strings.Contains(err.Error(), "topology.links.pairs[0]: delft-leiden is unavailable in preset das3") {
		t.Fatalf("got %v", err)
	}
}
