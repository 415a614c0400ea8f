package apps

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestProfileSpecPoints(t *testing.T) {
	cases := []struct {
		name string
		n    int
		want time.Duration
	}{
		{"nbody", 2, 10 * time.Minute},
		{"nbody", 32, 4 * time.Minute},
		{"ft", 2, 2 * time.Minute},
		{"ft", 16, 1 * time.Minute},
	}
	for _, c := range cases {
		p, ok := LookupProfile(c.name)
		if !ok {
			t.Fatalf("profile %q missing", c.name)
		}
		if got := p.Exec(c.n); got != c.want {
			t.Errorf("%s.Exec(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

func TestProfileModelCoefficients(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	nb := nbodyProfile.Model()
	if !near(nb.Serial, 188.8) || !near(nb.Parallel, 819.2) || !near(nb.Overhead, 0.8) {
		t.Errorf("nbody model = %+v, want {188.8 819.2 0.8}", nb)
	}
	ft := ftProfile.Model()
	if !near(ft.Serial, 1980.0/49) || !near(ft.Parallel, 7680.0/49) || !near(ft.Overhead, 30.0/49) {
		t.Errorf("ft model = %+v, want {1980/49 7680/49 30/49}", ft)
	}
}

// The best size is the minimum: T strictly decreases up to it, strictly
// increases past it up to Max.
func TestProfileShape(t *testing.T) {
	for name, p := range Profiles() {
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Name != name {
			t.Errorf("profile key %q has Name %q", name, p.Name)
		}
		var sizes []int
		for n := p.Min; n <= p.Max; n++ {
			if !p.PowerOfTwo || isPow2(n) {
				sizes = append(sizes, n)
			}
		}
		for k := 1; k < len(sizes); k++ {
			a, b := sizes[k-1], sizes[k]
			ta, tb := p.Exec(a), p.Exec(b)
			if b <= p.BestSize && tb >= ta {
				t.Errorf("%s: T(%d)=%v not below T(%d)=%v before the best size", name, b, tb, a, ta)
			}
			if a >= p.BestSize && tb <= ta {
				t.Errorf("%s: T(%d)=%v not above T(%d)=%v past the best size", name, b, tb, a, ta)
			}
		}
		if p.Exec(p.Max) <= p.Exec(p.BestSize) {
			t.Errorf("%s: T(max)=%v not slower than T(best)=%v", name, p.Exec(p.Max), p.Exec(p.BestSize))
		}
	}
}

func TestProfileExecRounding(t *testing.T) {
	ft := Profiles()["ft"]
	for _, c := range []struct{ n, as int }{{3, 2}, {15, 8}, {24, 16}, {31, 16}, {32, 32}, {100, 32}, {0, 1}} {
		if got, want := ft.Exec(c.n), ft.Exec(c.as); got != want {
			t.Errorf("ft.Exec(%d) = %v, want Exec(%d) = %v", c.n, got, c.as, want)
		}
	}
	nb := Profiles()["nbody"]
	if got, want := nb.Exec(60), nb.Exec(46); got != want {
		t.Errorf("nbody.Exec(60) = %v, want Exec(46) = %v", got, want)
	}
	if nb.Exec(24) == nb.Exec(16) {
		t.Errorf("nbody must not round to powers of two")
	}
}

func TestProfileAccept(t *testing.T) {
	ft, nb := Profiles()["ft"], Profiles()["nbody"]
	cases := []struct {
		p       Profile
		n, want int
	}{
		{ft, 1, 0}, {ft, 2, 2}, {ft, 3, 2}, {ft, 7, 4}, {ft, 16, 16}, {ft, 31, 16}, {ft, 32, 32}, {ft, 45, 32},
		{nb, 1, 0}, {nb, 2, 2}, {nb, 7, 7}, {nb, 46, 46}, {nb, 47, 46}, {nb, 100, 46},
	}
	for _, c := range cases {
		if got := c.p.Accept(c.n); got != c.want {
			t.Errorf("%s.Accept(%d) = %d, want %d", c.p.Name, c.n, got, c.want)
		}
	}
}

func TestProfileValidateRejects(t *testing.T) {
	good := nbodyProfile
	bad := []func(*Profile){
		func(p *Profile) { p.Min = 0 },
		func(p *Profile) { p.Max = 1 },
		func(p *Profile) { p.BestSize = p.RefSize },
		func(p *Profile) { p.BestTime = p.RefTime },
		func(p *Profile) { p.BestTime = 10 * time.Second }, // serial part would be negative
		func(p *Profile) { p.PowerOfTwo = true; p.BestSize = 24 },
	}
	for i, mut := range bad {
		p := good
		mut(&p)
		if err := p.Validate(); !errors.Is(err, ErrBadProfile) {
			t.Errorf("case %d: Validate() = %v, want ErrBadProfile", i, err)
		}
	}
	if names := ProfileNames(); len(names) != 2 || names[0] != "ft" || names[1] != "nbody" {
		t.Errorf("ProfileNames() = %v", names)
	}
}
