package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NamePrefix starts the name of every namespace this package creates.
const NamePrefix = "koala-"

// RunDir is where named network namespaces are bind-mounted (the iproute2
// convention, so `ip netns list` shows them).
const RunDir = "/run/netns"

// HostIface is the name of a host's interface inside its namespace.
const HostIface = "eth0"

// CongestionControl is the TCP congestion control of every emulated host
// (its namespace's default), fixed rather than inherited from the machine.
// Reno is the one every namespace may choose. The host default here is BBR,
// whose pacing leaves gaps in which an HTB class refills its burst, once per
// round trip: measured here, a 1 MB ping-pong over a 46.2 MB/s, 1.6 ms link
// came out 5.5 % fast under BBR and 1.7 % fast under Reno.
const CongestionControl = "reno"

// HostSysctls are the namespaced kernel settings of every emulated host
// (netns namespaces and docker containers alike), keyed by sysctl name:
// the congestion control above, and no slow start after an idle period.
// By default a TCP connection idle for one retransmission timeout falls
// back to its initial window of 10 segments (about 14 KB), so every
// lock-step exchange after a pause (an all-gather step of 20 KB, a halo
// after a computation) paid extra round trips that the link model (a
// latency and a rate) does not have and the monitor reported as the
// link's lateness: das3-smoke on netns at dilation 1000 measured frames
// p50 41 % late on the all-gather's links and the backlogged rate p99 66 %
// below its target.
var HostSysctls = map[string]string{
	"net.ipv4.tcp_congestion_control":    CongestionControl,
	"net.ipv4.tcp_slow_start_after_idle": "0",
}

// HostSpec names one emulated node and its cluster.
type HostSpec struct {
	Name    string
	Cluster string
}

// Spec describes a topology to build.
type Spec struct {
	// RunID distinguishes concurrent runs; names are koala-<RunID>-....
	// Empty picks a random 6-hex-digit id.
	RunID string
	// Subnet is the topology's IPv4 /16 (cluster i gets its (i+1)-th /24).
	// The zero value picks the first 10.X.0.0/16 from 10.77 on that
	// overlaps no route and no address of the calling namespace (FreeSubnet):
	// the machine's own network, or another run's launcher, may hold 10.77.
	Subnet netip.Prefix
	// Clusters fixes the cluster order (cluster i gets <subnet>.<i+1>.0/24).
	// Empty means the order of first appearance in Hosts.
	Clusters []string
	// Hosts are the nodes, at most 254 per cluster.
	Hosts []HostSpec
	// MTU of the veths; 0 means 1500 (an Ethernet link, as on DAS-3's GbE
	// and what the HTB payload factor assumes).
	MTU int
}

// Host is one emulated node: a network namespace with eth0 on the bridge.
type Host struct {
	Name    string
	Cluster string
	// Addr is the host's address on eth0, <subnet>.<cluster>.<node>.
	Addr netip.Addr
	// Namespace is the namespace's name under /run/netns.
	Namespace string

	ns vnetns.NsHandle
}

// Topology is a set of hosts built by Setup. Close removes it.
type Topology struct {
	RunID string
	// Prefix is koala-<RunID>-: every namespace of the topology starts with it.
	Prefix   string
	Clusters []string
	Hosts    []*Host
	// Subnet is the /16 every host is in (one bridge).
	Subnet netip.Prefix

	mu       sync.Mutex
	closed   bool
	switchNS string
	sw       vnetns.NsHandle
	created  []string // namespace names, in creation order
}

// RandomRunID returns a fresh 6-hex-digit run id.
func RandomRunID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("netns: crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// ClusterPrefix is the /24 of the i-th cluster (0-based) in subnet (a /16).
func ClusterPrefix(subnet netip.Prefix, i int) netip.Prefix {
	return netip.PrefixFrom(hostAddr(subnet, i+1, 0), 24)
}

// LauncherAddr is the address a launcher takes on a topology's bridge
// (<subnet>.0.1): no cluster's /24 holds it.
func LauncherAddr(subnet netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(hostAddr(subnet, 0, 1), subnet.Bits())
}

func hostAddr(subnet netip.Prefix, third, fourth int) netip.Addr {
	a := subnet.Masked().Addr().As4()
	return netip.AddrFrom4([4]byte{a[0], a[1], byte(third), byte(fourth)})
}

// Subnet range FreeSubnet picks from: 10.77.0.0/16 to 10.99.0.0/16.
const (
	firstOctet = 77
	lastOctet  = 99
)

// FreeSubnet returns the first 10.X.0.0/16 (X from 77 to 99) that overlaps
// none of used.
func FreeSubnet(used []netip.Prefix) (netip.Prefix, error) {
	for x := firstOctet; x <= lastOctet; x++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), 0, 0}), 16)
		if !slices.ContainsFunc(used, func(u netip.Prefix) bool { return u.IsValid() && u.Overlaps(p) }) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("netns: no free 10.X.0.0/16 for X in %d..%d: every one overlaps a route or an address of this machine (`ip route`, `ip addr`; `koala-emu clean` removes crashed runs)", firstOctet, lastOctet)
}

