package scenarios

import (
	"flag"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// expandDoc parses, validates and expands a document with the fake
// environment; it returns the plan or the error of whichever step failed.
func expandDoc(t *testing.T, doc string, o Overrides) (*Plan, error) {
	t.Helper()
	s, err := Parse([]byte(doc), t.Name())
	if err != nil {
		return nil, err
	}
	verr := s.Validate(fakeEnv())
	p, err := s.Expand(fakeEnv(), o)
	if (verr == nil) != (err == nil) && o == (Overrides{}) {
		t.Fatalf("Validate and Expand disagree: %v / %v", verr, err)
	}
	return p, err
}

func TestDilationAccepted(t *testing.T) {
	cases := []struct {
		name, line string
		factor     float64
		auto       bool
	}{
		{"absent", "", 1, false},
		{"null", "dilation: null", 1, false},
		{"one", "dilation: 1", 1, false},
		{"integer", "dilation: 4", 4, false},
		{"fraction", "dilation: 2.5", 2.5, false},
		{"exponent", "dilation: 1e3", 1000, false},
		{"largest", "dilation: 10000", MaxDilation, false},
		{"auto", "dilation: auto", 1, true},
		{"quoted auto", `dilation: "auto"`, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + tc.line}), Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Dilation != tc.factor || p.DilationAuto != tc.auto {
				t.Fatalf("Dilation %g, DilationAuto %v; want %g, %v", p.Dilation, p.DilationAuto, tc.factor, tc.auto)
			}
		})
	}
}

func TestDilationRejected(t *testing.T) {
	cases := []struct{ name, line, want string }{
		{"below one", "dilation: 0.5", "dilation: must be at least 1 or auto, got 0.5"},
		{"zero", "dilation: 0", "dilation: must be at least 1 or auto, got 0"},
		{"negative", "dilation: -3", "dilation: must be at least 1 or auto, got -3"},
		{"not a number", "dilation: .nan", "dilation: must be at least 1 or auto, got NaN"},
		{"infinite", "dilation: .inf", "dilation: must be at least 1 or auto, got +Inf"},
		{"too large", "dilation: 1e5", "dilation: must be at most 10000, got 100000"},
		{"word", "dilation: fast", `dilation: line 3: "fast" is neither a number nor auto`},
		{"capitalised auto", "dilation: Auto", `dilation: line 3: "Auto" is neither a number nor auto`},
		{"quoted number", `dilation: "2"`, `dilation: line 3: "2" is neither a number nor auto`},
		{"boolean", "dilation: true", `dilation: line 3: "true" is neither a number nor auto`},
		{"list", "dilation: [2]", "dilation: line 3: expected a number or auto, found a list"},
		{"mapping", "dilation: {factor: 2}", "dilation: line 3: expected a number or auto, found a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + tc.line}), Overrides{})
			wantError(t, err, tc.want)
		})
	}
}

func TestWallBudgetAccepted(t *testing.T) {
	cases := []struct {
		name, line string
		want       time.Duration
	}{
		{"absent", "", 0},
		{"minutes", "wall_budget: 10m", 10 * time.Minute},
		{"quoted", `wall_budget: "1h30m"`, 90 * time.Minute},
		{"sub-second", "wall_budget: 1.5s", 1500 * time.Millisecond},
		{"seconds as integer", "wall_budget: 600", 10 * time.Minute},
		{"seconds as number", "wall_budget: 90.5", 90500 * time.Millisecond},
		{"largest", "wall_budget: 1e8", time.Duration(MaxWallSeconds) * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + tc.line}), Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if p.WallBudget != tc.want {
				t.Fatalf("WallBudget %v, want %v", p.WallBudget, tc.want)
			}
			if p.TimeScale != DefaultTimeScale {
				t.Fatalf("TimeScale %g before the launcher resolves it, want %g", p.TimeScale, DefaultTimeScale)
			}
		})
	}
}

