package scenarios

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestBuiltinsListed(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if name, ok := strings.CutSuffix(f.Name(), ".yaml"); ok {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if got := Builtins(); !slices.Equal(got, want) {
		t.Fatalf("Builtins() = %v, files %v", got, want)
	}
	for _, name := range []string{"das3-smoke", "das3-coalloc", "das3-coalloc-delft", "cluster-count", "das3-malleable-pra", "das3-malleable-pwa", "das3-malleable-smoke"} {
		if !slices.Contains(want, name) {
			t.Errorf("built-in %s missing", name)
		}
	}
}

// TestBuiltinsValidAndRoundTrip validates every built-in, expands it, and
// checks that writing the parsed scenario back to YAML and reading it again
// gives the same plan.
func TestBuiltinsValidAndRoundTrip(t *testing.T) {
	env := fakeEnv()
	for _, name := range Builtins() {
		t.Run(name, func(t *testing.T) {
			s, err := LoadBuiltin(name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != name {
				t.Errorf("scenario name %q in file %s.yaml", s.Name, name)
			}
			if err := s.Validate(env); err != nil {
				t.Fatalf("invalid:\n%v", err)
			}
			p, err := s.Expand(env, Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Jobs) == 0 {
				t.Fatal("no jobs")
			}
			fromFile, err := Load(name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromFile.Topology, s.Topology) || !reflect.DeepEqual(fromFile.Workload, s.Workload) {
				t.Error("file and embedded copy differ")
			}
			out, err := yaml.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(out, name+" (round trip)")
			if err != nil {
				t.Fatalf("re-parse:\n%v\n%s", err, out)
			}
			p2, err := again.Expand(env, Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, p2) {
				t.Fatalf("round trip changed the plan\n%s", out)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	for _, ref := range []string{"das3-smoke", "das3-smoke.yaml", "./das3-smoke.yaml"} {
		s, err := Open(ref)
		if err != nil || s.Name != "das3-smoke" {
			t.Errorf("Open(%q): %v", ref, err)
		}
	}
	if _, err := Open("no-such-scenario"); err == nil || !strings.Contains(err.Error(), "das3-coalloc") {
		t.Errorf("unknown built-in: %v", err)
	}
	if _, err := Open("./missing.yaml"); err == nil {
		t.Error("missing file opened")
	}
}

func builtinPlan(t *testing.T, name string) *Plan {
	t.Helper()
	s, err := LoadBuiltin(name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Expand(fakeEnv(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func clusterNames(p *Plan) []string {
	var n []string
	for _, c := range p.Clusters {
		n = append(n, c.Name)
	}
	return n
}

func TestSmokeScenario(t *testing.T) {
	p := builtinPlan(t, "das3-smoke")
	if n := len(p.Jobs); n < 6 || n > 8 {
		t.Errorf("%d jobs, want 6-8", n)
	}
	if slices.Contains(clusterNames(p), "delft") || p.Policy.Placement != "fcm" {
		t.Errorf("clusters %v, placement %s", clusterNames(p), p.Policy.Placement)
	}
	if b := p.Background[0]; b.Min != 0.1 || b.Max != 0.3 {
		t.Errorf("background %+v", b)
	}
	apps := map[string]bool{}
	fixed2, big := false, false
	largestOther := 0 // nodes of the largest cluster but one
	for _, c := range p.Clusters[1:] {
		largestOther = max(largestOther, c.Nodes)
	}
	var end time.Duration
	env := fakeEnv()
	for _, j := range p.Jobs {
		apps[j.App] = true
		if j.Request == Fixed && len(j.Components) == 2 {
			fixed2 = true
		}
		if j.Request == Flexible && j.Size > largestOther && j.Size > p.Clusters[0].Nodes-32 {
			big = true
		}
		d, _ := env.Nominal(j.App, j.Size)
		end = max(end, j.Submit+d)
	}
	for _, a := range []string{"wave", "poisson", "prime", "allgather"} {
		if !apps[a] {
			t.Errorf("no %s job", a)
		}
	}
	if !fixed2 || !big {
		t.Errorf("want a fixed 2-component job (%v) and a flexible job that must span clusters (%v)", fixed2, big)
	}
	// A smoke run keeps to a short wall budget (the time scale follows
	// from it and the dilation, every job keeping 20 iterations).
	if p.WallBudget <= 0 || p.WallBudget > 90*time.Second || !p.DilationAuto {
		t.Errorf("wall budget %v, dilation auto %v", p.WallBudget, p.DilationAuto)
	}
	if end > 20*time.Minute {
		t.Errorf("smoke run spans %v of scenario time", end)
	}
}

func TestCoallocScenarios(t *testing.T) {
	for _, c := range []struct {
		name    string
		in, out string
		nodes   int
	}{
		{"das3-coalloc", "leiden", "delft", 204},
		{"das3-coalloc-delft", "delft", "leiden", 240},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := builtinPlan(t, c.name)
			names := clusterNames(p)
			if !slices.Contains(names, c.in) || slices.Contains(names, c.out) || len(names) != 4 || p.TotalNodes() != c.nodes {
				t.Errorf("clusters %v (%d nodes)", names, p.TotalNodes())
			}
			// The 4 hours of arrivals run within a wall budget of at most 20
			// minutes, at the dilation the host needs.
			if p.NetUtilization != 0.4 || p.Duration != 4*time.Hour || p.Policy.Placement != "fcm" || p.WallBudget <= 0 ||
				p.WallBudget > 20*time.Minute || !p.DilationAuto {
				t.Errorf("plan header: utilisation %v, duration %v, placement %s, budget %v", p.NetUtilization, p.Duration, p.Policy.Placement, p.WallBudget)
			}
			want := 6400.0 / (0.4 * float64(c.nodes))
			if got := p.MeanInterarrival.Seconds(); got < want-1e-6 || got > want+1e-6 {
				t.Errorf("mean inter-arrival %.3f s, want %.3f s", got, want)
			}
			for _, j := range p.Jobs {
				if j.App != "wave" || j.Request != Flexible || !slices.Contains([]int{8, 16, 32}, j.Size) {
					t.Fatalf("job %+v", j)
				}
			}
			for _, b := range p.Background {
				if b.Min != 0.1 || b.Max != 0.3 {
					t.Fatalf("background %+v", b)
				}
			}
		})
	}
}

func TestClusterCountScenario(t *testing.T) {
	p := builtinPlan(t, "cluster-count")
	if len(p.Clusters) != 5 || p.TotalNodes() != 272 {
		t.Errorf("clusters %v", clusterNames(p))
	}
	if l, _ := p.Links.Link("delft", "leiden"); !l.Unavailable {
		t.Errorf("delft-leiden %v, want unavailable", l)
	}
	if c, _ := p.Cluster("delft"); c.Interconnect != GbE {
		t.Errorf("delft interconnect %s", c.Interconnect)
	}
}
