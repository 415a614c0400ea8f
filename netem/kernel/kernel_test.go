package kernel_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/netns/netnstest"
)

func twoHosts(t testing.TB) *netns.Topology {
	return netnstest.Setup(t, netns.Spec{Hosts: []netns.HostSpec{
		{Name: "a", Cluster: "alpha"}, {Name: "b", Cluster: "beta"},
	}})
}

func install(t testing.TB, topo *netns.Topology, h *netns.Host, m netem.Mechanism, plan netem.EgressPlan, dsts map[string][]netip.Prefix) netem.Installed {
	t.Helper()
	var in netem.Installed
	err := topo.Run(h, func() error {
		var err error
		in, err = m.Install(context.Background(), plan, dsts)
		return err
	})
	if err != nil {
		t.Fatalf("install on %s: %v", h.Name, err)
	}
	t.Cleanup(func() {
		if err := in.Close(); err != nil {
			t.Errorf("close on %s: %v", h.Name, err)
		}
	})
	return in
}

// state is what the host's namespace holds of ours.
type state struct {
	qdiscs  []string // kinds on eth0
	classes int
	filters int
	tables  []string
	queues  []string // lines of /proc/net/netfilter/nfnetlink_queue
}

func inspect(t testing.TB, topo *netns.Topology, h *netns.Host) state {
	t.Helper()
	var st state
	err := topo.Run(h, func() error {
		l, err := netlink.LinkByName(netns.HostIface)
		if err != nil {
			return err
		}
		qs, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qs {
			st.qdiscs = append(st.qdiscs, q.Type())
		}
		cs, err := netlink.ClassList(l, netlink.MakeHandle(1, 0))
		if err == nil {
			st.classes = len(cs)
		}
		fs, err := netlink.FilterList(l, netlink.MakeHandle(1, 0))
		if err == nil {
			for _, f := range fs {
				if f.Type() == "u32" {
					if u, ok := f.(*netlink.U32); ok && u.ClassId != 0 {
						st.filters++
					}
				}
			}
		}
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range tables {
			st.tables = append(st.tables, tb.Name)
		}
		b, err := os.ReadFile("/proc/thread-self/net/netfilter/nfnetlink_queue")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" {
				st.queues = append(st.queues, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inspect %s: %v", h.Name, err)
	}
	return st
}

func (s state) clean() bool {
	for _, q := range s.qdiscs {
		if q == "htb" || q == "netem" {
			return false
		}
	}
	return len(s.tables) == 0 && len(s.queues) == 0
}

func probe(t testing.TB, topo *netns.Topology, h *netns.Host, m netem.Mechanism) error {
	t.Helper()
	var perr error
	if err := topo.Run(h, func() error { perr = m.Probe(context.Background()); return nil }); err != nil {
		t.Fatal(err)
	}
	return perr
}

// TestNetemMechanism runs where the kernel has the netem qdisc and skips,
// with the probe's reason, where it does not.
func TestNetemMechanism(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	if err := probe(t, topo, a, kernel.Netem{}); err != nil {
		if errors.Is(err, kernel.ErrNoNetem) {
			t.Skip("no netem qdisc in this kernel (ENOENT)")
		}
		t.Fatalf("netem probe: %v", err)
	}
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{
		"beta": {Latency: 300 * time.Microsecond, Bandwidth: 50e6},
	}}
	in := install(t, topo, a, kernel.Netem{}, plan, topo.Destinations())
	st := inspect(t, topo, a)
	if !contains(st.qdiscs, "htb") || !contains(st.qdiscs, "netem") || st.classes != 1 || st.filters != 1 {
		t.Errorf("installed state %+v, want htb root, one class with a netem leaf, one filter", st)
	}
	sh := in.(*kernel.Installed).Shaping()["beta"]
	if sh.Divert || sh.Delay != 300*time.Microsecond {
		t.Errorf("beta shaped %+v, want a 300µs netem delay and no delay line", sh)
	}
	echo(t, topo, a, b, 20)
	udpHoldsAtLeast(t, topo, a, b, sh.Delay, 100) // netem holds every packet its delay
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, topo, a); !st.clean() {
		t.Errorf("after close: %+v", st)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// echo sends n TCP round trips from a to b and checks the bytes.
func echo(t testing.TB, topo *netns.Topology, a, b *netns.Host, n int) {
	t.Helper()
	ln, err := topo.Listen(t.Context(), b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echoVia(t, topo, a, ln, n)
}

// echoVia makes n round trips of 4000 bytes from a to ln, which echoes.
func echoVia(t testing.TB, topo *netns.Topology, a *netns.Host, ln net.Listener, n int) {
	t.Helper()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:k]); err != nil {
				return
			}
		}
	}()
	c, err := topo.Dial(t.Context(), a, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	msg := make([]byte, 4000)
	got := make([]byte, len(msg))
	for i := range n {
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := readFull(c, got); err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint32(got) != uint32(i) {
			t.Fatalf("round %d: echo %d", i, binary.BigEndian.Uint32(got))
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestHTBProbe(t *testing.T) {
	topo := twoHosts(t)
	a := topo.Host("a")
	if err := probe(t, topo, a, kernel.HTB{}); err != nil {
		t.Fatalf("htb probe: %v", err)
	}
	// The probe leaves nothing: no scratch veth, no table, no queue.
	err := topo.Run(a, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "koala") {
				t.Errorf("probe left link %s", l.Attrs().Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, topo, a); !st.clean() {
		t.Errorf("after probe: %+v", st)
	}
}

// TestHTBMechanism installs rates and delays on two hosts, checks the
// kernel state, sends traffic through it, and checks that Close removes
// everything.
func TestHTBMechanism(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	const delay = 500 * time.Microsecond
	planA := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{
		"alpha": {Latency: 30 * time.Microsecond, Bandwidth: 500e6}, // rate only (Floor unknown: delay in full)
		"beta":  {Latency: delay, Bandwidth: 50e6},
	}}
	planB := netem.EgressPlan{Node: "b", Cluster: "beta", To: map[string]netem.Link{
		"alpha": {Latency: delay, Bandwidth: 50e6},
	}}
	mech := kernel.HTB{Model: kernel.Model{Floor: 40 * time.Microsecond}}
	inA := install(t, topo, a, mech, planA, topo.Destinations())
	install(t, topo, b, mech, planB, topo.Destinations())

	st := inspect(t, topo, a)
	if !contains(st.qdiscs, "htb") || st.classes != 2 || st.filters != 2 {
		t.Errorf("a: %+v, want an htb root with two classes and two u32 filters", st)
	}
	if !contains(st.tables, kernel.TableName) || len(st.queues) != 1 {
		t.Errorf("a: tables %v queues %v, want %s and one bound queue", st.tables, st.queues, kernel.TableName)
	}
	sh := inA.(*kernel.Installed).Shaping()
	if sh["alpha"].Divert || !sh["alpha"].Floor {
		t.Errorf("alpha (target below the floor) shaped %+v, want floor, no delay line", sh["alpha"])
	}
	if !sh["beta"].Divert || sh["beta"].Delay != delay-40*time.Microsecond {
		t.Errorf("beta shaped %+v", sh["beta"])
	}
	if eff := inA.Effective()["beta"]; eff.Latency != delay || eff.Bandwidth != 50e6 {
		t.Errorf("effective %+v", eff)
	}

	echo(t, topo, a, b, 50)
	udpHoldsAtLeast(t, topo, a, b, sh["beta"].Delay, 200)

	ds := inA.DelayStats()
	if ds.Released < 50 || ds.Drops != 0 || ds.Lateness.Count == 0 {
		t.Errorf("delay stats %+v", ds)
	}
	if err := inA.Close(); err != nil {
		t.Fatal(err)
	}
	if err := inA.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if st := inspect(t, topo, a); !st.clean() {
		t.Errorf("after close: %+v", st)
	}
}

// udpHoldsAtLeast sends n datagrams from a to b, each carrying its send
// time, and checks that none arrived sooner than the delay line's delay
// (a lower bound the line guarantees whatever the load).
func udpHoldsAtLeast(t testing.TB, topo *netns.Topology, a, b *netns.Host, delay time.Duration, n int) {
	t.Helper()
	var pc net.PacketConn
	if err := topo.Run(b, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(b.Addr.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := topo.Dial(t.Context(), a, "udp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := time.Now()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for i := 0; i < n; i++ {
			_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				done <- err
				return
			}
			now := time.Since(base)
			sent := time.Duration(binary.BigEndian.Uint64(buf[:k]))
			// A datagram may leave up to Coalesce early with a batch of
			// datagrams that are due (the line's documented contract).
			if now-sent < delay-kernel.Coalesce {
				done <- errors.New("datagram arrived after " + (now - sent).String() + ", before the delay " + delay.String() + " less Coalesce")
				return
			}
		}
		done <- nil
	}()
	msg := make([]byte, 8)
	for range n {
		binary.BigEndian.PutUint64(msg, uint64(time.Since(base)))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestHTBInstallUndoes makes the last step of an install fail (an IPv6
// destination for the delay line's rules) and checks that the HTB root and
// the bound queue it had already set up are gone.
func TestHTBInstallUndoes(t *testing.T) {
	topo := twoHosts(t)
	a := topo.Host("a")
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{
		"beta":  {Bandwidth: 50e6},
		"gamma": {Latency: time.Millisecond},
	}}
	dsts := map[string][]netip.Prefix{
		"beta":  {netns.ClusterPrefix(topo.Subnet, 1)},
		"gamma": {netip.MustParsePrefix("fd00::/64")},
	}
	var err error
	if rerr := topo.Run(a, func() error {
		_, err = kernel.HTB{Dev: netns.HostIface}.Install(context.Background(), plan, dsts)
		return nil
	}); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("install with an IPv6 delay destination succeeded")
	}
	if !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("error %v does not name the cause", err)
	}
	if st := inspect(t, topo, a); !st.clean() {
		t.Errorf("after failed install: %+v", st)
	}
}

func TestUnknownInterface(t *testing.T) {
	topo := twoHosts(t)
	a := topo.Host("a")
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{"beta": {Bandwidth: 1e6}}}
	var err error
	_ = topo.Run(a, func() error {
		_, err = kernel.HTB{Dev: "nosuch0"}.Install(context.Background(), plan, topo.Destinations())
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Errorf("install on a missing interface: %v", err)
	}
}

func TestCleanProbeLinks(t *testing.T) {
	topo := twoHosts(t)
	a := topo.Host("a")
	var removed []string
	err := topo.Run(a, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "koalap000001a"}, PeerName: "koalap000001b"}); err != nil {
			return err
		}
		var err error
		removed, err = kernel.CleanProbeLinks()
		if err != nil {
			return err
		}
		if _, err := netlink.LinkByName("koalap000001a"); err == nil {
			return errors.New("probe veth still there")
		}
		if _, err := netlink.LinkByName(netns.HostIface); err != nil {
			return errors.New("eth0 removed too")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) == 0 {
		t.Error("nothing reported removed")
	}
}

// delayBothWays installs htb delay lines of delay on hosts a (alpha) and b
// (beta) of twoHosts, each towards the other.
func delayBothWays(t testing.TB, topo *netns.Topology, delay time.Duration) (inA, inB netem.Installed) {
	t.Helper()
	a, b := topo.Host("a"), topo.Host("b")
	mech := kernel.HTB{}
	inA = install(t, topo, a, mech, netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{"beta": {Latency: delay}}}, topo.Destinations())
	inB = install(t, topo, b, mech, netem.EgressPlan{Node: "b", Cluster: "beta", To: map[string]netem.Link{"alpha": {Latency: delay}}}, topo.Destinations())
	return inA, inB
}

