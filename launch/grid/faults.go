package grid

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// FaultKinds are the kinds of the faults timeline the grid backends
// apply: every kind.
//
//   - kill: the node's host is killed as a crash would (SIGKILL of its
//     process or container); the loss is detected as any host's is,
//     through the membership.
//   - degrade, restore: every node and cluster-manager host of either
//     cluster changes its kernel shaping towards the other (GridSetLink):
//     the link is dilated and shaped by the model of the initial shaping,
//     and the HTB class's rate and the delay line's delay change in place.
//   - partition, heal: every node and cluster-manager host of the cluster
//     drops its application traffic to and from the other clusters'
//     subnets (nftables table koala_cut in its namespace, GridCut), or
//     stops dropping. The control plane keeps crossing: protoactor
//     remoting and memberlist ports are let through, so the cluster's
//     hosts are not reported dead and its cluster manager still talks to
//     the information service and the runners (which live in the control
//     subnet anyway). Streams across the cut stall and TCP retransmits;
//     after the heal a stream resumes at its next retransmission.
//   - load, unload: every target node's host is told its node's new total
//     of loading programs (GridLoad) and hands it to its node actor as the
//     inproc backend does (wiring.LoadNode): the node's ranks compute
//     slower from their next Compute on; nothing spins.
var FaultKinds = scenarios.AllFaultKinds()

// faultTimeout bounds one host's answer to a fault request.
const faultTimeout = 30 * time.Second

// gridFaults is the grid backends' wiring.FaultApplier.
type gridFaults struct {
	ctx   context.Context
	plat  Platform
	l     *launcher
	links netem.Matrix

	mu     sync.Mutex
	killed map[string]bool // hosts the timeline killed (the membership may not know yet)
}

func newGridFaults(ctx context.Context, plat Platform, l *launcher, links netem.Matrix) *gridFaults {
	return &gridFaults{ctx: ctx, plat: plat, l: l, links: links, killed: map[string]bool{}}
}

// Kill kills the node's host.
func (g *gridFaults) Kill(node, _ string) error {
	g.mu.Lock()
	g.killed[node] = true
	g.mu.Unlock()
	switch k := g.plat.(type) {
	case interface {
		Kill(context.Context, string) error
	}:
		return k.Kill(g.ctx, node)
	case interface{ Kill(string) error }:
		return k.Kill(node)
	case interface{ kill(string) error }:
		return k.kill(node)
	}
	return fmt.Errorf("the %s platform cannot kill a host", backendOf(g.plat))
}

// Cut cuts (or heals) every application link between cluster and the
// other clusters: each live shaping host of cluster drops its traffic to
// and from the clusters it has an available link with.
func (g *gridFaults) Cut(cluster string, cut bool) error {
	req := &msg.GridCut{Clusters: cutPeers(g.links, cluster), Cut: cut}
	hosts := shapingHosts(g.live(), cluster)
	if len(hosts) == 0 {
		return fmt.Errorf("no live host of cluster %s", cluster)
	}
	replies, err := g.l.askAll(g.ctx, hosts, func(membership.Member) interface{} { return req }, faultTimeout, 32)
	return firstErrors(errors.Join(err, ackError(replies)))
}

// SetLink gives every live shaping host of a its link to b and every one
// of b its link to a (l undilated; each host dilates and shapes it).
func (g *gridFaults) SetLink(a, b string, l netem.Link) error {
	targets := linkTargets(g.live(), a, b)
	if len(targets) == 0 {
		return fmt.Errorf("no live host of cluster %s or %s", a, b)
	}
	hosts := make([]membership.Member, len(targets))
	towards := make(map[string]string, len(targets)) // host -> cluster
	for i, t := range targets {
		hosts[i], towards[t.host.Name] = t.host, t.towards
	}
	replies, err := g.l.askAll(g.ctx, hosts, func(m membership.Member) interface{} {
		return &msg.GridSetLink{Link: toGridLink(towards[m.Name], l)}
	}, faultTimeout, 32)
	return firstErrors(errors.Join(err, ackError(replies)))
}