// usedPrefixes lists the destinations of this namespace's IPv4 routes (the
// default route excepted) and its addresses.
func usedPrefixes() ([]netip.Prefix, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("netns: listing routes: %w", err)
	}
	var used []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if p, ok := ipNetPrefix(r.Dst); ok && p.Bits() > 0 {
			used = append(used, p)
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("netns: listing addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := ipNetPrefix(a.IPNet); ok {
			used = append(used, p)
		}
	}
	return used, nil
}

func ipNetPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok || n.IP.To4() == nil {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones).Masked(), true
}

func validName(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// Setup creates the topology: a switch namespace with a bridge, one
// namespace per host with eth0 (veth into the bridge) addressed
// <subnet>.<cluster>.<node>/16, lo and eth0 up, IPv6 off. On failure partway,
// everything already created is removed before the error is returned.
func Setup(ctx context.Context, spec Spec) (_ *Topology, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("netns: creating network namespaces needs root")
	}
	runID := spec.RunID
	if runID == "" {
		runID = RandomRunID()
	}
	if !validName(runID) {
		return nil, fmt.Errorf("netns: invalid run id %q", runID)
	}
	mtu := spec.MTU
	if mtu == 0 {
		mtu = 1500
	}
	clusters := append([]string(nil), spec.Clusters...)
	if len(clusters) == 0 {
		seen := map[string]bool{}
		for _, h := range spec.Hosts {
			if !seen[h.Cluster] {
				seen[h.Cluster] = true
				clusters = append(clusters, h.Cluster)
			}
		}
	}
	if len(clusters) > 254 {
		return nil, fmt.Errorf("netns: %d clusters, at most 254", len(clusters))
	}
	cidx := map[string]int{}
	for i, c := range clusters {
		cidx[c] = i
	}
	subnet := spec.Subnet
	if !subnet.IsValid() {
		used, err := usedPrefixes()
		if err != nil {
			return nil, err
		}
		if subnet, err = FreeSubnet(used); err != nil {
			return nil, err
		}
	}
	if !subnet.Addr().Is4() || subnet.Bits() != 16 || subnet.Masked() != subnet {
		return nil, fmt.Errorf("netns: subnet %v is not an IPv4 /16", subnet)
	}
	t := &Topology{RunID: runID, Prefix: NamePrefix + runID + "-", Clusters: clusters, Subnet: subnet, sw: -1}
	names := map[string]bool{}
	perCluster := map[string]int{}
	for _, hs := range spec.Hosts {
		if !validName(hs.Name) {
			return nil, fmt.Errorf("netns: invalid host name %q", hs.Name)
		}
		if names[hs.Name] {
			return nil, fmt.Errorf("netns: duplicate host name %q", hs.Name)
		}
		names[hs.Name] = true
		ci, ok := cidx[hs.Cluster]
		if !ok {
			return nil, fmt.Errorf("netns: host %s: cluster %q not in %v", hs.Name, hs.Cluster, clusters)
		}
		perCluster[hs.Cluster]++
		n := perCluster[hs.Cluster]
		if n > 254 {
			return nil, fmt.Errorf("netns: cluster %s has more than 254 hosts", hs.Cluster)
		}
		t.Hosts = append(t.Hosts, &Host{
			Name: hs.Name, Cluster: hs.Cluster,
			Addr:      hostAddr(subnet, ci+1, n),
			Namespace: t.Prefix + "h-" + hs.Name,
			ns:        -1,
		})
	}

	defer func() {
		if err != nil {
			if cerr := t.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("netns: undoing setup: %w", cerr))
			}
		}
	}()

	t.switchNS = t.Prefix + "switch"
	if t.sw, err = t.newNamed(t.switchNS); err != nil {
		return nil, err
	}
	swh, err := netlink.NewHandleAt(t.sw)
	if err != nil {
		return nil, fmt.Errorf("netns: netlink in %s: %w", t.switchNS, err)
	}
	defer swh.Close()
	if err := t.runIn(t.sw, func() error {
		// The bridge carries only our hosts' traffic: no netfilter on it.
		return writeSysctlIfExists("/proc/sys/net/bridge/bridge-nf-call-iptables", "0")
	}); err != nil {
		return nil, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", MTU: mtu}}
	if err := swh.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("netns: add bridge in %s: %w", t.switchNS, err)
	}
	if err := swh.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("netns: bridge up: %w", err)
	}
	brLink, err := swh.LinkByName("br0")
	if err != nil {
		return nil, fmt.Errorf("netns: bridge: %w", err)
	}

	for i, h := range t.Hosts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("netns: setup: %w", err)
		}
		if h.ns, err = t.newNamed(h.Namespace); err != nil {
			return nil, err
		}
		port := fmt.Sprintf("p%d", i+1)
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: port, MTU: mtu, MasterIndex: brLink.Attrs().Index},
			PeerName:      HostIface,
			PeerNamespace: netlink.NsFd(int(h.ns)),
			PeerMTU:       uint32(mtu),
		}
		if err := swh.LinkAdd(veth); err != nil {
			return nil, fmt.Errorf("netns: add veth for %s: %w", h.Name, err)
		}
		if err := swh.LinkSetUp(veth); err != nil {
			return nil, fmt.Errorf("netns: %s up: %w", port, err)
		}
		if err := t.configureHost(h); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Topology) configureHost(h *Host) error {
	hh, err := netlink.NewHandleAt(h.ns)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", h.Namespace, err)
	}
	defer hh.Close()
	if err := t.runIn(h.ns, func() error {
		if err := writeSysctlIfExists("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"); err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(HostSysctls)) {
			if err := writeSysctlIfExists("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), HostSysctls[k]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	lo, err := hh.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns: %s lo: %w", h.Name, err)
	}
	if err := hh.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns: %s lo up: %w", h.Name, err)
	}
	eth, err := hh.LinkByName(HostIface)
	if err != nil {
		return fmt.Errorf("netns: %s %s: %w", h.Name, HostIface, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: h.Addr.AsSlice(), Mask: net.CIDRMask(t.Subnet.Bits(), 32)}}
	if err := hh.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("netns: %s address %s: %w", h.Name, h.Addr, err)
	}
	if err := hh.LinkSetUp(eth); err != nil {
		return fmt.Errorf("netns: %s %s up: %w", h.Name, HostIface, err)
	}
	return nil
}

