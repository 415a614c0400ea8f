package scenarios

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// mbase is a valid malleability scenario (the SPEC §4 workload in small);
// the cases below edit it.
const mbase = `name: m
seed: 3
topology:
  clusters:
    - {name: vrije, nodes: 170, processors: 1}
    - {name: amsterdam, nodes: 82, processors: 1}
    - {name: delft, nodes: 136, processors: 1}
    - {name: multimedian, nodes: 92, processors: 1}
    - {name: leiden, nodes: 64, processors: 1}
  exclude: [delft]
  links:
    preset: das3
workload:
  applications: [ft, nbody]
  arrivals: {mean_interarrival_s: 120}
  max_jobs: 300
  duration_s: 72000
  sizes: [2]
  request: non-fixed
  components: 1
  malleable:
    fraction: 1.0
    bounds:
      ft: {min: 2, max: 32}
      nbody: {min: 2, max: 46}
  jobs:
    - {at_s: 5, application: nbody, size: 4, malleable: true, max: 20}
policy:
  placement: wf
  malleability:
    approach: pra
    policy: fpsma
    threshold: 0.9
`

func mmutate(t *testing.T, edits ...edit) string {
	t.Helper()
	s := mbase
	for _, e := range edits {
		if !strings.Contains(s, e.old) {
			t.Fatalf("test bug: %q not in the malleable base scenario", e.old)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return s
}

// wantError fails unless err is Errors with a line starting with want.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want Errors: %v", err, err)
	}
	for _, e := range es {
		if strings.HasPrefix(e.Error(), want) {
			return
		}
	}
	t.Fatalf("want an error line starting with %q, got:\n%v", want, err)
}

func TestMalleableBaseIsValid(t *testing.T) {
	s, err := Parse([]byte(mbase), "mbase")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(fakeEnv()); err != nil {
		t.Fatalf("malleable base scenario invalid:\n%v", err)
	}
}