// Load tells each target node's host its node's loading programs, all
// hosts at once; a node the timeline killed is left alone (as on inproc),
// one missing from the membership otherwise is an error.
func (g *gridFaults) Load(loads []wiring.NodePrograms) error {
	g.mu.Lock()
	killed := maps.Clone(g.killed)
	g.mu.Unlock()
	hosts, programs, err := loadTargets(g.l.hostsByRole(membership.RoleNode), killed, loads)
	replies, aerr := g.l.askAll(g.ctx, hosts, func(m membership.Member) interface{} {
		return &msg.GridLoad{Programs: int32(programs[m.Name])}
	}, faultTimeout, 32)
	return firstErrors(errors.Join(err, aerr, ackError(replies)))
}

// loadTargets are the node hosts told of loads and each one's programs;
// killed nodes are skipped, a node without a host is an error.
func loadTargets(nodes []membership.Member, killed map[string]bool, loads []wiring.NodePrograms) ([]membership.Member, map[string]int, error) {
	byName := make(map[string]membership.Member, len(nodes))
	for _, m := range nodes {
		byName[m.Name] = m
	}
	var hosts []membership.Member
	programs := map[string]int{}
	var errs []error
	for _, l := range loads {
		m, ok := byName[l.Node]
		switch {
		case killed[l.Node]:
		case !ok:
			errs = append(errs, fmt.Errorf("node %s: no host in the membership", l.Node))
		default:
			if _, seen := programs[m.Name]; !seen {
				hosts = append(hosts, m)
			}
			programs[m.Name] = l.Programs
		}
	}
	return hosts, programs, errors.Join(errs...)
}

// live are the shaping hosts in the membership, less those the timeline
// killed (a kill is detected seconds later).
func (g *gridFaults) live() []membership.Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []membership.Member
	for _, m := range g.l.hostsByRole(membership.RoleNode, membership.RoleCluster) {
		if !g.killed[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// linkTarget is a host told its link towards a cluster.
type linkTarget struct {
	host    membership.Member
	towards string
}

// linkTargets are the hosts a SetLink(a, b) changes: every host of a
// towards b and every host of b towards a (a == b: every host of a
// towards a, once).
func linkTargets(hosts []membership.Member, a, b string) []linkTarget {
	var out []linkTarget
	for _, h := range hosts {
		switch h.Cluster {
		case a:
			out = append(out, linkTarget{h, b})
		case b:
			out = append(out, linkTarget{h, a})
		}
	}
	return out
}

// shapingHosts are the hosts of one cluster.
func shapingHosts(hosts []membership.Member, cluster string) []membership.Member {
	var out []membership.Member
	for _, h := range hosts {
		if h.Cluster == cluster {
			out = append(out, h)
		}
	}
	return out
}

// cutPeers are the clusters a partition of cluster cuts it from: every
// other cluster it has an available link with (an unavailable pair
// carries nothing and is left alone, as on inproc).
func cutPeers(m netem.Matrix, cluster string) []string {
	var out []string
	for _, c := range m.Clusters {
		if c == cluster {
			continue
		}
		if l, err := m.Link(cluster, c); err != nil || l.Unavailable {
			continue
		}
		out = append(out, c)
	}
	return out
}

// firstErrors keeps an error's first five lines (a fault on a big cluster
// fails on many hosts alike).
func firstErrors(err error) error {
	var u interface{ Unwrap() []error }
	if !errors.As(err, &u) {
		return err
	}
	errs := u.Unwrap()
	if len(errs) > 5 {
		errs = append(errs[:5:5], fmt.Errorf("and %d more errors", len(errs)-5))
	}
	return errors.Join(errs...)
}

var _ wiring.FaultApplier = (*gridFaults)(nil)