// TestLineThreads installs delay lines in two namespaces of one process
// and checks that each has its thread, that traffic through both is
// delayed at least as asked, and that the threads are gone once the lines
// are closed.
func TestLineThreads(t *testing.T) {
	base := kernel.LineThreads()
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	const delay = 300 * time.Microsecond
	inA, inB := delayBothWays(t, topo, delay)
	if n := kernel.LineThreads() - base; n != 2 {
		t.Fatalf("with two lines: %d line threads, want 2", n)
	}
	echo(t, topo, a, b, 20)
	udpHoldsAtLeast(t, topo, a, b, delay, 50)
	udpHoldsAtLeast(t, topo, b, a, delay, 50)
	for _, in := range []netem.Installed{inA, inB} {
		if ds := in.DelayStats(); ds.Released < 20+50 || ds.Drops != 0 {
			t.Errorf("delay stats %+v, want at least 70 released, no drops", ds)
		}
	}
	if err := inA.Close(); err != nil {
		t.Fatal(err)
	}
	if n := kernel.LineThreads() - base; n != 1 {
		t.Errorf("after closing one line: %d line threads, want 1", n)
	}
	// The other line still works: it delays what reaches b (the delay
	// line holds arriving packets, see installQueueRules).
	udpHoldsAtLeast(t, topo, a, b, delay, 20)
	if err := inB.Close(); err != nil {
		t.Fatal(err)
	}
	if n := kernel.LineThreads() - base; n != 0 {
		t.Errorf("after closing both: %d line threads left", n)
	}
}

