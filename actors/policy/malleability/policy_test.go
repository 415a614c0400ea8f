package malleability

import (
	"errors"
	"reflect"
	"testing"
)

func nbody(id string, start int64, size int) Job {
	return Job{ID: id, Start: start, Size: size, Min: 2, Max: 46}
}

func ft(id string, start int64, size int) Job {
	return Job{ID: id, Start: start, Size: size, Min: 2, Max: 32, PowerOfTwo: true}
}

type policyCase struct {
	name string
	jobs []Job
	n    int // free (grow) or need (shrink)
	want []Change
}

func runPolicyCases(t *testing.T, f func([]Job, int) []Change, cases []policyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := append([]Job(nil), c.jobs...)
			got := f(c.jobs, c.n)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if !reflect.DeepEqual(before, c.jobs) {
				t.Errorf("policy modified its input")
			}
		})
	}
}

func TestFPSMAGrow(t *testing.T) {
	runPolicyCases(t, FPSMA().Grow, []policyCase{
		{"earliest takes all it accepts, next gets the rest",
			[]Job{nbody("c", 3, 2), nbody("a", 1, 2), nbody("b", 2, 2)}, 50,
			[]Change{{"a", 44}, {"b", 6}}},
		{"FT takes a power of two, the rest goes on",
			[]Job{ft("a", 1, 4), nbody("b", 2, 2)}, 10,
			[]Change{{"a", 4}, {"b", 6}}},
		{"FT offered too little for the next power of two takes nothing",
			[]Job{ft("a", 1, 4), nbody("b", 2, 2)}, 3,
			[]Change{{"b", 3}}},
		{"FT from 4 offered 20 lands on 16",
			[]Job{ft("a", 1, 4)}, 20,
			[]Change{{"a", 12}}},
		{"job maxima cap growth", // b's own max 10 below the profile's 46
			[]Job{nbody("a", 1, 45), {ID: "b", Start: 2, Size: 4, Min: 2, Max: 10}}, 20,
			[]Change{{"a", 1}, {"b", 6}}},
		{"nothing free", []Job{nbody("a", 1, 2)}, 0, nil},
		{"no jobs", nil, 5, nil},
	})
}

func TestFPSMAShrink(t *testing.T) {
	runPolicyCases(t, FPSMA().Shrink, []policyCase{
		{"latest first until enough",
			[]Job{nbody("a", 1, 10), nbody("c", 3, 10), nbody("b", 2, 10)}, 12,
			[]Change{{"c", -8}, {"b", -4}}},
		{"FT lands on a power of two and releases more than asked",
			[]Job{nbody("a", 1, 10), ft("b", 2, 16)}, 3,
			[]Change{{"b", -8}}},
		{"FT asked below its minimum stops at the minimum",
			[]Job{nbody("a", 1, 10), ft("b", 2, 16)}, 20,
			[]Change{{"b", -14}, {"a", -6}}},
		{"not enough above minimum: everyone to minimum",
			[]Job{nbody("a", 1, 5), nbody("b", 2, 3)}, 10,
			[]Change{{"b", -1}, {"a", -3}}},
		{"nothing needed", []Job{nbody("a", 1, 10)}, 0, nil},
	})
}

func TestEGSGrow(t *testing.T) {
	runPolicyCases(t, EGS().Grow, []policyCase{
		{"equal split, bonus of one to the earliest",
			[]Job{nbody("c", 3, 2), nbody("a", 1, 20), nbody("b", 2, 7)}, 10,
			[]Change{{"a", 4}, {"b", 3}, {"c", 3}}},
		{"fewer processors than jobs: one each to the earliest",
			[]Job{nbody("a", 1, 2), nbody("b", 2, 2), nbody("c", 3, 2)}, 2,
			[]Change{{"a", 1}, {"b", 1}}},
		{"a job capped by its maximum: leftover split again among the others",
			// shares 3,3,3; a takes 1; leftover 2 -> b, c one each
			[]Job{nbody("a", 1, 45), nbody("b", 2, 2), nbody("c", 3, 2)}, 9,
			[]Change{{"a", 1}, {"b", 4}, {"c", 4}}},
		{"FT share is a power of two step",
			[]Job{ft("a", 1, 4), nbody("b", 2, 2)}, 8,
			[]Change{{"a", 4}, {"b", 4}}},
		{"FT share too small: leftover goes to who accepts it",
			// shares 4 (nbody, earliest) and 3 (FT takes 0); leftover 3 only nbody accepts
			[]Job{nbody("a", 1, 2), ft("b", 2, 4)}, 7,
			[]Change{{"a", 7}}},
		{"FT bonus makes the step",
			[]Job{ft("a", 1, 4), nbody("b", 2, 2)}, 7,
			[]Change{{"a", 4}, {"b", 3}}},
		{"round places nothing: latest dropped, earliest FT takes its step",
			[]Job{ft("a", 1, 4), ft("b", 2, 4)}, 6,
			[]Change{{"a", 4}}},
		{"nobody accepts anything", []Job{ft("a", 1, 32), ft("b", 2, 4)}, 3, nil},
	})
}

