package netns_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/netns/netnstest"
)

func TestSetupReachAndClose(t *testing.T) {
	netnstest.RequireRoot(t)
	spec := netns.Spec{Hosts: []netns.HostSpec{
		{Name: "a1", Cluster: "alpha"}, {Name: "a2", Cluster: "alpha"}, {Name: "b1", Cluster: "beta"},
	}}
	topo, err := netns.Setup(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = topo.Close()
		}
	})
	// The /16 is the first free one from 10.77 on; hosts are numbered in it.
	sub := topo.Subnet.Addr().As4()
	if sub[0] != 10 || sub[1] < 77 || topo.Subnet.Bits() != 16 {
		t.Fatalf("subnet %v, want a 10.X.0.0/16 with X >= 77", topo.Subnet)
	}
	in := func(third, fourth byte) string {
		return netip.AddrFrom4([4]byte{10, sub[1], third, fourth}).String()
	}
	if got, want := topo.Host("a2").Addr.String(), in(1, 2); got != want {
		t.Errorf("a2 address %s, want %s", got, want)
	}
	if got, want := topo.Host("b1").Addr.String(), in(2, 1); got != want {
		t.Errorf("b1 address %s, want %s", got, want)
	}
	if d := topo.Destinations(); d["beta"][0].String() != in(2, 0)+"/24" {
		t.Errorf("destinations %v", d)
	}
	names, err := netns.List(topo.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 { // 3 hosts + switch
		t.Errorf("namespaces %v, want 4", names)
	}

	// A host's eth0 carries its address; the root namespace has no such link.
	err = topo.Run(topo.Host("b1"), func() error {
		l, err := netlink.LinkByName(netns.HostIface)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0].IP.String() != in(2, 1) {
			return fmt.Errorf("eth0 addresses %v", addrs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every host reaches every other one over TCP; the listener is used
	// from this goroutine although it was created in b1's namespace.
	ln, err := topo.Listen(t.Context(), topo.Host("b1"), "tcp", in(2, 1)+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				line, err := r.ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte("echo " + line))
				}
			}()
		}
	}()
	for _, from := range []string{"a1", "a2"} {
		c, err := topo.Dial(t.Context(), topo.Host(from), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if la := c.LocalAddr().(*net.TCPAddr).IP.String(); la != topo.Host(from).Addr.String() {
			t.Errorf("%s dialled from %s", from, la)
		}
		if _, err := c.Write([]byte("hi " + from + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != "echo hi "+from+"\n" {
			t.Errorf("got %q", got)
		}
		c.Close()
	}

	if err := topo.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := topo.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := topo.Run(topo.Host("a1"), func() error { return nil }); err == nil {
		t.Error("Run after Close succeeded")
	}
	netnstest.AssertNoLeftovers(t, topo.Prefix)
}

func TestSetupUndoesItselfOnFailure(t *testing.T) {
	netnstest.RequireRoot(t)
	id := netns.RandomRunID()
	// The second host's namespace name is already taken: setup must fail
	// partway and remove what it created.
	squat := netns.NamePrefix + id + "-h-b1"
	if err := os.MkdirAll(netns.RunDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(netns.RunDir, squat), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(netns.RunDir, squat)) })
	_, err := netns.Setup(t.Context(), netns.Spec{RunID: id, Hosts: []netns.HostSpec{
		{Name: "a1", Cluster: "alpha"}, {Name: "b1", Cluster: "beta"},
	}})
	if err == nil {
		t.Fatal("setup succeeded over an existing namespace name")
	}
	if !errors.Is(err, os.ErrExist) {
		t.Errorf("error %v, want one wrapping os.ErrExist", err)
	}
	names, lerr := netns.List(netns.NamePrefix + id + "-")
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(names) != 1 || names[0] != squat {
		t.Errorf("after failed setup: %v, want only the squatter %s", names, squat)
	}
}

func TestClean(t *testing.T) {
	netnstest.RequireRoot(t)
	topo, err := netns.Setup(t.Context(), netns.Spec{Hosts: []netns.HostSpec{{Name: "x", Cluster: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a crash: forget the topology, clean by prefix.
	removed, err := netns.Clean(topo.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %v, want host and switch", removed)
	}
	_ = topo.Close()
	netnstest.AssertNoLeftovers(t, topo.Prefix)
	if _, err := netns.Clean("other-"); err == nil {
		t.Error("Clean accepted a prefix outside the project")
	}
}

func TestSpecValidation(t *testing.T) {
	netnstest.RequireRoot(t)
	for name, spec := range map[string]netns.Spec{
		// Named runs, so that the check below looks at this test's own
		// namespaces only (other runs may be using the machine).
		"bad host name":   {RunID: "specv", Hosts: []netns.HostSpec{{Name: "a b", Cluster: "c"}}},
		"duplicate":       {RunID: "specv", Hosts: []netns.HostSpec{{Name: "a", Cluster: "c"}, {Name: "a", Cluster: "c"}}},
		"unknown cluster": {RunID: "specv", Clusters: []string{"c"}, Hosts: []netns.HostSpec{{Name: "a", Cluster: "d"}}},
		"bad run id":      {RunID: "x/y"},
	} {
		if _, err := netns.Setup(t.Context(), spec); err == nil {
			t.Errorf("%s: setup succeeded", name)
		}
	}
	netnstest.AssertNoLeftovers(t, netns.NamePrefix+"specv-")
}

// FreeSubnet skips every /16 that a route or an address of the machine
// overlaps, and says so when none is left.
func TestFreeSubnet(t *testing.T) {
	used := []netip.Prefix{
		netip.MustParsePrefix("10.77.3.0/24"), // a route inside 10.77
		netip.MustParsePrefix("10.78.0.1/32"), // an address in 10.78
		netip.MustParsePrefix("192.0.2.0/24"), // unrelated
		{},                                    // an invalid prefix is ignored
	}
	got, err := netns.FreeSubnet(used)
	if err != nil || got.String() != "10.79.0.0/16" {
		t.Fatalf("FreeSubnet = %v, %v; want 10.79.0.0/16", got, err)
	}
	if _, err := netns.FreeSubnet([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}); err == nil || !strings.Contains(err.Error(), "no free 10.X.0.0/16") {
		t.Fatalf("a machine on 10.0.0.0/8: err %v", err)
	}
	if got := netns.LauncherAddr(netip.MustParsePrefix("10.81.0.0/16")).String(); got != "10.81.0.1/16" {
		t.Errorf("LauncherAddr = %s", got)
	}
	if got := netns.ClusterPrefix(netip.MustParsePrefix("10.81.0.0/16"), 2).String(); got != "10.81.3.0/24" {
		t.Errorf("ClusterPrefix = %s", got)
	}
}
