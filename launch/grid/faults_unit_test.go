package grid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
)

func member(name, cluster string) membership.Member {
	return membership.Member{Name: name, Role: membership.RoleNode, Cluster: cluster}
}

// A degrade of a-b changes a's hosts towards b and b's towards a; one of a
// cluster's own network changes its hosts towards itself, once each; a
// third cluster's hosts are left alone.
func TestLinkTargets(t *testing.T) {
	hs := []membership.Member{member("a1", "a"), member("a2", "a"), member("b1", "b"), member("c1", "c")}
	names := func(ts []linkTarget) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.host.Name+">"+x.towards)
		}
		return out
	}
	if got, want := names(linkTargets(hs, "a", "b")), []string{"a1>b", "a2>b", "b1>a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a-b: %v, want %v", got, want)
	}
	if got, want := names(linkTargets(hs, "a", "a")), []string{"a1>a", "a2>a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a-a: %v, want %v", got, want)
	}
	if got := shapingHosts(hs, "b"); len(got) != 1 || got[0].Name != "b1" {
		t.Errorf("hosts of b: %v", got)
	}
}

// A partition cuts the cluster from every other cluster it has an
// available link with, never from itself; a host's cut covers the other
// clusters' subnets only.
func TestCutPeersAndPrefixes(t *testing.T) {
	ok := netem.Link{Latency: time.Millisecond, Bandwidth: 1e6}
	m := netem.Matrix{Clusters: []string{"a", "b", "c"}, Links: [][]netem.Link{
		{ok, ok, {Unavailable: true}},
		{ok, ok, ok},
		{{Unavailable: true}, ok, ok},
	}}
	if got := cutPeers(m, "a"); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("peers of a: %v, want [b] (c is unavailable)", got)
	}
	if got := cutPeers(m, "b"); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("peers of b: %v", got)
	}
	subs := map[string][]netip.Prefix{"a": {netip.MustParsePrefix("10.1.1.0/24")}, "b": {netip.MustParsePrefix("10.1.2.0/24")}}
	got, err := cutPrefixes(subs, "a", []string{"a", "b"})
	if err != nil || len(got) != 1 || got[0] != subs["b"][0] {
		t.Errorf("prefixes cut from a: %v %v", got, err)
	}
	if _, err := cutPrefixes(subs, "a", []string{"zz"}); err == nil {
		t.Error("an unknown cluster was cut")
	}
}

// fakeMech records what it installs and the in-place changes; reshape
// makes every change need a new installation.
type fakeMech struct {
	name     string
	reshape  bool
	installs []netem.EgressPlan
	changes  []netem.Link
	probes   int
}

func (f *fakeMech) Name() string                { return f.name }
func (f *fakeMech) Probe(context.Context) error { f.probes++; return nil }
func (f *fakeMech) Install(_ context.Context, p netem.EgressPlan, _ map[string][]netip.Prefix) (netem.Installed, error) {
	f.installs = append(f.installs, p)
	return &fakeInst{m: f, eff: p.To}, nil
}

type fakeInst struct {
	m   *fakeMech
	eff map[string]netem.Link
}

func (i *fakeInst) Wrap(c net.Conn, _ string) net.Conn { return c }
func (i *fakeInst) Effective() map[string]netem.Link   { return i.eff }
func (i *fakeInst) DelayStats() netem.DelayStats       { return netem.DelayStats{} }
func (i *fakeInst) Close() error                       { return nil }
func (i *fakeInst) SetLink(dst string, l netem.Link) error {
	if i.m.reshape {
		return fmt.Errorf("fake: %w", kernel.ErrReshape)
	}
	i.m.changes = append(i.m.changes, l)
	i.eff[dst] = l
	return nil
}

// A degraded link reaches a kernel mechanism dilated, as the initial
// shaping's links do, and changes in place; when the mechanism cannot,
// the whole plan is installed again with the changed link, dilated.
func TestShaperSetLinkDilates(t *testing.T) {
	base := netem.Link{Latency: time.Millisecond, Bandwidth: 100e6}
	g := &Grid{Spec: wiring.Spec{Dilation: 4, Links: netem.Matrix{Clusters: []string{"a", "b"},
		Links: [][]netem.Link{{base, base}, {base, base}}}}}
	for _, reshape := range []bool{false, true} {
		f := &fakeMech{name: kernel.NameHTB, reshape: reshape}
		s := newShaper("a1", "a", g, func(MechanismOptions) []netem.Mechanism { return []netem.Mechanism{f} })
		if r := s.shape(context.Background(), &msg.GridShape{Mechanism: kernel.NameHTB}); r.Error != "" {
			t.Fatal(r.Error)
		}
		if got := f.installs[0].To["b"]; got.Latency != 4*time.Millisecond || got.Bandwidth != 25e6 {
			t.Fatalf("initial link to b %+v, want dilated by 4", got)
		}
		half := netem.Link{Latency: time.Millisecond, Bandwidth: 50e6}
		r := s.setLink(context.Background(), &msg.GridSetLink{Link: toGridLink("b", half)})
		if r.Error != "" {
			t.Fatalf("reshape %v: %s", reshape, r.Error)
		}
		want := half.Dilate(4)
		switch {
		case !reshape && (len(f.changes) != 1 || f.changes[0] != want || len(f.installs) != 1 || r.Reason != "changed in place"):
			t.Errorf("in place: changes %v installs %d reason %q, want one change to %+v", f.changes, len(f.installs), r.Reason, want)
		case reshape && (len(f.installs) != 2 || f.installs[1].To["b"] != want || f.installs[1].To["a"] != base.Dilate(4)):
			t.Errorf("installed again: %+v, want b %+v and a unchanged", f.installs, want)
		}
		if len(r.Effective) != 1 || fromGridLink(r.Effective[0]) != want {
			t.Errorf("reply's effective link %+v, want %+v", r.Effective, want)
		}
		if r := s.setLink(context.Background(), &msg.GridSetLink{Link: toGridLink("zz", half)}); r.Error == "" {
			t.Error("a link to an unknown cluster was changed")
		}
	}
}