func TestWallBudgetRejected(t *testing.T) {
	cases := []struct{ name, line, want string }{
		{"with time_scale", "time_scale: 20\nwall_budget: 10m", "wall_budget: give time_scale or wall_budget, not both (time_scale is 20, wall_budget 600s)"},
		{"zero duration", "wall_budget: 0s", "wall_budget: must be greater than 0, got 0s"},
		{"zero seconds", "wall_budget: 0", "wall_budget: must be greater than 0, got 0s"},
		{"negative seconds", "wall_budget: -5", "wall_budget: must be greater than 0, got -5s"},
		{"negative duration", "wall_budget: -5m", "wall_budget: must be greater than 0, got -300s"},
		{"infinite", "wall_budget: .inf", "wall_budget: must be greater than 0, got +Infs"},
		{"too long in seconds", "wall_budget: 1e12", "wall_budget: must be at most 1e+08s"},
		{"too long as duration", "wall_budget: 2000000h", "wall_budget: must be at most 1e+08s (about 3.2 years), got 7.2e+09s"},
		{"overflowing duration", "wall_budget: 9999999999h", `wall_budget: line 3: "9999999999h" is neither a duration`},
		{"no unit", `wall_budget: "10"`, `wall_budget: line 3: "10" is neither a duration ("10m", "1h30m") nor a number of seconds`},
		{"word", "wall_budget: soon", `wall_budget: line 3: "soon" is neither a duration`},
		{"list", "wall_budget: [10m]", "wall_budget: line 3: expected a duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + tc.line}), Overrides{})
			wantError(t, err, tc.want)
		})
	}
}

func TestDilationOverrides(t *testing.T) {
	three := 3.0
	half := 0.5
	scale := 40.0
	cases := []struct {
		name   string
		line   string
		o      Overrides
		factor float64
		auto   bool
		budget time.Duration
		scale  float64
		want   string // error line prefix, or "" for success
	}{
		{"factor over auto", "dilation: auto", Overrides{Dilation: &three}, 3, false, 0, 1, ""},
		{"auto over factor", "dilation: 2", Overrides{DilationAuto: true}, 1, true, 0, 1, ""},
		{"auto over absent", "", Overrides{DilationAuto: true}, 1, true, 0, 1, ""},
		{"both", "", Overrides{Dilation: &three, DilationAuto: true}, 0, false, 0, 0, "dilation: the overrides give both a dilation factor (3) and auto"},
		{"factor below one", "dilation: auto", Overrides{Dilation: &half}, 0, false, 0, 0, "dilation: must be at least 1 or auto, got 0.5"},
		{"time scale drops the wall budget", "wall_budget: 10m", Overrides{TimeScale: &scale}, 1, false, 0, 40, ""},
		{"wall budget kept", "wall_budget: 10m", Overrides{DilationAuto: true}, 1, true, 10 * time.Minute, 1, ""},
		{"wall budget drops the time scale", "time_scale: 40", Overrides{WallBudget: &WallBudget{Seconds: 300}}, 1, false, 5 * time.Minute, 1, ""},
		{"wall budget and time scale", "", Overrides{WallBudget: &WallBudget{Seconds: 300}, TimeScale: &scale}, 0, false, 0, 0, "wall_budget: the overrides give both a time scale and a wall budget"},
		{"wall budget checked", "", Overrides{WallBudget: &WallBudget{Seconds: -1}}, 0, false, 0, 0, "wall_budget: must be greater than 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + tc.line}), tc.o)
			if tc.want != "" {
				wantError(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Dilation != tc.factor || p.DilationAuto != tc.auto || p.WallBudget != tc.budget || p.TimeScale != tc.scale {
				t.Fatalf("got dilation %g auto %v budget %v scale %g; want %g %v %v %g",
					p.Dilation, p.DilationAuto, p.WallBudget, p.TimeScale, tc.factor, tc.auto, tc.budget, tc.scale)
			}
		})
	}
}

// TestDilationFlag checks the command-line side: the type is a flag.Value
// that reads the scenario file's forms and sets the overrides.
func TestDilationFlag(t *testing.T) {
	for _, tc := range []struct {
		arg    string
		auto   bool
		factor float64
		bad    bool
	}{
		{"auto", true, 0, false},
		{" auto ", true, 0, false},
		{"2", false, 2, false},
		{"1.5", false, 1.5, false},
		{"0.5", false, 0.5, false}, // syntax only; the range is Expand's
		{"Auto", false, 0, true},
		{"", false, 0, true},
		{"x2", false, 0, true},
	} {
		var d Dilation
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		fs.Var(&d, "dilation", "")
		err := fs.Parse([]string{"-dilation", tc.arg})
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v, want bad %v", tc.arg, err, tc.bad)
			continue
		}
		if tc.bad {
			if !strings.Contains(err.Error(), "neither a number nor auto") {
				t.Errorf("%q: error %v does not say what is accepted", tc.arg, err)
			}
			continue
		}
		if d.Auto != tc.auto || d.Factor != tc.factor {
			t.Errorf("%q: got %+v", tc.arg, d)
		}
		var o Overrides
		d.Override(&o)
		if o.DilationAuto != tc.auto || (o.Dilation == nil) != tc.auto || (!tc.auto && *o.Dilation != tc.factor) {
			t.Errorf("%q: overrides %+v", tc.arg, o)
		}
		if d.String() != strings.TrimSpace(tc.arg) {
			t.Errorf("%q: String() = %q", tc.arg, d.String())
		}
	}
}

