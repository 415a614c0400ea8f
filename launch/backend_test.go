package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/scenarios"
)

func TestRegistry(t *testing.T) {
	if got := strings.Join(BackendNames(), ","); got != "docker,inproc,netns,sim" {
		t.Errorf("backends %s, want docker,inproc,netns,sim", got)
	}
	for _, n := range BackendNames() {
		b, err := LookupBackend(n)
		if err != nil || b.Name() != n {
			t.Errorf("LookupBackend(%s) = %v, %v", n, b, err)
		}
	}
	if _, err := LookupBackend("simgrid"); err == nil || !strings.Contains(err.Error(), "docker, inproc, netns, sim") {
		t.Errorf("unknown backend: %v, want the known names listed", err)
	}
}

// Check refuses a model on a backend that runs its jobs, and a model file
// that is missing or malformed, naming the file; the sim backend takes the
// typed model, the shipped file and a file that loads.
func TestCheckModel(t *testing.T) {
	inproc, _ := LookupBackend("inproc")
	sim, _ := LookupBackend("sim")
	dir := t.TempDir()
	missing, malformed := filepath.Join(dir, "missing.json"), filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"version": 1,`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		b           Backend
		model, want string // want "" passes
	}{
		{sim, "", ""},
		{sim, "typed", ""},
		{sim, "shipped", ""},
		{sim, "sim/models/inproc.json", ""},
		{sim, missing, missing},
		{sim, malformed, malformed},
		{inproc, "", ""},
		{inproc, "shipped", `model "shipped": the inproc backend runs its jobs`},
	} {
		err := Check(c.b, nil, Options{SimModel: c.model})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s model %q: %v", c.b.Name(), c.model, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s model %q: %v, want an error naming %q", c.b.Name(), c.model, err, c.want)
		}
	}
}

// Check refuses what a backend cannot do, naming the backend and what it
// can do instead; everything else passes.
func TestCheck(t *testing.T) {
	inproc, _ := LookupBackend("inproc")
	netns, _ := LookupBackend("netns")
	malleable := &scenarios.Plan{Policy: scenarios.Policy{Malleability: &scenarios.Malleability{Approach: "pwa", Policy: "fpsma"}}}
	cases := []struct {
		b      Backend
		shaper string
		plan   *scenarios.Plan
		want   string // "" passes
	}{
		{inproc, "", malleable, ""},
		{inproc, "auto", nil, ""},
		{inproc, "userspace", nil, ""},
		{inproc, "htb", nil, "not available on the inproc backend"},
		{netns, "htb", malleable, ""},
		{netns, "netem", nil, ""},
		{netns, "tc", nil, "it can install auto, netem, htb, userspace"},
		{refuser{inproc}, "", malleable, "cannot run the malleability manager"},
	}
	for _, c := range cases {
		err := Check(c.b, c.plan, Options{Shaper: c.shaper})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s shaper %q: %v", c.b.Name(), c.shaper, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s shaper %q: %v, want %q", c.b.Name(), c.shaper, err, c.want)
		}
	}
	if _, err := inproc.Run(context.Background(), malleable, Options{Shaper: "netem"}); err == nil {
		t.Error("inproc ran with a kernel shaper")
	}
}

// refuser is a backend without malleability.
type refuser struct{ Backend }

func (r refuser) Capabilities() Capabilities {
	c := r.Backend.Capabilities()
	c.Malleability = false
	return c
}