// Links given in the installation request (the delay line's overhead
// probes) are installed as given, and a change of one is applied as given
// too, in place or, when the mechanism cannot, by installing the changed
// plan again undilated, with the mechanism the request selected.
func TestShaperSetLinkKeepsGivenLinks(t *testing.T) {
	g := &Grid{Spec: wiring.Spec{Dilation: 4}}
	given := netem.Link{Latency: 30 * time.Microsecond}
	for _, reshape := range []bool{false, true} {
		f := &fakeMech{name: kernel.NameHTB, reshape: reshape}
		var opts []MechanismOptions
		s := newShaper("a1", "a", g, func(o MechanismOptions) []netem.Mechanism {
			opts = append(opts, o)
			return []netem.Mechanism{f}
		})
		r := s.shape(context.Background(), &msg.GridShape{Mechanism: kernel.NameHTB, DivertAll: true, Links: []*msg.GridLink{toGridLink("b", given)}})
		if r.Error != "" || f.installs[0].To["b"] != given {
			t.Fatalf("install %+v: %s", f.installs, r.Error)
		}
		probe := netem.Link{Latency: 5 * time.Millisecond}
		if r := s.setLink(context.Background(), &msg.GridSetLink{Link: toGridLink("b", probe)}); r.Error != "" {
			t.Fatalf("reshape %v: %s", reshape, r.Error)
		}
		switch {
		case !reshape && (len(f.changes) != 1 || f.changes[0] != probe || len(f.installs) != 1):
			t.Errorf("in place: changes %v installs %d, want one change to %+v", f.changes, len(f.installs), probe)
		case reshape && (len(f.installs) != 2 || f.installs[1].To["b"] != probe):
			t.Errorf("installed again: %+v, want b %+v undilated", f.installs, probe)
		}
		if len(opts) != 1 || !opts[0].DivertAll {
			t.Errorf("mechanism options %+v: want one selection, diverting all", opts)
		}
	}
}

// A host told that the mechanism was probed elsewhere installs it without
// probing; auto, a selection alone and an unprobed name still probe.
func TestShaperProbedSkipsProbe(t *testing.T) {
	g := &Grid{Spec: wiring.Spec{Dilation: 1}}
	link := []*msg.GridLink{toGridLink("b", netem.Link{Latency: time.Millisecond})}
	for _, c := range []struct {
		req    *msg.GridShape
		probes int
	}{
		{&msg.GridShape{Mechanism: kernel.NameHTB, Probed: true, Links: link}, 0},
		{&msg.GridShape{Mechanism: kernel.NameHTB, Links: link}, 1},
		{&msg.GridShape{Mechanism: netem.Auto, Probed: true, Links: link}, 1},
		{&msg.GridShape{Mechanism: kernel.NameHTB, Probed: true, SelectOnly: true}, 1},
	} {
		f := &fakeMech{name: kernel.NameHTB}
		s := newShaper("a1", "a", g, func(MechanismOptions) []netem.Mechanism { return []netem.Mechanism{f} })
		if r := s.shape(context.Background(), c.req); r.Error != "" || r.Mechanism != kernel.NameHTB {
			t.Fatalf("%+v: %+v", c.req, r)
		}
		if f.probes != c.probes {
			t.Errorf("%+v: probed %d times, want %d", c.req, f.probes, c.probes)
		}
	}
	s := newShaper("a1", "a", g, func(MechanismOptions) []netem.Mechanism { return []netem.Mechanism{&fakeMech{name: "userspace"}} })
	if r := s.shape(context.Background(), &msg.GridShape{Mechanism: kernel.NameHTB, Probed: true, Links: link}); r.Error == "" {
		t.Error("a probed mechanism the host does not have was installed")
	}
}

// The userspace shaper gets the link undilated (it dilates by itself).
func TestDilatedLeavesUserspaceAlone(t *testing.T) {
	p := netem.EgressPlan{To: map[string]netem.Link{"b": {Latency: time.Millisecond, Bandwidth: 8e6}}}
	if got := dilated("userspace", p, 2).To["b"]; got != p.To["b"] {
		t.Errorf("userspace: %+v", got)
	}
	if got := dilated(kernel.NameNetem, p, 2).To["b"]; got.Latency != 2*time.Millisecond || got.Bandwidth != 4e6 {
		t.Errorf("netem: %+v", got)
	}
}

// firstErrors keeps five errors and counts the rest.
func TestFirstErrors(t *testing.T) {
	var errs []error
	for i := range 8 {
		errs = append(errs, fmt.Errorf("e%d", i))
	}
	err := firstErrors(errors.Join(errs...))
	if u, ok := err.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != 6 {
		t.Errorf("%v", err)
	}
	if firstErrors(nil) != nil {
		t.Error("nil became an error")
	}
}

// A host sharing the machine's network stack (the tests' loopback
// processes) refuses a cut rather than drop the machine's traffic.
func TestSharedHostRefusesCut(t *testing.T) {
	s := newShaper("a1", "a", &Grid{Subnets: map[string][]netip.Prefix{"b": {netip.MustParsePrefix("127.0.0.0/8")}}}, nil)
	s.shared = true
	if ack := s.setCut(&msg.GridCut{Clusters: []string{"b"}, Cut: true}); ack.Error == "" || s.cut {
		t.Errorf("cut on a shared host: %+v", ack)
	}
}
