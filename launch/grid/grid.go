package grid

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Fixed ports of an actor host inside its container (each container has
// its own IP, so every container uses the same ports).
const (
	// RemotePort is where an actor host's protoactor remote (gRPC) listens.
	RemotePort = 8090
	// GossipPort is where an actor host's memberlist listens.
	GossipPort = membership.DefaultGossipPort
)

// EnvGrid is the environment variable that carries the Grid (JSON) into
// every container.
const EnvGrid = "KOALA_EMU_GRID"

// EnvDebug, when set (to anything) in the launcher's environment, is passed
// on to every container and turns on memberlist's own log lines in the
// containers' output and the launcher's standard error.
const EnvDebug = "KOALA_EMU_DEBUG"

// RoleLauncher is the membership role of the launcher: the koala-emu process
// on the Docker host that started the run.
const RoleLauncher = "launcher"

// Actor names of the grid's own actors; the role actors keep the names
// they have on every backend (launch/wiring).
const (
	actorCtl      = "ctl"
	actorLauncher = "launcher"
)

// Host names (container names within the run, and membership names).
const (
	hostScheduler = "scheduler"
	hostKIS       = "kis"
)

func clusterHost(c string) string { return "cluster-" + c }
func siteHost(site string) string { return "runner-" + site }

// NodeName is the name of node i (0-based) of a cluster, as on the inproc
// backend: vrije-n001.
func NodeName(cluster string, i int) string { return wiring.NodeName(cluster, i) }

// Grid is what every actor host of a run knows about the run: the roles'
// Spec (clusters, links, policy, seed, time, malleable jobs' bounds) and
// where the run's parts are. The launcher writes it as JSON into EnvGrid of
// every container.
type Grid struct {
	wiring.Spec
	RunID string `json:"run_id"`
	// Launcher is the protoactor address of the launcher (host:port): the
	// recorder and the launcher actor live there.
	Launcher string `json:"launcher"`
	// Seeds are the gossip addresses a host joins the membership through.
	Seeds []string `json:"seeds"`
	// Sites are the runner sites.
	Sites []string `json:"sites,omitempty"`
	// Subnets maps each cluster to the prefixes of its hosts; node hosts
	// shape their egress per destination prefix.
	Subnets map[string][]netip.Prefix `json:"subnets"`
}

// Cluster is one cluster of a Grid.
type Cluster = wiring.Cluster

// maxGridBytes bounds the encoded Grid: it travels in one environment
// variable, and Linux takes at most 128 KiB per variable.
const maxGridBytes = 120 << 10

// Encode returns the Grid as JSON.
func (g *Grid) Encode() (string, error) {
	b, err := json.Marshal(g)
	if err != nil {
		return "", fmt.Errorf("grid: encode: %w", err)
	}
	if len(b) > maxGridBytes {
		return "", fmt.Errorf("grid: the run's description is %d bytes, more than the %d an environment variable carries "+
			"(%d malleable jobs' bounds travel in it because msg.SpawnRunner does not carry them)", len(b), maxGridBytes, len(g.Malleable))
	}
	return string(b), nil
}

// DecodeGrid parses what Encode wrote and checks it.
func DecodeGrid(s string) (*Grid, error) {
	var g Grid
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("grid: decode %s: %w", EnvGrid, err)
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	return &g, nil
}

func (g *Grid) check() error {
	if g.Launcher == "" {
		return fmt.Errorf("grid: no launcher address")
	}
	if err := g.Spec.Check(); err != nil {
		return fmt.Errorf("grid: %w", err)
	}
	return nil
}

// GridFromPlan builds the Grid of a scenario plan; the launcher fills in
// RunID, Launcher, Seeds and Subnets.
func GridFromPlan(plan *scenarios.Plan, probeBytes int) *Grid {
	g := &Grid{Spec: wiring.SpecFromPlan(plan, probeBytes)}
	for _, c := range plan.Clusters {
		g.Sites = append(g.Sites, c.Name)
	}
	return g
}

// SiteOf is the runner site of a job: the cluster of its first component
// when the request names one (fixed requests), otherwise the sites in
// turn by submission order (index).
func SiteOf(j scenarios.Job, index int, sites []string) string {
	if len(sites) == 0 {
		return ""
	}
	for _, c := range j.Components {
		for _, s := range sites {
			if c.Cluster == s {
				return s
			}
		}
	}
	return sites[index%len(sites)]
}

// pidOf is the PID of actor id in the actor system of member m: how the
// grid backends find a role's PID.
func pidOf(m membership.Member, id string) *actor.PID { return actor.NewPID(m.Addr, id) }

// peers is a view of the membership by role.
type peers struct {
	scheduler, kis *membership.Member
	clusters       map[string]membership.Member
	nodes          map[string][]membership.Member // by cluster, sorted by name
	sites          []membership.Member
	launcher       *membership.Member
}

func viewOf(ms []membership.Member) peers {
	p := peers{clusters: map[string]membership.Member{}, nodes: map[string][]membership.Member{}}
	for i := range ms {
		m := ms[i]
		switch m.Role {
		case membership.RoleScheduler:
			p.scheduler = &m
		case membership.RoleKIS:
			p.kis = &m
		case membership.RoleCluster:
			p.clusters[m.Cluster] = m
		case membership.RoleNode:
			p.nodes[m.Cluster] = append(p.nodes[m.Cluster], m)
		case membership.RoleRunner:
			p.sites = append(p.sites, m)
		case RoleLauncher:
			p.launcher = &m
		}
	}
	for _, ns := range p.nodes {
		sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	}
	return p
}

// clusterPIDs returns the cluster managers' PIDs of every cluster in order,
// or an error naming the missing ones.
func (p peers) clusterPIDs(order []string) (map[string]*actor.PID, error) {
	out := map[string]*actor.PID{}
	var missing []string
	for _, c := range order {
		m, ok := p.clusters[c]
		if !ok {
			missing = append(missing, c)
			continue
		}
		out[c] = pidOf(m, wiring.ClusterActor(c))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cluster managers not in the membership: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// roles returns the role PIDs the membership shows: the scheduler and the
// information service when present, and every cluster manager (the error
// names those missing).
func (p peers) roles(order []string) (wiring.Peers, error) {
	clusters, err := p.clusterPIDs(order)
	w := wiring.Peers{Clusters: clusters}
	if p.scheduler != nil {
		w.Scheduler = pidOf(*p.scheduler, wiring.ActorScheduler)
	}
	if p.kis != nil {
		w.KIS = pidOf(*p.kis, wiring.ActorKIS)
	}
	return w, err
}