func TestEGSShrink(t *testing.T) {
	runPolicyCases(t, EGS().Shrink, []policyCase{
		{"equal split, malus of one on the latest",
			[]Job{nbody("c", 3, 10), nbody("a", 1, 10), nbody("b", 2, 10)}, 10,
			[]Change{{"a", -3}, {"b", -3}, {"c", -4}}},
		{"fewer processors than jobs: one each from the latest",
			[]Job{nbody("a", 1, 10), nbody("b", 2, 10), nbody("c", 3, 10)}, 2,
			[]Change{{"b", -1}, {"c", -1}}},
		{"a job at its minimum: deficit split again",
			// shares 3,3,3; a gives 1; deficit 2 -> b, c one each
			[]Job{nbody("a", 1, 3), nbody("b", 2, 10), nbody("c", 3, 10)}, 9,
			[]Change{{"a", -1}, {"b", -4}, {"c", -4}}},
		{"FT shrinks to powers of two and may over-release",
			[]Job{ft("a", 1, 16), ft("b", 2, 16)}, 4,
			[]Change{{"a", -8}, {"b", -8}}},
		{"jobs at minimum are left out of the split",
			[]Job{nbody("a", 1, 2), nbody("b", 2, 6)}, 4,
			[]Change{{"b", -4}}},
		{"not enough above minimum: everyone to minimum",
			[]Job{nbody("a", 1, 5), ft("b", 2, 8)}, 20,
			[]Change{{"a", -3}, {"b", -6}}},
	})
}

func TestJobTakeRelease(t *testing.T) {
	cases := []struct {
		j                Job
		arg, take, relse int
	}{
		{ft("f", 0, 4), 3, 0, 2},
		{ft("f", 0, 4), 4, 4, 2},
		{ft("f", 0, 16), 3, 0, 8},
		{ft("f", 0, 16), 8, 0, 8},
		{ft("f", 0, 16), 16, 16, 14},
		{ft("f", 0, 32), 1, 0, 16},
		{nbody("n", 0, 44), 5, 2, 5},
		{nbody("n", 0, 2), 5, 5, 0},
		// FT with a non-power-of-two minimum: its floor is the next power of two.
		{Job{ID: "g", Size: 8, Min: 3, Max: 32, PowerOfTwo: true}, 8, 8, 4},
		// Not a power-of-two application: any count in [Min, Max].
		{Job{ID: "u", Size: 5, Min: 1, Max: 6}, 3, 1, 3},
	}
	for _, c := range cases {
		if got := c.j.Take(c.arg); got != c.take {
			t.Errorf("%+v.Take(%d) = %d, want %d", c.j, c.arg, got, c.take)
		}
		if got := c.j.Release(c.arg); got != c.relse {
			t.Errorf("%+v.Release(%d) = %d, want %d", c.j, c.arg, got, c.relse)
		}
	}
}

func TestRegistry(t *testing.T) {
	for name, f := range Registry() {
		if got := f().Name(); got != name {
			t.Errorf("Registry()[%q]().Name() = %q", name, got)
		}
		p, err := New(" " + name + " ")
		if err != nil || p.Name() != name {
			t.Errorf("New(%q) = %v, %v", name, p, err)
		}
	}
	if p, err := New("EGS"); err != nil || p.Name() != "egs" {
		t.Errorf("New(EGS) = %v, %v", p, err)
	}
	if _, err := New("equipartition"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("New(unknown) error = %v, want ErrUnknownPolicy", err)
	}
	if len(Registry()) != 2 {
		t.Errorf("Registry() has %d policies, want 2", len(Registry()))
	}
	for _, name := range []string{"pra", "PWA"} {
		if a, err := NewApproach(name); err != nil || a == nil {
			t.Errorf("NewApproach(%q) = %v", name, err)
		}
	}
	if _, err := NewApproach("fifo"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("NewApproach(unknown) error = %v, want ErrUnknownPolicy", err)
	}
}
