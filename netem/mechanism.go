package netem

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// Mechanism applies EgressPlans by one technique.
type Mechanism interface {
	// Name is "netem", "htb", "userspace", ...
	Name() string
	// Probe reports, in the calling goroutine's network namespace, whether
	// the mechanism can run: nil, or an error naming what is missing ("no
	// netem qdisc in this kernel (ENOENT)", "no CAP_NET_ADMIN", "no
	// /dev/net/tun").
	Probe(ctx context.Context) error
	// Install applies plan on this node. dsts maps each destination cluster
	// to the address prefixes of its nodes (kernel mechanisms filter on
	// them; userspace ignores them).
	Install(ctx context.Context, plan EgressPlan, dsts map[string][]netip.Prefix) (Installed, error)
}

// Installed is a plan in effect on one node.
type Installed interface {
	// Egress wraps connections; kernel mechanisms return them unchanged.
	Egress
	// Effective reports, per destination cluster, what is really in effect
	// (for example an HTB rate adjusted for headers, or a latency floor).
	Effective() map[string]Link
	// DelayStats reports release lateness, drops and packets/segments.
	DelayStats() DelayStats
	// Close removes everything installed.
	Close() error
}

// DelayStats describes how precisely a mechanism delayed traffic.
type DelayStats struct {
	Released, Drops int64
	Lateness        ptimer.Stats
}

// Auto is the Select argument that takes the first candidate whose probe
// passes.
const Auto = "auto"

// Select picks a mechanism. want is Auto or a mechanism name. Auto takes the
// first candidate (candidates are in preference order) whose Probe passes;
// an explicit name whose probe fails is an error naming what is missing. It
// returns the choice and a human-readable reason, including why better
// candidates were skipped. It never degrades silently: when nothing passes,
// it is an error listing every probe failure.
func Select(ctx context.Context, want string, candidates []Mechanism) (Mechanism, string, error) {
	if len(candidates) == 0 {
		return nil, "", errors.New("netem: no shaping mechanism candidates")
	}
	if want == "" {
		want = Auto
	}
	if want != Auto {
		m, err := Named(want, candidates)
		if err != nil {
			return nil, "", err
		}
		if err := m.Probe(ctx); err != nil {
			return nil, "", fmt.Errorf("netem: mechanism %q requested but unavailable: %w", want, err)
		}
		return m, fmt.Sprintf("%s: requested explicitly, probe passed", want), nil
	}
	var skipped []string
	var errs []error
	for _, m := range candidates {
		err := m.Probe(ctx)
		if err == nil {
			reason := fmt.Sprintf("%s: first mechanism whose probe passed (auto)", m.Name())
			if len(skipped) > 0 {
				reason += "; skipped " + strings.Join(skipped, "; ")
			}
			return m, reason, nil
		}
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("netem: probing %s: %w", m.Name(), ctx.Err())
		}
		skipped = append(skipped, fmt.Sprintf("%s (%v)", m.Name(), err))
		errs = append(errs, fmt.Errorf("%s: %w", m.Name(), err))
	}
	return nil, "", fmt.Errorf("netem: no shaping mechanism can run here: %w", errors.Join(errs...))
}

// Named returns the candidate called want without probing it: for a
// mechanism whose probe passed on another host of the same machine and
// image, where an installation that fails names what failed. An unknown
// name is an error listing the known ones.
func Named(want string, candidates []Mechanism) (Mechanism, error) {
	var names []string
	for _, m := range candidates {
		if m.Name() == want {
			return m, nil
		}
		names = append(names, m.Name())
	}
	return nil, fmt.Errorf("netem: unknown mechanism %q (known: %s, or %s)", want, strings.Join(names, ", "), Auto)
}

// Userspace is the Mechanism of the in-process delay line (NewUserspace).
// Its probe always passes: it needs nothing from the kernel.
type Userspace struct {
	// Line releases segments; nil means ptimer.Default().
	Line *ptimer.Line
	// Dilation applied to every link (<= 1: none).
	Dilation float64
	// Overhead overrides DefaultOverhead() when not empty; Baseline > 0
	// replaces both by a constant (see UserspaceEgress).
	Overhead Overhead
	Baseline time.Duration
}

// Name implements Mechanism.
func (Userspace) Name() string { return "userspace" }

// Probe implements Mechanism.
func (Userspace) Probe(context.Context) error { return nil }

// Install implements Mechanism; dsts is ignored (connections are wrapped
// by destination cluster name).
func (u Userspace) Install(ctx context.Context, plan EgressPlan, _ map[string][]netip.Prefix) (Installed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := NewUserspace(plan, u.Line, u.Dilation)
	if len(u.Overhead) > 0 {
		e.Overhead = u.Overhead
	}
	e.Baseline = u.Baseline
	return e, nil
}

var _ Installed = (*UserspaceEgress)(nil)
