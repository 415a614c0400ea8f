package netem

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

type fakeMech struct {
	name   string
	err    error
	probes *int
}

func (f fakeMech) Name() string { return f.name }
func (f fakeMech) Probe(context.Context) error {
	if f.probes != nil {
		*f.probes++
	}
	return f.err
}
func (f fakeMech) Install(context.Context, EgressPlan, map[string][]netip.Prefix) (Installed, error) {
	return nil, errors.New("fake")
}

var errNoNetem = errors.New("no netem qdisc in this kernel (ENOENT)")

func TestSelect(t *testing.T) {
	ctx := context.Background()
	netem := fakeMech{name: "netem", err: errNoNetem}
	htb := fakeMech{name: "htb", err: errors.New("no CAP_NET_ADMIN")}
	user := fakeMech{name: "userspace"}

	m, reason, err := Select(ctx, Auto, []Mechanism{netem, htb, user})
	if err != nil || m.Name() != "userspace" {
		t.Fatalf("auto: %v, %v", m, err)
	}
	for _, want := range []string{"userspace", "netem", "ENOENT", "htb", "CAP_NET_ADMIN"} {
		if !strings.Contains(reason, want) {
			t.Errorf("auto reason %q does not mention %q", reason, want)
		}
	}

	var probes int
	first := fakeMech{name: "netem", probes: &probes}
	if m, _, err := Select(ctx, "", []Mechanism{first, user}); err != nil || m.Name() != "netem" {
		t.Fatalf("empty want = auto, first passing: %v %v", m, err)
	}
	if probes != 1 {
		t.Errorf("probed %d times", probes)
	}

	if m, reason, err := Select(ctx, "userspace", []Mechanism{netem, user}); err != nil || m.Name() != "userspace" || !strings.Contains(reason, "explicit") {
		t.Fatalf("explicit userspace: %v %q %v", m, reason, err)
	}

	_, _, err = Select(ctx, "netem", []Mechanism{netem, user})
	if !errors.Is(err, errNoNetem) {
		t.Fatalf("explicit netem without netem: %v, want the probe error", err)
	}

	if _, _, err := Select(ctx, "tun", []Mechanism{netem, user}); err == nil || !strings.Contains(err.Error(), "unknown mechanism") {
		t.Fatalf("unknown name: %v", err)
	}

	// Named takes the candidate by name and never probes it.
	probes = 0
	if m, err := Named("netem", []Mechanism{user, first}); err != nil || m.Name() != "netem" || probes != 0 {
		t.Fatalf("named netem: %v %v, probed %d times", m, err, probes)
	}
	if _, err := Named("tun", []Mechanism{netem, user}); err == nil || !strings.Contains(err.Error(), "unknown mechanism") {
		t.Fatalf("named unknown: %v", err)
	}

	_, _, err = Select(ctx, Auto, []Mechanism{netem, htb})
	if err == nil || !errors.Is(err, errNoNetem) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") {
		t.Fatalf("nothing passes: %v", err)
	}
	if _, _, err := Select(ctx, Auto, nil); err == nil {
		t.Fatal("no candidates accepted")
	}
}

func TestUserspaceMechanism(t *testing.T) {
	var m Mechanism = Userspace{Dilation: 2, Baseline: 15e3}
	if m.Name() != "userspace" || m.Probe(context.Background()) != nil {
		t.Fatal("userspace mechanism must always be available")
	}
	mx, err := Preset("das3", []string{Vrije, Leiden})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := mx.PlanFor("v0", Vrije)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := m.Install(context.Background(), plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	eff := inst.Effective()
	if got := eff[Leiden]; got.Latency != 2*plan.To[Leiden].Latency || got.Bandwidth != plan.To[Leiden].Bandwidth/2 {
		t.Fatalf("effective vrije->leiden under dilation 2: %+v", got)
	}
	if s := inst.DelayStats(); s.Released != 0 || s.Drops != 0 {
		t.Fatalf("fresh stats: %+v", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Install(ctx, plan, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("install on a done context: %v", err)
	}
}