func writeSysctlIfExists(path, value string) error {
	err := os.WriteFile(path, []byte(value), 0o644)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: sysctl %s=%s: %w", path, value, err)
	}
	return nil
}

// newNamed creates a named namespace (bind mount under RunDir), records it
// for Close and returns an open handle to it. NewNamed leaves nothing
// behind when it fails, so only successes are recorded.
func (t *Topology) newNamed(name string) (vnetns.NsHandle, error) {
	h, err := NewNamed(name)
	if err != nil {
		return -1, err
	}
	t.mu.Lock()
	t.created = append(t.created, name)
	t.mu.Unlock()
	return h, nil
}

// NewNamed creates a network namespace bind-mounted at RunDir/name and
// returns an open handle to it. The calling goroutine's thread is not
// touched. On failure nothing is left behind.
func NewNamed(name string) (vnetns.NsHandle, error) {
	if !validName(name) {
		return -1, fmt.Errorf("netns: invalid namespace name %q", name)
	}
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return -1, fmt.Errorf("netns: %w", err)
	}
	path := filepath.Join(RunDir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return -1, fmt.Errorf("netns: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return -1, fmt.Errorf("netns: create %s: %w", path, err)
	}
	// A throwaway locked thread unshares into the new namespace and
	// bind-mounts it; the thread is never unlocked, so the runtime discards
	// it when the goroutine ends and no goroutine ever runs in the new
	// namespace by accident.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: unshare: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("netns: bind mount %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return -1, err
	}
	h, err := vnetns.GetFromPath(path)
	if err != nil {
		return -1, errors.Join(fmt.Errorf("netns: open %s: %w", path, err), DeleteNamed(name))
	}
	return h, nil
}