func TestMalleableMalformed(t *testing.T) {
	const job = "{at_s: 5, application: nbody, size: 4, malleable: true, max: 20}"
	cases := []struct {
		name  string
		edits []edit
		env   func(*Env)
		want  string
	}{
		// Reading the YAML.
		{"unknown field in malleable", []edit{{"fraction: 1.0", "fractoin: 1.0"}}, nil, "workload.malleable.fractoin: line 22: unknown field"},
		{"unknown field in bounds", []edit{{"ft: {min: 2, max: 32}", "ft: {min: 2, maxi: 32}"}}, nil, "workload.malleable.bounds.ft.maxi: line 24: unknown field"},
		{"unknown field in policy.malleability", []edit{{"threshold: 0.9", "treshold: 0.9"}}, nil, "policy.malleability.treshold: line 33: unknown field"},
		{"threshold not a number", []edit{{"threshold: 0.9", "threshold: high"}}, nil, `policy.malleability.threshold: line 33: "high" is not a number`},
		{"malleable not a bool", []edit{{"malleable: true", "malleable: maybe"}}, nil, `workload.jobs[0].malleable: line 27: "maybe" is not true or false`},
		{"bound not an integer", []edit{{"ft: {min: 2, max: 32}", "ft: {min: 2.5, max: 32}"}}, nil, `workload.malleable.bounds.ft.min: line 24: "2.5" is not an integer`},

		// workload.applications.
		{"application and applications", []edit{{"applications: [ft, nbody]", "application: ft\n  applications: [ft, nbody]"}}, nil,
			"workload.applications: give application or applications, not both"},
		{"applications empty", []edit{{"applications: [ft, nbody]", "applications: []"}}, nil, "workload.applications: must name at least one application"},
		{"applications unknown", []edit{{"applications: [ft, nbody]", "applications: [ft, doom]"}}, nil, `workload.applications[1]: unknown application "doom"`},
		{"applications twice", []edit{{"applications: [ft, nbody]", "applications: [ft, nbody, ft]"}}, nil, `workload.applications[2]: application "ft" named twice (also workload.applications[0])`},
		{"applications without arrivals", []edit{{"  arrivals: {mean_interarrival_s: 120}\n", ""}}, nil, "workload.applications: applies to generated jobs"},
		{"no application for generated jobs", []edit{{"  applications: [ft, nbody]\n", ""}}, nil, "workload.application: is required for generated jobs"},
		{"application cannot resize", []edit{{"applications: [ft, nbody]", "applications: [ft, wave]"}}, nil,
			`workload.applications[1]: application "wave" cannot resize (malleable applications: ft, nbody)`},
		{"application without profile", nil, func(e *Env) { delete(e.Profiles, "nbody") },
			`workload.applications[1]: application "nbody" has no malleability profile (profiles: ft)`},
		{"single application cannot resize", []edit{{"applications: [ft, nbody]", "application: wave"}}, nil,
			`workload.application: application "wave" cannot resize`},

		// workload.malleable.
		{"fraction above 1", []edit{{"fraction: 1.0", "fraction: 1.5"}}, nil, "workload.malleable.fraction: must be in [0, 1], got 1.5"},
		{"fraction negative", []edit{{"fraction: 1.0", "fraction: -0.1"}}, nil, "workload.malleable.fraction: must be in [0, 1], got -0.1"},
		{"bound min zero", []edit{{"ft: {min: 2, max: 32}", "ft: {min: 0, max: 32}"}}, nil, "workload.malleable.bounds.ft.min: must be at least 1, got 0"},
		{"bound max below min", []edit{{"ft: {min: 2, max: 32}", "ft: {min: 8, max: 4}"}}, nil, "workload.malleable.bounds.ft.max: must not be below min (8), got 4"},
		{"bounds outside the profile", []edit{{"nbody: {min: 2, max: 46}", "nbody: {min: 50, max: 60}"}}, nil,
			"workload.malleable.bounds.nbody: [50, 60] leaves no size nbody can run on (its profile: 2..46)"},
		{"bounds without a power of two", []edit{{"ft: {min: 2, max: 32}", "ft: {min: 5, max: 7}"}}, nil,
			"workload.malleable.bounds.ft: [5, 7] leaves no size ft can run on (its profile: 2..32, powers of two)"},
		{"bounds of an unknown application", []edit{{"nbody: {min: 2, max: 46}", "nbody: {min: 2, max: 46}\n      doom: {min: 2}"}}, nil,
			`workload.malleable.bounds.doom: unknown application "doom"`},
		{"bounds of a rigid application", []edit{{"nbody: {min: 2, max: 46}", "nbody: {min: 2, max: 46}\n      wave: {min: 2, max: 8}"}}, nil,
			`workload.malleable.bounds.wave: application "wave" cannot resize`},
		{"bounds needed without profiles", []edit{{"      nbody: {min: 2, max: 46}\n", ""}}, func(e *Env) { e.Profiles = nil },
			"workload.malleable.bounds.nbody.min: is required: no malleability profile of nbody gives a default"},
		{"size not a power of two for ft", []edit{{"sizes: [2]", "sizes: [2, 3]"}}, nil,
			"workload.sizes[1]: 3 is not a valid initial size of malleable ft (sizes 2..32, powers of two; workload.malleable.fraction is 1)"},
		{"size below the bounds", []edit{{"nbody: {min: 2, max: 46}", "nbody: {min: 4, max: 46}"}}, nil,
			"workload.sizes[0]: 2 is not a valid initial size of malleable nbody (sizes 4..46"},
		{"malleable jobs without policy.malleability", []edit{{"  malleability:\n    approach: pra\n    policy: fpsma\n    threshold: 0.9\n", ""}}, nil,
			"workload.malleable: malleable jobs need policy.malleability"},

		// Explicit jobs.
		{"explicit malleable job without policy.malleability", []edit{{"  malleability:\n    approach: pra\n    policy: fpsma\n    threshold: 0.9\n", ""}}, nil,
			"workload.jobs[0].malleable: malleable jobs need policy.malleability"},
		{"bounds of a rigid job", []edit{{"malleable: true, max: 20", "max: 20"}}, nil, "workload.jobs[0].max: applies to malleable jobs only (set malleable: true)"},
		{"explicit job cannot resize", []edit{{"application: nbody, size: 4", "application: wave, size: 4"}}, nil,
			`workload.jobs[0].malleable: application "wave" cannot resize`},
		{"explicit job min zero", []edit{{"max: 20}", "min: 0, max: 20}"}}, nil, "workload.jobs[0].min: must be at least 1, got 0"},
		{"explicit job max below min", []edit{{"max: 20}", "min: 30, max: 20}"}}, nil, "workload.jobs[0].max: must not be below min (30), got 20"},
		{"explicit job outside the profile", []edit{{"size: 4, malleable: true, max: 20", "size: 50, malleable: true, min: 50, max: 60"}}, nil,
			"workload.jobs[0]: [50, 60] leaves no size nbody can run on (its profile: 2..46)"},
		{"explicit job size outside its bounds", []edit{{"max: 20}", "min: 6, max: 20}"}}, nil,
			"workload.jobs[0].size: 4 is not a valid initial size of malleable nbody (sizes 6..20)"},
		{"explicit ft job size not a power of two", []edit{{"application: nbody, size: 4", "application: ft, size: 6"}}, nil,
			"workload.jobs[0].size: 6 is not a valid initial size of malleable ft (sizes 2..16, powers of two)"},
		{"explicit job co-allocated", []edit{{"size: 4, malleable", "size: 4, components: [{size: 2}, {size: 2}], malleable"}}, nil,
			"workload.jobs[0].components: the malleability manager places every job on one cluster"},
		{"explicit job names no application", []edit{{"application: nbody, size: 4", "size: 4"}}, nil,
			"workload.jobs[0].application: is required (workload.application gives no default)"},
		{"explicit job above every cap", []edit{{job, "{at_s: 5, application: nbody, size: 160}"}}, nil,
			"workload.jobs[0].size: 160 exceeds what KOALA may hold on every included cluster (floor(threshold x processors): vrije 153, amsterdam 73, multimedian 82, leiden 57)"},
		{"explicit flexible job above every cap", []edit{{job, "{at_s: 5, application: nbody, size: 160, request: flexible}"}}, nil,
			"workload.jobs[0].size: 160 exceeds what KOALA may hold on every included cluster"},
		{"explicit fixed job above its cluster's cap", []edit{{job, "{at_s: 5, application: nbody, request: fixed, components: [{cluster: leiden, size: 60}]}"}}, nil,
			"workload.jobs[0].components[0].size: 60 exceeds the 57 processors KOALA may hold on leiden"},

		// policy.malleability and what it requires.
		{"approach missing", []edit{{"    approach: pra\n", ""}}, nil, "policy.malleability.approach: is required (known: pra, pwa)"},
		{"approach unknown", []edit{{"approach: pra", "approach: fifo"}}, nil, `policy.malleability.approach: unknown approach "fifo" (known: pra, pwa)`},
		{"policy missing", []edit{{"    policy: fpsma\n", ""}}, nil, "policy.malleability.policy: is required (known: egs, fpsma)"},
		{"policy unknown", []edit{{"policy: fpsma", "policy: equi"}}, nil, `policy.malleability.policy: unknown malleability policy "equi" (known: egs, fpsma)`},
		{"threshold zero", []edit{{"threshold: 0.9", "threshold: 0"}}, nil, "policy.malleability.threshold: must be in (0, 1], got 0"},
		{"threshold above 1", []edit{{"threshold: 0.9", "threshold: 1.2"}}, nil, "policy.malleability.threshold: must be in (0, 1], got 1.2"},
		{"thresholds unknown cluster", []edit{{"threshold: 0.9", "threshold: 0.9\n    thresholds: {nowhere: 0.5}"}}, nil,
			`policy.malleability.thresholds.nowhere: unknown cluster "nowhere"`},
		{"thresholds excluded cluster", []edit{{"threshold: 0.9", "threshold: 0.9\n    thresholds: {delft: 0.5}"}}, nil,
			`policy.malleability.thresholds.delft: cluster "delft" is not included in this scenario`},
		{"thresholds value", []edit{{"threshold: 0.9", "threshold: 0.9\n    thresholds: {leiden: 1.5}"}}, nil,
			"policy.malleability.thresholds.leiden: must be in (0, 1], got 1.5"},
		{"poll period zero", []edit{{"threshold: 0.9", "threshold: 0.9\n    poll_period_s: 0"}}, nil, "policy.malleability.poll_period_s: must be greater than 0, got 0"},
		{"op timeout negative", []edit{{"threshold: 0.9", "threshold: 0.9\n    op_timeout_s: -1"}}, nil, "policy.malleability.op_timeout_s: must be greater than 0, got -1"},
		{"max tries negative", []edit{{"threshold: 0.9", "threshold: 0.9\n    max_tries: -1"}}, nil, "policy.malleability.max_tries: must not be negative (0 means never), got -1"},
		{"placement not wf", []edit{{"placement: wf", "placement: fcm"}}, nil, `policy.placement: "fcm": the malleability manager places every job by Worst Fit on one cluster`},
		{"co-allocated generated jobs", []edit{{"components: 1", "components: 2"}}, nil, "workload.components: must be 1 with policy.malleability: the malleability manager does not co-allocate, got 2"},
		{"size above every cap", []edit{{"sizes: [2]", "sizes: [2, 160]"}}, nil,
			"workload.sizes[1]: 160 exceeds what KOALA may hold on every included cluster (floor(threshold x processors): vrije 153,"},
		{"threshold too low for the sizes", []edit{{"threshold: 0.9", "threshold: 0.01"}}, nil,
			"workload.sizes[0]: 2 exceeds what KOALA may hold on every included cluster (floor(threshold x processors): vrije 1, amsterdam 0, multimedian 0, leiden 0)"},
		{"fixed cluster cap", []edit{{"components: 1", "components: 1\n  fixed_clusters: [leiden]"}, {"request: non-fixed", "request: fixed"},
			{"threshold: 0.9", "threshold: 0.9\n    thresholds: {leiden: 0.02}"}}, nil,
			"workload.sizes[0]: 2 exceeds the 1 processors KOALA may hold on leiden"},
		{"dual-processor nodes", []edit{{"{name: leiden, nodes: 64, processors: 1}", "{name: leiden, nodes: 64}"}}, nil,
			"topology.clusters[4].processors: must be 1 with policy.malleability (every processor is a single-processor node; sizes count processors), got 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := mmutate(t, tc.edits...)
			env := fakeEnv()
			if tc.env != nil {
				tc.env(&env)
			}
			s, err := Parse([]byte(doc), tc.name)
			if err == nil {
				err = s.Validate(env)
			}
			wantError(t, err, tc.want)
		})
	}
}