func TestDilationAndBudgetRoundTrip(t *testing.T) {
	for _, line := range []string{"dilation: auto\nwall_budget: 10m", "dilation: 2.5\nwall_budget: 90.5", "dilation: 1"} {
		p1, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\n" + line}), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := Parse([]byte(mutate(t, edit{"seed: 7", "seed: 7\n" + line})), "rt")
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out, "rt again")
		if err != nil {
			t.Fatalf("re-parse %q: %v\n%s", line, err, out)
		}
		p2, err := again.Expand(fakeEnv(), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if p1.Dilation != p2.Dilation || p1.DilationAuto != p2.DilationAuto || p1.WallBudget != p2.WallBudget {
			t.Fatalf("%q: round trip changed %v/%v/%v into %v/%v/%v", line,
				p1.Dilation, p1.DilationAuto, p1.WallBudget, p2.Dilation, p2.DilationAuto, p2.WallBudget)
		}
	}
}

func TestPlanResolve(t *testing.T) {
	p, err := expandDoc(t, mutate(t, edit{"seed: 7", "seed: 7\ndilation: auto\nwall_budget: 10m"}), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d, k float64
		want string
	}{
		{0.9, 1, "dilation: must be in [1, 10000], got 0.9"},
		{2e4, 1, "dilation: must be in [1, 10000], got 20000"},
		{2, 0, "time_scale: must be in [0.001, 1e+06], got 0"},
		{2, 1e7, "time_scale: must be in [0.001, 1e+06], got 1e+07"},
		// 3600 s x 1e4 / 0.001: far beyond the wall limit.
		{1e4, 1e-3, "time_scale: the scenario's longest duration, 3600s, would take 3.6e+10s of wall time"},
	} {
		q := *p
		err := q.Resolve(tc.d, tc.k)
		wantError(t, err, tc.want)
		if q.Dilation != p.Dilation || q.TimeScale != p.TimeScale || !q.DilationAuto {
			t.Fatalf("a failed Resolve changed the plan")
		}
	}
	if err := p.Resolve(2.5, 12); err != nil {
		t.Fatal(err)
	}
	if p.Dilation != 2.5 || p.TimeScale != 12 || p.DilationAuto || p.WallBudget != 10*time.Minute {
		t.Fatalf("resolved plan: dilation %g scale %g auto %v budget %v", p.Dilation, p.TimeScale, p.DilationAuto, p.WallBudget)
	}
}
