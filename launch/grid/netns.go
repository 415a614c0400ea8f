package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// EnvNetns, in the environment of `koala-emu node`, names the network
// namespace (a path under /run/netns) the host runs in: the process enters
// it on a locked thread and re-executes itself from that thread, so the
// new program starts, with every thread, inside the namespace (execve
// keeps the calling thread's namespaces). The variable is removed first.
const EnvNetns = "KOALA_EMU_NETNS"

// EnterNetns re-executes this program inside the namespace named by
// EnvNetns, if it is set; it returns only on failure (or at once when the
// variable is not set). Call it first thing in a host's main.
func EnterNetns() error {
	path := os.Getenv(EnvNetns)
	if path == "" {
		return nil
	}
	if err := os.Unsetenv(EnvNetns); err != nil {
		return fmt.Errorf("netns host: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("netns host: %w", err)
	}
	runtime.LockOSThread() // never unlocked: the thread execs or the process fails
	// The launcher started this process with a parent-death signal, but the
	// kernel keeps it per thread and a new thread starts without one: the
	// thread that execs (which need not be the one the launcher forked)
	// takes it again, so no host outlives a launcher killed with SIGKILL.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("netns host: parent-death signal: %w", err)
	}
	if os.Getppid() == 1 {
		return errors.New("netns host: the launcher is gone")
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns host: open %s: %w", path, err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("netns host: enter %s: %w", path, err)
	}
	_ = unix.Close(fd)
	return fmt.Errorf("netns host: exec %s: %w", exe, syscall.Exec(exe, os.Args, os.Environ()))
}

// controlCluster is the netns topology's cluster of the hosts that do not
// shape (scheduler, information service, runner sites).
const controlCluster = "_control"

// launcherAddr is the launcher's address on the run's bridge (a veth from
// this process's namespace into the switch namespace): <subnet>.0.1, in the
// /16 netns.Setup found free on this machine.
func (p *NetnsPlatform) launcherAddr() netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.topo == nil {
		return netip.Prefix{}
	}
	return netns.LauncherAddr(p.topo.Subnet)
}

// NetnsOptions configure a NetnsPlatform.
type NetnsOptions struct {
	// ID names the run (namespaces koala-<ID>-...); empty picks one.
	ID string
	// Command returns the command that runs `koala-emu node` with args;
	// nil runs this executable with "node" and args.
	Command func(args []string) *exec.Cmd
	// Log receives the hosts' output; nil discards it.
	Log io.Writer
	// NoHostTuning leaves the kernel's ARP table limits alone (see
	// EnsureNeighbourRoom): Start then fails when they are too small.
	NoHostTuning bool
	// Records is where the run's owner is recorded for `koala-emu clean`;
	// empty: owner.RunsDir.
	Records string
}

// NetnsPlatform runs every actor host as a `koala-emu node` process in its
// own network namespace (netem/netns: a /24 per cluster on one bridge in a
// switch namespace, nothing on the host touched but one veth for the
// launcher). The hosts shape their egress in the kernel as node containers
// do, with the host's privileges (root: the delay lines run real-time).
// Needs root.
type NetnsPlatform struct {
	opts    NetnsOptions
	planned []HostSpec
	procs   *procs

	mu   sync.Mutex
	topo *netns.Topology
	veth string
}

var _ Platform = (*NetnsPlatform)(nil)

// NewNetnsPlatform returns a platform that builds its namespaces on Setup.
func NewNetnsPlatform(opts NetnsOptions) *NetnsPlatform {
	if opts.ID == "" {
		opts.ID = netns.RandomRunID()
	}
	// Run IDs are checked in Setup (owner.CheckRunID).
	return &NetnsPlatform{opts: opts, procs: &procs{log: opts.Log}}
}

func (p *NetnsPlatform) backend() string { return "netns" }

// planHosts tells the platform, before Setup, which hosts Start will get:
// their namespaces are made by Setup.
func (p *NetnsPlatform) planHosts(hs []HostSpec) { p.planned = append([]HostSpec(nil), hs...) }

