package kernel_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// htbClasses lists the HTB classes on the host's interface.
func htbClasses(t testing.TB, topo *netns.Topology, h *netns.Host) []netlink.Class {
	t.Helper()
	var cs []netlink.Class
	err := topo.Run(h, func() error {
		l, err := netlink.LinkByName(netns.HostIface)
		if err != nil {
			return err
		}
		cs, err = netlink.ClassList(l, netlink.MakeHandle(1, 0))
		return err
	})
	if err != nil {
		t.Fatalf("classes on %s: %v", h.Name, err)
	}
	return cs
}

// classRates returns the HTB classes' rates on the host's interface, in
// bytes/s, by class minor.
func classRates(t *testing.T, topo *netns.Topology, h *netns.Host) map[uint16]uint64 {
	t.Helper()
	out := map[uint16]uint64{}
	for _, c := range htbClasses(t, topo, h) {
		if hc, ok := c.(*netlink.HtbClass); ok {
			out[uint16(hc.Handle&0xffff)] = hc.Rate // bytes/s as listed
		}
	}
	return out
}

// SetLink changes a destination's HTB class and delay line queue in
// place: the class keeps its handle with the new rate, the shaping and the
// effective link follow, the other destination is left alone; a change
// that needs another layout is refused with ErrReshape and changes nothing.
func TestHTBSetLinkInPlace(t *testing.T) {
	topo := twoHosts(t)
	a := topo.Host("a")
	floor := 40 * time.Microsecond
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{
		"alpha": {Latency: 30 * time.Microsecond, Bandwidth: 500e6},
		"beta":  {Latency: 2 * time.Millisecond, Bandwidth: 20e6},
	}}
	in := install(t, topo, a, kernel.HTB{Model: kernel.Model{Floor: floor}}, plan, topo.Destinations()).(*kernel.Installed)
	before := in.Shaping()
	rates := classRates(t, topo, a)

	degraded := netem.Link{Latency: 4 * time.Millisecond, Bandwidth: 10e6}
	if err := in.SetLink("beta", degraded); err != nil {
		t.Fatal(err)
	}
	after := in.Shaping()
	if after["beta"].Delay != 4*time.Millisecond-floor || !after["beta"].Divert || after["beta"].Queue != before["beta"].Queue {
		t.Errorf("beta shaped %+v after the change, was %+v", after["beta"], before["beta"])
	}
	if r := float64(after["beta"].Rate) / float64(before["beta"].Rate); r < 0.45 || r > 0.55 {
		t.Errorf("beta's rate %d after halving the bandwidth, was %d", after["beta"].Rate, before["beta"].Rate)
	}
	if x, y := after["alpha"], before["alpha"]; x.Rate != y.Rate || x.Delay != y.Delay || x.Divert != y.Divert {
		t.Errorf("alpha changed: %+v, was %+v", after["alpha"], before["alpha"])
	}
	if eff := in.Effective()["beta"]; eff.Latency != degraded.Latency || eff.Bandwidth != degraded.Bandwidth {
		t.Errorf("effective towards beta %+v, want %+v", eff, degraded)
	}
	now := classRates(t, topo, a)
	if len(now) != len(rates) {
		t.Fatalf("classes %v after the change, were %v", now, rates)
	}
	changed := 0
	for minor, r := range now {
		if r != rates[minor] {
			changed++
			if d := float64(r) - float64(after["beta"].Rate); d < -0.01*float64(r) || d > 0.01*float64(r) {
				t.Errorf("class %x rate %d B/s, want beta's %d", minor, r, after["beta"].Rate)
			}
		}
	}
	if changed != 1 {
		t.Errorf("%d classes changed rate (%v -> %v), want beta's only", changed, rates, now)
	}

	// Below the floor: beta would leave the delay line.
	err := in.SetLink("beta", netem.Link{Latency: 10 * time.Microsecond, Bandwidth: 10e6})
	if !errors.Is(err, kernel.ErrReshape) {
		t.Errorf("leaving the delay line: %v, want ErrReshape", err)
	}
	if got := in.Shaping()["beta"]; got.Delay != after["beta"].Delay {
		t.Errorf("a refused change changed beta: %+v", got)
	}
	if err := in.SetLink("gamma", degraded); err == nil {
		t.Error("a destination without shaping was changed")
	}
}

// A cut drops packets to and from the peer prefixes, except the keep
// ports'; removing it lets them through again and leaves no table.
func TestCut(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	listen := func() (kept, data net.Listener) {
		var ls [2]net.Listener
		for i := range ls {
			ln, err := topo.Listen(t.Context(), b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			ls[i] = ln
		}
		return ls[0], ls[1]
	}
	kept, data := listen()
	dials := func(ln net.Listener) bool {
		ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
		defer cancel()
		c, err := topo.Dial(ctx, a, "tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	port := func(ln net.Listener) uint16 {
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		n, _ := strconv.Atoi(p)
		return uint16(n)
	}
	beta := topo.Destinations()["beta"]
	if err := topo.Run(a, func() error { return kernel.InstallCut(beta, []uint16{port(kept)}) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(inspect(t, topo, a).tables, kernel.CutTableName) {
		t.Fatalf("no %s table after the cut", kernel.CutTableName)
	}
	if dials(data) {
		t.Error("a data connection crossed the cut")
	}
	if !dials(kept) {
		t.Error("a connection to a kept port did not cross the cut")
	}
	// Installing again replaces the cut.
	if err := topo.Run(a, func() error { return kernel.InstallCut(beta, []uint16{port(kept)}) }); err != nil {
		t.Fatal(err)
	}
	if err := topo.Run(a, kernel.RemoveCut); err != nil {
		t.Fatal(err)
	}
	if !dials(data) {
		t.Error("the healed cut still drops")
	}
	if st := inspect(t, topo, a); !st.clean() {
		t.Errorf("after the heal: %+v", st)
	}
	if err := topo.Run(a, kernel.RemoveCut); err != nil {
		t.Errorf("removing no cut: %v", err)
	}
}