// TestMalleableEnvNilListsSkipChecks: nil Approaches, MalleabilityPolicies
// and MalleableApps skip those name checks, as nil Apps and Policies do.
func TestMalleableEnvNilListsSkipChecks(t *testing.T) {
	s, err := Parse([]byte(mmutate(t, edit{"approach: pra", "approach: anything"}, edit{"policy: fpsma", "policy: whatever"})), "nil")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeEnv()
	if err := s.Validate(env); err == nil {
		t.Fatal("unknown approach and policy accepted")
	}
	env.Approaches, env.MalleabilityPolicies, env.MalleableApps = nil, nil, nil
	if err := s.Validate(env); err != nil {
		t.Fatalf("nil lists must skip the name checks: %v", err)
	}
	// Without profiles the bounds come from the scenario alone.
	env.Profiles = nil
	p, err := s.Expand(env, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range p.Jobs {
		want := map[string]int{"ft": 32, "nbody": 46}[j.App]
		if j.Submit == 5*time.Second && j.Size == 4 {
			want = 20
		}
		if !j.Malleable || j.Min != 2 || j.Max != want {
			t.Fatalf("job %+v, want bounds 2..%d", j, want)
		}
	}
}

func TestMalleablePlan(t *testing.T) {
	p := expand(t, mbase, fakeEnv(), Overrides{})
	want := &Malleability{Approach: "pra", Policy: "fpsma", Threshold: 0.9, PollPeriod: 30 * time.Second, OpTimeout: time.Hour}
	if !reflect.DeepEqual(p.Policy.Malleability, want) {
		t.Errorf("malleability %+v, want %+v", p.Policy.Malleability, want)
	}
	if len(p.Jobs) != 301 {
		t.Fatalf("%d jobs, want 300 generated + 1 explicit", len(p.Jobs))
	}
	counts := map[string]int{}
	explicit := 0
	for _, j := range p.Jobs {
		if !j.Malleable {
			t.Fatalf("rigid job at fraction 1: %+v", j)
		}
		if j.Submit == 5*time.Second && j.Size == 4 {
			explicit++
			if j.App != "nbody" || j.Min != 2 || j.Max != 20 {
				t.Errorf("explicit job %+v, want nbody 2..20 (min from the workload bounds)", j)
			}
			continue
		}
		counts[j.App]++
		switch {
		case j.Size != 2 || j.Request != NonFixed || len(j.Components) != 1:
			t.Fatalf("generated job %+v", j)
		case j.App == "ft" && (j.Min != 2 || j.Max != 32):
			t.Fatalf("ft job bounds %d..%d", j.Min, j.Max)
		case j.App == "nbody" && (j.Min != 2 || j.Max != 46):
			t.Fatalf("nbody job bounds %d..%d", j.Min, j.Max)
		}
	}
	if explicit != 1 {
		t.Errorf("explicit job found %d times", explicit)
	}
	// Uniform mix: 300 fair draws stay within 120..180 of each (about 3.5 sigma).
	if counts["ft"]+counts["nbody"] != 300 || counts["ft"] < 120 || counts["ft"] > 180 {
		t.Errorf("application mix %v", counts)
	}

	// Explicit settings, per-cluster thresholds, bounds rounded to powers of
	// two, bounds from the profile for an explicit job without workload bounds.
	q := expand(t, mmutate(t,
		edit{"threshold: 0.9", "threshold: 0.8\n    thresholds: {leiden: 0.5}\n    poll_period_s: 10\n    op_timeout_s: 600\n    max_tries: 5"},
		edit{"max: 20}", "max: 20}\n    - {at_s: 6, application: ft, size: 8, malleable: true, max: 31}"},
		edit{"ft: {min: 2, max: 32}", "ft: {min: 3, max: 20}"},
		edit{"sizes: [2]", "sizes: [4]"},
		edit{"      nbody: {min: 2, max: 46}\n", ""},
	), fakeEnv(), Overrides{})
	m := q.Policy.Malleability
	if m.Threshold != 0.8 || !reflect.DeepEqual(m.Thresholds, map[string]float64{"leiden": 0.5}) || m.PollPeriod != 10*time.Second ||
		m.OpTimeout != 10*time.Minute || m.MaxTries != 5 {
		t.Errorf("malleability %+v", m)
	}
	if m.ThresholdOf("leiden") != 0.5 || m.ThresholdOf("vrije") != 0.8 {
		t.Errorf("ThresholdOf: leiden %g, vrije %g", m.ThresholdOf("leiden"), m.ThresholdOf("vrije"))
	}
	for _, j := range q.Jobs {
		switch {
		case j.Submit == 5*time.Second && j.Size == 4 && j.App == "nbody":
			if j.Min != 2 || j.Max != 20 {
				t.Errorf("explicit nbody bounds %d..%d, want 2..20 (min from the profile)", j.Min, j.Max)
			}
		case j.Submit == 6*time.Second && j.Size == 8:
			if j.Min != 4 || j.Max != 16 {
				t.Errorf("explicit ft bounds %d..%d, want 4..16 (workload min 3 and max 31 rounded inwards)", j.Min, j.Max)
			}
		case j.App == "ft":
			if j.Min != 4 || j.Max != 16 {
				t.Fatalf("generated ft bounds %d..%d, want 4..16 (3..20 rounded inwards)", j.Min, j.Max)
			}
		case j.App == "nbody":
			if j.Min != 2 || j.Max != 46 {
				t.Fatalf("generated nbody bounds %d..%d, want the profile's 2..46", j.Min, j.Max)
			}
		}
	}
}

// TestMalleableFractionMovesNothingElse: the fraction decides only which
// jobs are malleable; arrivals, sizes and applications stay, and a job
// malleable at a fraction stays malleable at a larger one.
func TestMalleableFractionMovesNothingElse(t *testing.T) {
	doc := mmutate(t, edit{"sizes: [2]", "sizes: [2, 4, 8]"})
	env := fakeEnv()
	var prev *Plan
	for _, f := range []float64{0, 0.3, 0.5, 1} {
		p := expand(t, doc, env, Overrides{MalleableFraction: &f})
		mall := 0
		for i, j := range p.Jobs {
			if j.Malleable {
				mall++
				if j.Min == 0 || j.Max == 0 {
					t.Fatalf("fraction %g: malleable job without bounds %+v", f, j)
				}
			} else if j.Min != 0 || j.Max != 0 {
				t.Fatalf("fraction %g: rigid job with bounds %+v", f, j)
			}
			if prev == nil {
				continue
			}
			o := prev.Jobs[i]
			if j.ID != o.ID || j.Submit != o.Submit || j.Size != o.Size || j.App != o.App {
				t.Fatalf("fraction %g moved job %d: %+v, was %+v", f, i, j, o)
			}
			if o.Malleable && !j.Malleable {
				t.Fatalf("job %s malleable at a smaller fraction, rigid at %g", j.ID, f)
			}
		}
		generated := len(p.Jobs) - 1 // the explicit job is always malleable
		share := float64(mall-1) / float64(generated)
		if math.Abs(share-f) > 0.1 {
			t.Errorf("fraction %g: %d of %d generated jobs malleable", f, mall-1, generated)
		}
		prev = p
	}

	// A single application draws nothing from the application stream: the
	// arrivals and sizes equal those of the mixed workload.
	mixed := expand(t, doc, env, Overrides{})
	single := expand(t, mmutate(t, edit{"sizes: [2]", "sizes: [2, 4, 8]"}, edit{"applications: [ft, nbody]", "application: nbody"}), env, Overrides{})
	if len(single.Jobs) != len(mixed.Jobs) {
		t.Fatalf("%d vs %d jobs", len(single.Jobs), len(mixed.Jobs))
	}
	for i := range single.Jobs {
		if single.Jobs[i].Submit != mixed.Jobs[i].Submit || single.Jobs[i].Size != mixed.Jobs[i].Size || single.Jobs[i].App != "nbody" {
			t.Fatalf("job %d: %+v vs %+v", i, single.Jobs[i], mixed.Jobs[i])
		}
	}

	// Without workload.malleable every generated job is rigid, and still
	// nothing else moves.
	rigid := expand(t, mmutate(t, edit{"sizes: [2]", "sizes: [2, 4, 8]"},
		edit{"  malleable:\n    fraction: 1.0\n    bounds:\n      ft: {min: 2, max: 32}\n      nbody: {min: 2, max: 46}\n", ""}), env, Overrides{})
	for i, j := range rigid.Jobs {
		o := mixed.Jobs[i]
		if j.Submit != o.Submit || j.Size != o.Size || j.App != o.App || j.Malleable != (j.Submit == 5*time.Second && j.Size == 4) {
			t.Fatalf("without workload.malleable, job %d: %+v, was %+v", i, j, o)
		}
	}

	// Same seed, same plan; another seed, other jobs.
	if again := expand(t, doc, env, Overrides{}); !reflect.DeepEqual(again, mixed) {
		t.Fatal("same scenario, same seed: plans differ")
	}
	seed := int64(4)
	if other := expand(t, doc, env, Overrides{Seed: &seed}); reflect.DeepEqual(other.Jobs, mixed.Jobs) {
		t.Fatal("another seed gave the same jobs")
	}
}

func TestMalleableOverrides(t *testing.T) {
	env := fakeEnv()
	s, err := Parse([]byte(mbase), "overrides")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.Expand(env, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	egs, pwa, half := "egs", "pwa", 0.5
	p, err := s.Expand(env, Overrides{MalleabilityPolicy: &egs, Approach: &pwa, MalleableFraction: &half})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Policy.Malleability; m.Policy != "egs" || m.Approach != "pwa" || m.Threshold != 0.9 {
		t.Errorf("overrides not applied: %+v", m)
	}
	rigid := 0
	for i, j := range p.Jobs {
		if !j.Malleable {
			rigid++
			if j.Size != 2 {
				t.Errorf("rigid job %+v, want size 2", j)
			}
		}
		if j.Submit != plain.Jobs[i].Submit || j.App != plain.Jobs[i].App {
			t.Fatalf("override moved job %d", i)
		}
	}
	if rigid < 120 || rigid > 180 {
		t.Errorf("%d rigid jobs of 300 at fraction 0.5", rigid)
	}
	// The scenario itself is unchanged.
	if s.Policy.Malleability.Policy != "fpsma" || s.Policy.Malleability.Approach != "pra" || *s.Workload.Malleable.Fraction != 1 {
		t.Error("Expand changed the scenario")
	}
	again, err := s.Expand(env, Overrides{})
	if err != nil || !reflect.DeepEqual(again, plain) {
		t.Fatalf("plan after overrides differs: %v", err)
	}

	// Fraction 0 makes every generated job rigid and skips the malleable
	// checks of the generated applications.
	zero := 0.0
	wave, err := Parse([]byte(mmutate(t, edit{"applications: [ft, nbody]", "applications: [ft, wave]"})), "wave")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wave.Expand(env, Overrides{}); err == nil {
		t.Fatal("wave accepted as malleable")
	}
	z, err := wave.Expand(env, Overrides{MalleableFraction: &zero})
	if err != nil {
		t.Fatalf("fraction 0: %v", err)
	}
	for _, j := range z.Jobs[1:] {
		if j.Malleable && j.Submit != 5*time.Second {
			t.Fatalf("malleable job at fraction 0: %+v", j)
		}
	}

	// Bad override values are reported at the field they replace.
	fcfs, fifo, big := "fcfs", "fifo", 1.5
	_, err = s.Expand(env, Overrides{MalleabilityPolicy: &fcfs, Approach: &fifo, MalleableFraction: &big})
	wantError(t, err, `policy.malleability.policy: unknown malleability policy "fcfs"`)
	wantError(t, err, `policy.malleability.approach: unknown approach "fifo"`)
	wantError(t, err, "workload.malleable.fraction: must be in [0, 1], got 1.5")

	// Overrides of blocks the scenario does not have.
	co, err := Parse([]byte(base), "base")
	if err != nil {
		t.Fatal(err)
	}
	_, err = co.Expand(env, Overrides{MalleabilityPolicy: &egs})
	wantError(t, err, "policy.malleability: the approach and malleability policy overrides need a policy.malleability block")
	_, err = co.Expand(env, Overrides{Approach: &pwa})
	wantError(t, err, "policy.malleability: the approach and malleability policy overrides need")
	_, err = co.Expand(env, Overrides{MalleableFraction: &half})
	wantError(t, err, "workload.malleable: the malleable fraction override needs a workload.malleable block")
	if p, err := co.Expand(env, Overrides{}); err != nil || p.Policy.Malleability != nil {
		t.Fatalf("co-allocation scenario: %v, malleability %+v", err, p.Policy.Malleability)
	}
}

// TestMixedNetUtilisation: the mean inter-arrival time of a net utilisation
// takes E[size x T(app, size)] over the uniform application and size sets.
func TestMixedNetUtilisation(t *testing.T) {
	env := fakeEnv()
	env.Nominal = func(app string, nodes int) (time.Duration, error) {
		switch app {
		case "ft":
			return 120 * time.Second, nil
		case "nbody":
			return 600 * time.Second, nil
		}
		return 0, errors.New("no such application")
	}
	p := expand(t, mmutate(t, edit{"{mean_interarrival_s: 120}", "{net_utilization: 0.5}"}, edit{"sizes: [2]", "sizes: [2, 4]"}), env, Overrides{})
	// (2x120 + 4x120 + 2x600 + 4x600) / 4 = 1080 processor-seconds per job,
	// over 0.5 x 408 processors.
	want := 1080.0 / (0.5 * 408)
	if got := p.MeanInterarrival.Seconds(); math.Abs(got-want) > 1e-6 || p.NetUtilization != 0.5 {
		t.Errorf("mean inter-arrival %.6f s, want %.6f s", got, want)
	}
}

// TestExplicitJobsNeedNoWorkloadApplication: a scenario of explicit jobs
// that all name their application needs no workload.application.
func TestExplicitJobsNeedNoWorkloadApplication(t *testing.T) {
	s, err := Parse([]byte(mutate(t, edit{"  application: wave\n", ""}, edit{"  arrivals: {net_utilization: 0.4}\n", "  jobs: [{at_s: 1, size: 8, application: prime}]\n"})), "explicit")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(fakeEnv()); err != nil {
		t.Fatal(err)
	}
}

func TestMalleableBuiltins(t *testing.T) {
	for _, c := range []struct {
		name     string
		approach string
		gap      time.Duration
	}{
		{"das3-malleable-pra", "pra", 2 * time.Minute},
		{"das3-malleable-pwa", "pwa", 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := builtinPlan(t, c.name)
			m := p.Policy.Malleability
			if m == nil || m.Approach != c.approach || m.Policy != "fpsma" || p.Policy.Placement != "wf" || p.MeanInterarrival != c.gap {
				t.Fatalf("policy %+v, malleability %+v, gap %v", p.Policy, m, p.MeanInterarrival)
			}
			for _, cl := range p.Clusters {
				if cl.Processors != 1 {
					t.Errorf("cluster %s has %d processors per node", cl.Name, cl.Processors)
				}
			}
			if len(p.Jobs) != 300 {
				t.Fatalf("%d jobs, want 300", len(p.Jobs))
			}
			apps := map[string]int{}
			for _, j := range p.Jobs {
				apps[j.App]++
				if !j.Malleable || j.Size != 2 || len(j.Components) > 1 {
					t.Fatalf("job %+v: W_m wants malleable jobs of initial size 2 on one cluster", j)
				}
			}
			if apps["ft"] < 120 || apps["nbody"] < 120 || len(apps) != 2 {
				t.Errorf("application mix %v", apps)
			}
			// Arrivals end plus the longest single run (n-body on 2
			// processors, 10 min) must take under 15 minutes of wall time.
			last := p.Jobs[len(p.Jobs)-1].Submit
			wall := (last + 10*time.Minute).Seconds() / p.TimeScale
			if wall > 15*60 {
				t.Errorf("last arrival at %v: about %.0f s of wall time", last, wall)
			}
			t.Logf("time scale %g: last arrival %v scenario, %.0f s wall (+ drain)", p.TimeScale, last, last.Seconds()/p.TimeScale)

			// W_mr: half of the jobs rigid of size 2.
			half := 0.5
			s, err := LoadBuiltin(c.name)
			if err != nil {
				t.Fatal(err)
			}
			mr, err := s.Expand(fakeEnv(), Overrides{MalleableFraction: &half})
			if err != nil {
				t.Fatal(err)
			}
			rigid := 0
			for i, j := range mr.Jobs {
				if !j.Malleable {
					rigid++
				}
				if j.Submit != p.Jobs[i].Submit || j.App != p.Jobs[i].App || j.Size != 2 {
					t.Fatalf("W_mr moved job %d", i)
				}
			}
			if rigid < 120 || rigid > 180 {
				t.Errorf("W_mr: %d rigid jobs of 300", rigid)
			}
		})
	}
}

func TestMalleableSmokeScenario(t *testing.T) {
	p := builtinPlan(t, "das3-malleable-smoke")
	if n := len(p.Jobs); n < 4 || n > 10 {
		t.Errorf("%d jobs, want a handful", n)
	}
	m := p.Policy.Malleability
	if m == nil || p.Policy.Placement != "wf" || len(m.Thresholds) == 0 {
		t.Fatalf("policy %+v", p.Policy)
	}
	kinds := map[string]bool{}
	fixed := false
	// Worst case: every job runs alone, one after the other, at its
	// slowest size (the initial size 2: n-body 10 min, FT 2 min).
	var end time.Duration
	for _, j := range p.Jobs {
		kind := j.App + "/rigid"
		if j.Malleable {
			kind = j.App + "/malleable"
		}
		kinds[kind] = true
		if j.Request == Fixed {
			fixed = true
		}
		end = max(end, j.Submit)
	}
	for _, j := range p.Jobs {
		switch j.App {
		case "ft":
			end += 2 * time.Minute
		case "nbody":
			end += 10 * time.Minute
		default:
			t.Fatalf("job %+v", j)
		}
	}
	for _, k := range []string{"ft/malleable", "ft/rigid", "nbody/malleable", "nbody/rigid"} {
		if !kinds[k] {
			t.Errorf("no %s job", k)
		}
	}
	if !fixed {
		t.Error("no fixed job")
	}
	if wall := end.Seconds() / p.TimeScale; wall >= 60 {
		t.Errorf("smoke run may need %.0f s of wall time", wall)
	}
	// Demand above what KOALA may hold, so that PWA has to shrink.
	demand, cap := 0, 0
	for _, j := range p.Jobs {
		demand += max(j.Size, j.Max)
	}
	for _, c := range p.Clusters {
		cap += int(math.Floor(m.ThresholdOf(c.Name)*float64(c.Nodes) + 1e-9))
	}
	if demand <= cap {
		t.Errorf("jobs want %d processors, KOALA may hold %d: no contention", demand, cap)
	}
	if !slices.Contains(clusterNames(p), "leiden") {
		t.Errorf("clusters %v", clusterNames(p))
	}
}

// TestMalleableFixedPick: a generated fixed job without fixed_clusters goes
// to a cluster that can hold it within KOALA's share.
func TestMalleableFixedPick(t *testing.T) {
	p := expand(t, mmutate(t,
		edit{"request: non-fixed", "request: fixed"},
		edit{"size: 4, malleable", "size: 4, request: non-fixed, malleable"},
		edit{"threshold: 0.9", "threshold: 0.9\n    thresholds: {vrije: 0.01, amsterdam: 0.01, multimedian: 0.01}"},
	), fakeEnv(), Overrides{})
	for _, j := range p.Jobs {
		if j.Request == Fixed && (len(j.Components) != 1 || j.Components[0].Cluster != "leiden") {
			t.Fatalf("job %+v, want it on leiden (vrije holds 1 processor for KOALA, amsterdam and multimedian 0)", j)
		}
	}
}