// Setup builds the switch namespace, one namespace per planned host and the
// launcher's veth onto the bridge.
func (p *NetnsPlatform) Setup(ctx context.Context, clusters []string) (_ Network, err error) {
	if os.Geteuid() != 0 {
		return Network{}, errors.New("netns backend: creating network namespaces needs root")
	}
	if err := p.recordOwner(); err != nil {
		return Network{}, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.records().Remove(p.opts.ID))
		}
	}()
	spec := netns.Spec{RunID: p.opts.ID, Clusters: append(append([]string(nil), clusters...), controlCluster)}
	for _, h := range p.planned {
		c := controlCluster
		if h.Role == membership.RoleNode || h.Role == membership.RoleCluster {
			c = h.Cluster
		}
		spec.Hosts = append(spec.Hosts, netns.HostSpec{Name: h.Name, Cluster: c})
	}
	topo, err := netns.Setup(ctx, spec)
	if err != nil {
		return Network{}, fmt.Errorf("netns backend: %w", err)
	}
	p.mu.Lock()
	p.topo = topo
	p.mu.Unlock()
	defer func() {
		if err != nil {
			err = errors.Join(err, p.closeTopology())
		}
	}()
	if err := p.attachLauncher(topo); err != nil {
		return Network{}, err
	}
	nw := Network{LauncherIP: p.launcherAddr().Addr().String(), Subnets: map[string][]netip.Prefix{}}
	for i, c := range clusters {
		nw.Subnets[c] = []netip.Prefix{netns.ClusterPrefix(topo.Subnet, i)}
	}
	return nw, nil
}

func (p *NetnsPlatform) records() owner.Records {
	if p.opts.Records != "" {
		return owner.Records{Dir: p.opts.Records}
	}
	return owner.Records{Dir: owner.RunsDir}
}

// recordOwner records this process as the run's owner, before anything of
// the run exists (so a crash leaves nothing unrecorded).
func (p *NetnsPlatform) recordOwner() error {
	own, err := owner.Self(p.opts.ID, "netns")
	if err != nil {
		return fmt.Errorf("netns backend: %w", err)
	}
	if err := p.records().Write(own); err != nil {
		return fmt.Errorf("netns backend: %w", err)
	}
	return nil
}

// LauncherVeth is the name of a netns run's launcher veth on the host: it
// carries the run ID.
func LauncherVeth(runID string) string {
	name := "kl-" + runID
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}

