package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Built with -tags simonly (make build-sim: bin/koala-sim), the binary holds
// the inproc and sim backends only: none of the container and netlink
// libraries of the multi-host backends is linked in, so their package
// initialisation does not run in a simulation's start-up.
func TestSimOnlyLeavesOutMultiHost(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "simonly", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags simonly: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, left := range []string{
		"github.com/testcontainers/",
		"github.com/moby/",
		"github.com/vishvananda/netlink",
		"github.com/google/nftables",
		"github.com/koala-emu/koala-emu/launch/grid",
		"github.com/koala-emu/koala-emu/launch/docker",
		"github.com/koala-emu/koala-emu/netem/netns",
	} {
		for _, d := range deps {
			if strings.HasPrefix(d, left) {
				t.Errorf("the simonly build links %s", d)
			}
		}
	}
	if !slices.Contains(deps, "github.com/koala-emu/koala-emu/launch/sim") {
		t.Errorf("the simonly build has no sim backend: %v", deps)
	}
}

// The simonly binary refuses netns by name, saying which binary has it.
func TestSimOnlyRefusesNetns(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "koala-sim")
	if out, err := exec.Command("go", "build", "-tags", "simonly", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags simonly: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "run", "das3-smoke", "--backend", "netns").CombinedOutput()
	if code := exitCode(err); code != exitUsage {
		t.Fatalf("exit code %d, want %d (%v)\n%s", code, exitUsage, err, out)
	}
	for _, want := range []string{`koala-sim: --backend "netns": unknown backend (known: inproc, sim;`, "use koala-emu"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
