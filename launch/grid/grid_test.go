package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/scenarios"
)

func TestGridEncodeDecode(t *testing.T) {
	plan := loadPlan(t, "small.yaml")
	g := GridFromPlan(plan, 1234)
	g.Launcher = "10.1.0.1:4000"
	g.Subnets = map[string][]netip.Prefix{"alpha": {netip.MustParsePrefix("10.1.1.0/24")}}
	enc, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeGrid(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.Launcher != g.Launcher || back.ProbeBytes != 1234 || len(back.Clusters) != 2 || back.Clusters[1].Speed != 0.9 ||
		back.Policy.ScanPeriod != 10*time.Second || back.Subnets["alpha"][0] != g.Subnets["alpha"][0] {
		t.Errorf("round trip changed the grid: %+v", back)
	}
	l, err := back.Links.Link("alpha", "beta")
	if err != nil || l.Latency != 400*time.Microsecond {
		t.Errorf("alpha-beta link after round trip: %v %v", l, err)
	}
	if _, err := DecodeGrid(`{"launcher":""}`); err == nil {
		t.Error("a grid without launcher decoded")
	}
	if _, err := DecodeGrid(`{"launcher":"x","unknown":1}`); err == nil {
		t.Error("an unknown field decoded")
	}
}

func TestSiteOf(t *testing.T) {
	sites := []string{"alpha", "beta", "gamma"}
	fixed := scenarios.Job{Components: []scenarios.Component{{Cluster: "gamma", Size: 2}}}
	if s := SiteOf(fixed, 0, sites); s != "gamma" {
		t.Errorf("fixed job on gamma: site %q", s)
	}
	for i, want := range []string{"alpha", "beta", "gamma", "alpha"} {
		if s := SiteOf(scenarios.Job{}, i, sites); s != want {
			t.Errorf("job %d: site %q, want %q", i, s, want)
		}
	}
}

func TestAddresses(t *testing.T) {
	control := netip.MustParsePrefix("10.200.0.0/24")
	subs := map[string]netip.Prefix{"a": netip.MustParsePrefix("10.200.1.0/24"), "b": netip.MustParsePrefix("10.200.2.0/24")}
	g := &Grid{Spec: wiring.Spec{Clusters: []Cluster{{Name: "a", Nodes: 2}, {Name: "b", Nodes: 1}}}, Sites: []string{"a", "b"}}
	ips, err := addresses(control, subs, hostsOf(g))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"scheduler": "10.200.0.2", "kis": "10.200.0.3", "runner-a": "10.200.0.10", "runner-b": "10.200.0.11",
		"cluster-a": "10.200.1.1", "a-n001": "10.200.1.2", "a-n002": "10.200.1.3", "cluster-b": "10.200.2.1", "b-n001": "10.200.2.2"}
	if len(ips) != len(want) {
		t.Errorf("%d addresses, want %d: %v", len(ips), len(want), ips)
	}
	for n, w := range want {
		if ips[n].String() != w {
			t.Errorf("%s: %v, want %s", n, ips[n], w)
		}
	}
	big := &Grid{Spec: wiring.Spec{Clusters: []Cluster{{Name: "a", Nodes: 254}}}}
	if _, err := addresses(control, subs, hostsOf(big)); err == nil {
		t.Error("254 nodes fit a /24 with its manager")
	}
	if _, err := addresses(control, subs, []HostSpec{{Name: "x", Role: membership.RoleNode, Cluster: "zz"}}); err == nil {
		t.Error("a node of an unknown cluster got an address")
	}
}

func TestEpochClock(t *testing.T) {
	c := clock.NewScaled(20)
	epoch := time.Now().Add(-10 * time.Second)
	c.RestartAt(epoch)
	if now := c.Now(); now < 200*time.Second || now > 210*time.Second {
		t.Errorf("10 s after the epoch at factor 20: scenario %v", now)
	}
	if w := c.ToWall(20 * time.Second); w != time.Second {
		t.Errorf("ToWall(20s) = %v", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context: %v", err)
	}
}

// failingPlatform cannot set up a run; it records that it was closed.
type failingPlatform struct {
	procPlatform
	closed bool
}

func (p *failingPlatform) Setup(context.Context, []string) (Network, error) {
	return Network{}, errors.New("no image to run")
}

func (p *failingPlatform) Close(context.Context) error {
	p.closed = true
	return nil
}

// A platform that cannot set up the run fails the run with its error, and
// whatever it may have made is closed.
func TestRunSetupFails(t *testing.T) {
	plan := loadPlan(t, "small.yaml")
	plat := &failingPlatform{}
	_, err := Run(context.Background(), plan, wiring.Options{Out: t.TempDir(), Shaper: "userspace"}, Config{Platform: plat})
	if err == nil || !strings.Contains(err.Error(), "no image to run") {
		t.Fatalf("run: %v, want the platform's setup error", err)
	}
	if !plat.closed {
		t.Error("the platform was not closed after its setup failed")
	}
}

// silentPlatform starts its hosts slowly (one more every 100 ms) and none
// of them ever joins the membership.
type silentPlatform struct {
	procPlatform
	began time.Time
	total int
}

func (p *silentPlatform) Start(ctx context.Context, hosts []HostSpec, _ *Grid) error {
	p.mu.Lock()
	p.began, p.total = time.Now(), len(hosts)
	p.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (p *silentPlatform) Started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.began.IsZero() {
		return 0
	}
	return min(p.total, int(time.Since(p.began)/(100*time.Millisecond)))
}

// A start fails when it stops making progress, not at a fixed deadline:
// hosts that keep starting keep it going past StartStall, and once they
// stop (none joining) it fails, naming the counts and the missing hosts.
func TestStartStalls(t *testing.T) {
	plan := loadPlan(t, "small.yaml")
	plat := &silentPlatform{procPlatform: *newProcPlatform(io.Discard)}
	stall := 500 * time.Millisecond
	var progress lockedBuffer
	_, err := Run(context.Background(), plan, wiring.Options{Out: t.TempDir(), Shaper: "userspace", Progress: &progress},
		Config{Platform: plat, StartStall: stall})
	if err == nil {
		t.Fatal("a start where no host joins succeeded")
	}
	n := plat.total
	if time.Duration(n)*100*time.Millisecond <= stall {
		t.Fatalf("the scenario has %d hosts: too few to start for longer than the stall", n)
	}
	for _, want := range []string{"no progress for 500ms", fmt.Sprintf("(%d/%d containers started", n, n),
		fmt.Sprintf("at most 0/%d in the membership", n), fmt.Sprintf("%d hosts are not in the membership", n)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