// attachLauncher adds a veth from this namespace to the topology's bridge
// and gives this end the launcher's address.
func (p *NetnsPlatform) attachLauncher(topo *netns.Topology) error {
	sw, err := vnetns.GetFromPath(filepath.Join(netns.RunDir, topo.Prefix+"switch"))
	if err != nil {
		return fmt.Errorf("netns backend: switch namespace: %w", err)
	}
	defer sw.Close()
	name := LauncherVeth(p.opts.ID)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500}, PeerName: "launcher", PeerNamespace: netlink.NsFd(int(sw))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("netns backend: launcher veth: %w", err)
	}
	p.mu.Lock()
	p.veth = name
	p.mu.Unlock()
	swh, err := netlink.NewHandleAt(sw)
	if err != nil {
		return fmt.Errorf("netns backend: netlink in the switch namespace: %w", err)
	}
	defer swh.Close()
	peer, err := swh.LinkByName("launcher")
	if err != nil {
		return fmt.Errorf("netns backend: launcher veth peer: %w", err)
	}
	br, err := swh.LinkByName("br0")
	if err != nil {
		return fmt.Errorf("netns backend: bridge: %w", err)
	}
	if err := swh.LinkSetMaster(peer, br); err != nil {
		return fmt.Errorf("netns backend: launcher veth onto the bridge: %w", err)
	}
	if err := swh.LinkSetUp(peer); err != nil {
		return fmt.Errorf("netns backend: launcher veth up: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("netns backend: launcher veth: %w", err)
	}
	addr := netns.LauncherAddr(topo.Subnet)
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(addr)}); err != nil {
		return fmt.Errorf("netns backend: address %v on %s: %w", addr, name, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("netns backend: launcher veth up: %w", err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	a := p.Addr().As4()
	return &net.IPNet{IP: net.IP(a[:]), Mask: net.CIDRMask(p.Bits(), 32)}
}

// Membership is memberlist on the launcher's address, on a free port.
func (p *NetnsPlatform) Membership(self membership.Member) (membership.Provider, error) {
	c := MembershipConfig(self)
	launcher := p.launcherAddr()
	if !launcher.IsValid() {
		return nil, errors.New("netns backend: membership before Setup")
	}
	a := launcher.Addr().String()
	c.BindAddr, c.AdvertiseAddr, c.BindPort = a, a, 0
	if os.Getenv(EnvDebug) != "" {
		c.LogOutput = os.Stderr
	}
	return membership.NewMemberlist(c)
}

// Start starts one host process per host, each entering its namespace.
func (p *NetnsPlatform) Start(ctx context.Context, hosts []HostSpec, g *Grid) error {
	p.mu.Lock()
	topo := p.topo
	p.mu.Unlock()
	if topo == nil {
		return errors.New("netns backend: Start before Setup")
	}
	enc, err := prepareStart("netns", len(hosts), !p.opts.NoHostTuning, p.opts.Log, g)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if err := ctx.Err(); err != nil {
			return err
		}
		th := topo.Host(h.Name)
		if th == nil {
			return fmt.Errorf("netns backend: host %s was not planned before Setup", h.Name)
		}
		args := []string{"--role", h.Role, "--name", h.Name, "--ip", th.Addr.String()}
		if h.Cluster != "" {
			args = append(args, "--cluster", h.Cluster)
		}
		var cmd *exec.Cmd
		if p.opts.Command != nil {
			cmd = p.opts.Command(args)
		} else {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("netns backend: %w", err)
			}
			cmd = exec.Command(exe, append([]string{"node"}, args...)...)
		}
		cmd.Env = append(cmd.Env, os.Environ()...)
		cmd.Env = append(cmd.Env, EnvGrid+"="+enc, EnvNetns+"="+filepath.Join(netns.RunDir, th.Namespace),
			"GOGC="+defaultGOGC, "GOMEMLIMIT="+defaultGOMEMLIMIT)
		if err := p.procs.start(h.Name, cmd); err != nil {
			return fmt.Errorf("netns backend: %w", err)
		}
	}
	return nil
}

// Started implements Platform.
func (p *NetnsPlatform) Started() int { return p.procs.Started() }

// Exited implements Platform.
func (p *NetnsPlatform) Exited(context.Context) (map[string]string, error) {
	return p.procs.exited(), nil
}

// Kill kills a host's process with SIGKILL, as a crash would.
func (p *NetnsPlatform) Kill(name string) error { return p.procs.kill(name) }

// Close stops every host (SIGTERM, then SIGKILL when ctx ends) and removes
// the namespaces and the launcher's veth.
func (p *NetnsPlatform) Close(ctx context.Context) error {
	err := p.procs.stop(ctx, false)
	if err != nil {
		err = fmt.Errorf("netns backend: %w", err)
	}
	return errors.Join(err, p.closeTopology())
}

func (p *NetnsPlatform) closeTopology() error {
	p.mu.Lock()
	topo, veth := p.topo, p.veth
	p.topo, p.veth = nil, ""
	p.mu.Unlock()
	var errs []error
	if veth != "" {
		// Removing the switch namespace removes the veth too; this makes
		// sure of it when the namespace lingers.
		if l, err := netlink.LinkByName(veth); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("netns backend: remove %s: %w", veth, err))
			}
		}
	}
	if topo != nil {
		if err := topo.Close(); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, p.records().Remove(p.opts.ID))
		}
	}
	return errors.Join(errs...)
}
