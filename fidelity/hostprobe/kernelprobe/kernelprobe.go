// Package kernelprobe measures the host's capacity through the kernel
// shapers of the netns and docker backends (fidelity.Capacity): the
// probes of package hostprobe, with every rank's node a network namespace
// of its own, its egress shaped in the kernel (the netem qdisc where the
// kernel has it, else HTB and the NFQUEUE delay line, one per namespace,
// as on every node of those backends) and its frames carried by real TCP
// between namespaces over a Linux bridge. Its figures are what a kernel
// shaped run can count on: the cost of a message through veths, the
// delay lines' queues and their verdicts, not the userspace shaper's.
//
// It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), as the netns backend and
// calibrate do, and leaves nothing behind: its namespaces are named
// koala-<runid>-... and removed on return.
package kernelprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Hosts is how many namespaces the probe's ranks are spread over: the
// burst probe's 32 ranks (a wave job of 32 nodes) each on a node of its
// own, the message probe's rings spread round them.
const Hosts = 32

// cluster is the probe's one cluster.
const cluster = "probe"

// streamLatency is the latency of the byte probe's links (Connect with
// lat 0): a kernel link with no delay bypasses the delay line, which no
// link of a run does.
const streamLatency = 200 * time.Microsecond

// maxLatency is the longest latency the probes ask for (the burst probe's
// longest link), up to which the delay line's overhead is measured.
const maxLatency = 32 * time.Millisecond

// Fabric is a hostprobe.Fabric over network namespaces shaped in the
// kernel.
type Fabric struct {
	topo  *netns.Topology
	mech  netem.Mechanism
	insts []netem.Installed
	lat   time.Duration
	next  int
	floor time.Duration
}

// Open sets up Hosts namespaces with the kernel mechanism want selects
// (netem.Auto: the netem qdisc where the kernel has it, else htb) and
// measures the path's model as calibrate does (netns.PathModel). The
// namespaces are named koala-<runID>-... (runID "": a random one).
func Open(ctx context.Context, want, runID string) (_ *Fabric, err error) {
	spec := netns.Spec{RunID: runID, Clusters: []string{cluster}}
	for i := range Hosts {
		spec.Hosts = append(spec.Hosts, netns.HostSpec{Name: fmt.Sprintf("p%02d", i), Cluster: cluster})
	}
	topo, err := netns.Setup(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("kernel host probe: %w", err)
	}
	f := &Fabric{topo: topo}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close())
		}
	}()
	a, b := topo.Hosts[0], topo.Hosts[1]
	var mech netem.Mechanism
	if err := topo.Run(a, func() error {
		var err error
		mech, _, err = netem.Select(ctx, want, []netem.Mechanism{kernel.Netem{}, kernel.HTB{}})
		return err
	}); err != nil {
		return nil, fmt.Errorf("kernel host probe: %w", err)
	}
	model, _, err := netns.PathModel(ctx, topo, a, b, mech.Name(), maxLatency, netns.CalibrateOptions{}, nil)
	if err != nil {
		return nil, fmt.Errorf("kernel host probe: %w", err)
	}
	f.mech, f.floor = netns.Mechanism(mech.Name(), model, false), model.Floor
	if err := f.install(ctx, streamLatency); err != nil {
		return nil, err
	}
	return f, nil
}

// Path implements hostprobe.Fabric.
func (f *Fabric) Path() string {
	return fmt.Sprintf("TCP between %d network namespaces through the kernel shaper (%s), floor %v", Hosts, f.mech.Name(), f.floor)
}

// install shapes every namespace's link to the cluster at latency lat
// (no rate limit), in place where the installation can absorb it.
func (f *Fabric) install(ctx context.Context, lat time.Duration) error {
	link := netem.Link{Latency: lat}
	if len(f.insts) == len(f.topo.Hosts) {
		ok := true
		for _, in := range f.insts {
			s, can := in.(interface {
				SetLink(string, netem.Link) error
			})
			if !can || s.SetLink(cluster, link) != nil {
				ok = false
				break
			}
		}
		if ok {
			f.lat = lat
			return nil
		}
	}
	if err := f.uninstall(); err != nil {
		return err
	}
	for _, h := range f.topo.Hosts {
		plan := netem.EgressPlan{Node: h.Name, Cluster: cluster, To: map[string]netem.Link{cluster: link}}
		var in netem.Installed
		if err := f.topo.Run(h, func() error {
			var err error
			in, err = f.mech.Install(ctx, plan, f.topo.Destinations())
			return err
		}); err != nil {
			return fmt.Errorf("kernel host probe: install on %s: %w", h.Name, err)
		}
		f.insts = append(f.insts, in)
	}
	f.lat = lat
	return nil
}

func (f *Fabric) uninstall() error {
	var errs []error
	for _, in := range f.insts {
		errs = append(errs, in.Close())
	}
	f.insts = nil
	return errors.Join(errs...)
}

// Connect implements hostprobe.Fabric: rank i of the job listens and dials
// in the namespace after rank i-1's, round the Hosts namespaces, so that
// the probe's jobs spread over all of them.
func (f *Fabric) Connect(ctx context.Context, opts []comm.Options, lat time.Duration) ([]*comm.Comm, func(), error) {
	if lat <= 0 {
		lat = streamLatency
	}
	if lat != f.lat {
		if err := f.install(ctx, lat); err != nil {
			return nil, nil, err
		}
	}
	first := f.next
	f.next += len(opts)
	cs, err := comm.ConnectWith(ctx, opts, func(i int, o comm.Options) (*comm.Endpoint, error) {
		h := f.topo.Hosts[(first+i)%len(f.topo.Hosts)]
		o.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return f.topo.Dial(ctx, h, network, addr)
		}
		var e *comm.Endpoint
		err := f.topo.Run(h, func() error {
			var err error
			e, err = comm.Listen(ctx, o, net.JoinHostPort(h.Addr.String(), "0"))
			return err
		})
		return e, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kernel host probe: %w", err)
	}
	return cs, func() {}, nil
}

// Close removes the shaping and the namespaces.
func (f *Fabric) Close() error {
	return errors.Join(f.uninstall(), f.topo.Close())
}

// Measure is the hostprobe.Measurer of the kernel-shaped backends.
func Measure(ctx context.Context, opts hostprobe.Options) (_ fidelity.Capacity, err error) {
	f, err := Open(ctx, netem.Auto, "")
	if err != nil {
		return fidelity.Capacity{}, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return hostprobe.Measure(ctx, f, opts)
}