// A host whose own address is the first of its cluster's prefix (a cluster
// manager on its subnet), in a grid of that one cluster: the egress
// interface is still found (the route to the first address is the loopback
// and says nothing).
func TestHTBOwnClusterOnly(t *testing.T) {
	topo := netnstest.Setup(t, netns.Spec{Hosts: []netns.HostSpec{{Name: "a", Cluster: "alpha"}, {Name: "b", Cluster: "alpha"}}})
	a := topo.Host("a")
	own := netip.PrefixFrom(a.Addr, 24).Masked()
	if own.Addr().Next() != a.Addr {
		t.Fatalf("a is %v, want the first host of %v", a.Addr, own)
	}
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{
		"alpha": {Latency: 300 * time.Microsecond, Bandwidth: 100e6},
	}}
	in := install(t, topo, a, kernel.HTB{}, plan, map[string][]netip.Prefix{"alpha": {own}})
	if eff := in.Effective()["alpha"]; eff.Bandwidth != 100e6 {
		t.Errorf("effective %+v, want the alpha link", eff)
	}
}

// TestDelayHeldAtReceiver checks that the delay line holds a flow's data
// at the receiving host, where the packets no longer belong to the
// sender's socket: held at the sender, TCP Small Queues counted them
// against the socket and kept a flow over a delay of 4 ms or more at about
// its initial window (8-16 segments in flight).
func TestDelayHeldAtReceiver(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	const delay = 5 * time.Millisecond
	inA, inB := delayBothWays(t, topo, delay)
	ln, err := topo.Listen(t.Context(), b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const total = 8 << 20
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		var n int64
		buf := make([]byte, 1<<16)
		for n < total {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		got <- n
	}()
	c, err := topo.Dial(t.Context(), a, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	maxUnacked := uint32(0)
	chunk := make([]byte, 32<<10)
	for sent := 0; sent < total; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		_ = raw.Control(func(fd uintptr) {
			if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				maxUnacked = max(maxUnacked, ti.Unacked)
			}
		})
	}
	if n := <-got; n != total {
		t.Fatalf("received %d bytes, want %d", n, total)
	}
	stA, _ := inA.(*kernel.Installed).LineStats()
	stB, _ := inB.(*kernel.Installed).LineStats()
	if stB.Bytes < total {
		t.Errorf("the receiver's line released %d bytes, want at least the %d sent to it", stB.Bytes, total)
	}
	if stA.Bytes >= total/4 {
		t.Errorf("the sender's line released %d bytes of a %d byte flow away from it: data held at the sender", stA.Bytes, total)
	}
	if maxUnacked < 32 {
		t.Errorf("at most %d segments in flight over a %v round trip: the flow was held back at the sender", maxUnacked, 2*delay)
	}
	t.Logf("receiver's line %d bytes, sender's line %d bytes, up to %d segments in flight", stB.Bytes, stA.Bytes, maxUnacked)
}