// DeleteNamed unmounts and removes a named namespace. The namespace itself
// disappears, with its interfaces, once nothing refers to it any more.
// A name that does not exist is not an error.
func DeleteNamed(name string) error {
	path := filepath.Join(RunDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: remove %s: %w", path, err)
	}
	return nil
}

// Host returns the host of that name, or nil.
func (t *Topology) Host(name string) *Host {
	for _, h := range t.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// HostsOf returns the hosts of a cluster in creation order.
func (t *Topology) HostsOf(cluster string) []*Host {
	var hs []*Host
	for _, h := range t.Hosts {
		if h.Cluster == cluster {
			hs = append(hs, h)
		}
	}
	return hs
}

// Destinations maps every cluster to its /24: the destination prefixes a
// shaping mechanism installs filters for.
func (t *Topology) Destinations() map[string][]netip.Prefix {
	d := make(map[string][]netip.Prefix, len(t.Clusters))
	for i, c := range t.Clusters {
		d[c] = []netip.Prefix{ClusterPrefix(t.Subnet, i)}
	}
	return d
}

// Run executes fn inside h's network namespace on a locked OS thread and
// returns its error. The thread's namespace is restored afterwards; if that
// fails the thread stays locked and is discarded by the runtime.
func (t *Topology) Run(h *Host, fn func() error) error {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return errors.New("netns: topology closed")
	}
	return t.runIn(h.ns, fn)
}

func (t *Topology) runIn(ns vnetns.NsHandle, fn func() error) error {
	return RunIn(ns, fn)
}

// RunIn executes fn with the calling thread switched to namespace ns (on a
// fresh goroutine locked to its OS thread).
func RunIn(ns vnetns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- fmt.Errorf("netns: current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(ns); err != nil {
			errc <- fmt.Errorf("netns: enter namespace: %w", err)
			runtime.UnlockOSThread()
			return
		}
		var ferr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					ferr = fmt.Errorf("netns: panic in namespace: %v", r)
				}
			}()
			ferr = fn()
		}()
		if err := vnetns.Set(orig); err != nil {
			// Leave the thread locked: the runtime destroys it.
			errc <- errors.Join(ferr, fmt.Errorf("netns: restore namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen opens a listener inside h's namespace (address like ":0" or
// "10.77.1.1:5000"). It keeps working from any goroutine.
func (t *Topology) Listen(ctx context.Context, h *Host, network, address string) (net.Listener, error) {
	var ln net.Listener
	err := t.Run(h, func() error {
		var lc net.ListenConfig
		var err error
		ln, err = lc.Listen(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: listen in %s: %w", h.Name, err)
	}
	return ln, nil
}

// Dial connects from inside h's namespace. TCP connections get TCP_NODELAY
// (Go's default).
func (t *Topology) Dial(ctx context.Context, h *Host, network, address string) (net.Conn, error) {
	var c net.Conn
	err := t.Run(h, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: dial %s from %s: %w", address, h.Name, err)
	}
	return c, nil
}

// Close removes every namespace of the topology (the bridge and the veths
// go with them). It is safe to call more than once.
func (t *Topology) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for _, h := range t.Hosts {
		if h.ns >= 0 {
			if err := h.ns.Close(); err != nil {
				errs = append(errs, fmt.Errorf("netns: close handle %s: %w", h.Namespace, err))
			}
			h.ns = -1
		}
	}
	if t.sw >= 0 {
		if err := t.sw.Close(); err != nil {
			errs = append(errs, fmt.Errorf("netns: close handle %s: %w", t.switchNS, err))
		}
		t.sw = -1
	}
	// Hosts first, the switch last (reverse creation order).
	for i := len(t.created) - 1; i >= 0; i-- {
		if err := DeleteNamed(t.created[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List returns the names of the namespaces under RunDir that start with
// prefix (NamePrefix for everything of this project).
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Clean removes every namespace whose name starts with prefix: what a
// crashed run left. The prefix must start with NamePrefix so that nothing
// else is ever touched. It returns the names removed.
func Clean(prefix string) ([]string, error) {
	if !strings.HasPrefix(prefix, NamePrefix) {
		return nil, fmt.Errorf("netns: clean prefix %q does not start with %q", prefix, NamePrefix)
	}
	names, err := List(prefix)
	if err != nil {
		return nil, err
	}
	var errs []error
	var removed []string
	for _, n := range names {
		if err := DeleteNamed(n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}
