package main

import (
	"strings"
	"testing"
)

// Stray arguments, missing arguments, unknown commands and unknown flags
// are usage errors (exit 2) that name the problem, and run nothing.
func TestBadCommandLinesAreUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"rnu"}, "did you mean run?"},
		{[]string{"run"}, "takes 1 argument(s) (SCENARIO), got 0"},
		{[]string{"run", "das3-smoke", "extra"}, `unexpected ["extra"]`},
		{[]string{"run", "das3-smoke", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"run", "das3-smoke", "--seed", "x"}, `invalid argument "x"`},
		{[]string{"run", "das3-smoke", "--dilation", "0.5"}, "neither auto nor a number in [1,"},
		{[]string{"run", "das3-smoke", "--dilation", "fast"}, "neither a number nor auto"},
		{[]string{"run", "das3-smoke", "--backend", "nowhere"}, `--backend "nowhere": unknown backend (known: fake)`},
		{[]string{"validate"}, "takes at least 1 argument(s)"},
		{[]string{"validate", "--strict", "das3-smoke"}, "unknown flag: --strict"},
		{[]string{"calibrate"}, "takes 1 argument(s)"},
		{[]string{"calibrate", "a", "b"}, `unexpected ["b"]`},
		{[]string{"scenarios", "all"}, "takes no arguments"},
		{[]string{"scenarios", "--long"}, "unknown flag: --long"},
		{[]string{"study"}, "name a study"},
		{[]string{"study", "cluster-size"}, `unknown command "cluster-size"`},
		{[]string{"study", "cluster-count", "wave"}, "takes no arguments"},
		{[]string{"study", "cluster-count", "--interconnect", "infiniband"}, `--interconnect "infiniband"`},
		{[]string{"clean", "--run"}, "flag needs an argument"},
	}
	for _, c := range cases {
		ta := newTestApp()
		if code := ta.exec(c.args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, exitUsage, ta.errOut.String())
			continue
		}
		if !strings.Contains(ta.errOut.String(), c.want) {
			t.Errorf("%q: stderr %q lacks %q", c.args, ta.errOut.String(), c.want)
		}
		if len(ta.runs) != 0 || len(ta.calibrates) != 0 || len(ta.cleans) != 0 {
			t.Errorf("%q ran something", c.args)
		}
	}
}

// A command that ran and failed exits 1, not 2.
func TestFailureIsNotUsage(t *testing.T) {
	ta := newTestApp()
	if code := ta.exec("validate", "no-such-scenario"); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
}