// TestLineYieldsUnderStopTheWorld: a line's thread holds the runtime's pin
// (no preemption) between its own passes through the Go scheduler. Echo
// rounds over 1 ms each way (100 rounds, at least 200 ms of traffic) while
// another goroutine stops the world again and again: every round comes back
// intact, each line passed through the scheduler on its own, and neither
// reports an error (a thread that blocked while pinned would crash the
// process).
func TestLineYieldsUnderStopTheWorld(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	inA, inB := delayBothWays(t, topo, time.Millisecond)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.GC()
			debug.FreeOSMemory()
		}
	}()
	echo(t, topo, a, b, 100)
	close(stop)
	<-done
	for name, in := range map[string]netem.Installed{"a": inA, "b": inB} {
		st, err := in.(*kernel.Installed).LineStats()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if st.Yields.Count == 0 {
			t.Errorf("%s: the line's thread never passed through the Go scheduler itself in 100 round trips over 1 ms", name)
		}
		t.Logf("%s: %d releases, %d yields (p50 %v, p99 %v), lateness p99 %v", name, st.Released, st.Yields.Count, st.Yields.P50, st.Yields.P99, st.Lateness.P99)
	}
}

// TestLineSerialisesBursts: a message that finds its link idle pays its
// wire time (the sender's HTB class lets its burst and a whole GSO packet
// leave at once; the receiver's delay line charges them), and two senders
// of one cluster each have their own serialiser, their packets released
// out of id order where one's are due first, none lost.
func TestLineSerialisesBursts(t *testing.T) {
	topo := netnstest.Setup(t, netns.Spec{Hosts: []netns.HostSpec{
		{Name: "a1", Cluster: "alpha"}, {Name: "a2", Cluster: "alpha"},
		{Name: "b1", Cluster: "beta"}, {Name: "b2", Cluster: "beta"},
	}})
	a1, a2, b1, b2 := topo.Host("a1"), topo.Host("a2"), topo.Host("b1"), topo.Host("b2")
	link := netem.Link{Latency: 5 * time.Millisecond, Bandwidth: 2e6}
	wire := netem.WireRate(link) // payload bytes/s: 2.02 MB/s
	for _, h := range []*netns.Host{a1, a2} {
		install(t, topo, h, kernel.HTB{}, netem.EgressPlan{Node: h.Name, Cluster: "alpha", To: map[string]netem.Link{"beta": link}}, topo.Destinations())
	}
	var inB netem.Installed
	for _, h := range []*netns.Host{b1, b2} {
		in := install(t, topo, h, kernel.HTB{}, netem.EgressPlan{Node: h.Name, Cluster: "beta", To: map[string]netem.Link{"alpha": link}}, topo.Destinations())
		if h == b1 {
			inB = in
		}
	}
	const msg = 48 << 10
	serve := func(h *netns.Host) string {
		ln, err := topo.Listen(t.Context(), h, "tcp", net.JoinHostPort(h.Addr.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { // answer each message of msg bytes with one byte
					defer c.Close()
					buf := make([]byte, msg)
					for {
						if _, err := io.ReadFull(c, buf); err != nil {
							return
						}
						if _, err := c.Write(buf[:1]); err != nil {
							return
						}
					}
				}()
			}
		}()
		return ln.Addr().String()
	}
	at1, at2 := serve(b1), serve(b2)
	dial := func(h *netns.Host, addr string) net.Conn {
		c, err := topo.Dial(t.Context(), h, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		return c
	}
	round := func(c net.Conn) (time.Duration, error) {
		out, in := make([]byte, msg), make([]byte, 1)
		start := time.Now()
		if _, err := c.Write(out); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	// rounds runs n rounds on each connection at once, the link idle
	// before each (the class's bucket full again, TCP's window kept: the
	// gap is under its timeout), and returns each round's slowest.
	rounds := func(n int, conns ...net.Conn) []time.Duration {
		var slowest []time.Duration
		for range n {
			ds := make(chan time.Duration, len(conns))
			errs := make(chan error, len(conns))
			for _, c := range conns {
				go func() {
					d, err := round(c)
					ds <- d
					errs <- err
				}()
			}
			var worst time.Duration
			for range conns {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				worst = max(worst, <-ds)
			}
			slowest = append(slowest, worst)
			time.Sleep(100 * time.Millisecond)
		}
		return slowest[3:] // after the warm-up
	}
	c11, c12, c21 := dial(a1, at1), dial(a1, at2), dial(a2, at1)
	// One sender, one receiver.
	want := 2*link.Latency + time.Duration(float64(msg)/wire*1e9)
	if fastest := slices.Min(rounds(8, c11)); fastest < want*97/100 {
		t.Errorf("a %d byte message after idle took %v there and back, want at least %v (latency both ways and its wire time)", msg, fastest, want)
	}
	// One sender, two receivers of one cluster: they share the sender's
	// class but not a serialiser. Only logged: the later message comes
	// back early by what the class lets leave at once (docs/shaping.md).
	both := 2*link.Latency + time.Duration(2*float64(msg)/wire*1e9)
	fanout := slices.Min(rounds(8, c11, c12))
	// Two senders, one receiver.
	rounds(13, c11, c21)
	st, err := inB.(*kernel.Installed).LineStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops != 0 || st.SendErrors != 0 || st.Received != st.Released {
		t.Errorf("b1's line: %+v, want no drops or send errors and everything released", st)
	}
	if st.OneByOne == 0 {
		t.Errorf("two senders at once: no packet was released ahead of an older one (%+v)", st)
	}
	t.Logf("two receivers: the later back after %v, the model's %v; b1's line released %d packets, %d one by one", fanout, both, st.Released, st.OneByOne)
}

// TestExemptPorts checks that TCP to and from an exempt port (the control
// plane) passes neither the delay line nor the HTB class of its
// destination, while other traffic between the same hosts passes both.
func TestExemptPorts(t *testing.T) {
	topo := twoHosts(t)
	a, b := topo.Host("a"), topo.Host("b")
	exempt, err := topo.Listen(t.Context(), b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer exempt.Close()
	other, err := topo.Listen(t.Context(), b, "tcp", net.JoinHostPort(b.Addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := uint16(exempt.Addr().(*net.TCPAddr).Port)
	mech := kernel.HTB{Exempt: []uint16{port}}
	link := netem.Link{Latency: 2 * time.Millisecond, Bandwidth: 50e6}
	inA := install(t, topo, a, mech, netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{"beta": link}}, topo.Destinations())
	inB := install(t, topo, b, mech, netem.EgressPlan{Node: "b", Cluster: "beta", To: map[string]netem.Link{"alpha": link}}, topo.Destinations())
	held := func() int64 { return inA.DelayStats().Released + inB.DelayStats().Released }
	classBytes := func(h *netns.Host) uint64 {
		t.Helper()
		var sum uint64
		for _, c := range htbClasses(t, topo, h) {
			if st := c.Attrs().Statistics; st != nil && st.Basic != nil {
				sum += st.Basic.Bytes
			}
		}
		return sum
	}
	h0, ca0, cb0 := held(), classBytes(a), classBytes(b)
	echoVia(t, topo, a, exempt, 20)
	if h, ca, cb := held(), classBytes(a), classBytes(b); h != h0 || ca != ca0 || cb != cb0 {
		t.Errorf("exempt port %d: the lines released %d packets, the classes of a and b sent %d and %d bytes; want none", port, h-h0, ca-ca0, cb-cb0)
	}
	echoVia(t, topo, a, other, 20)
	if h, ca, cb := held(), classBytes(a), classBytes(b); h-h0 < 40 || ca-ca0 < 20*4000 || cb-cb0 < 20*4000 {
		t.Errorf("another port: the lines released %d packets, the classes of a and b sent %d and %d bytes; want at least 40 and 80000 each", h-h0, ca-ca0, cb-cb0)
	}
}
