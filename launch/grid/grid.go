package grid

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/netem"
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

// Actor names. The role actors keep the names they have on the inproc
// backend.
const (
	actorCtl       = "ctl"
	actorRecorder  = "recorder"
	actorLauncher  = "launcher"
	actorScheduler = "scheduler"
	actorKIS       = "kis"
)

func clusterActor(c string) string { return "cluster-" + c }
func nodeActor(n string) string    { return "node-" + n }
func runnerActor(job string) string {
	return "runner-" + job
}

// Host names (container names within the run, and membership names).
const (
	hostScheduler = "scheduler"
	hostKIS       = "kis"
)

func clusterHost(c string) string { return "cluster-" + c }
func siteHost(site string) string { return "runner-" + site }

// NodeName is the name of node i (0-based) of a cluster, as on the inproc
// backend: vrije-n001.
func NodeName(cluster string, i int) string { return fmt.Sprintf("%s-n%03d", cluster, i+1) }

// Grid is what every actor host of a run knows about the run. The launcher
// writes it as JSON into EnvGrid of every container.
type Grid struct {
	RunID string `json:"run_id"`
	// Launcher is the protoactor address of the launcher (host:port): the
	// recorder and the launcher actor live there.
	Launcher string `json:"launcher"`
	// Seeds are the gossip addresses a host joins the membership through.
	Seeds []string `json:"seeds"`
	// Clusters in scenario order.
	Clusters []Cluster `json:"clusters"`
	// Sites are the runner sites.
	Sites []string `json:"sites,omitempty"`
	// Links is the undilated link matrix over Clusters.
	Links netem.Matrix `json:"links"`
	// Subnets maps each cluster to the prefixes of its hosts; node hosts
	// shape their egress per destination prefix.
	Subnets map[string][]netip.Prefix `json:"subnets"`
	// Seed, TimeScale, Dilation and Policy are the scenario's.
	Seed      int64            `json:"seed"`
	TimeScale float64          `json:"time_scale"`
	Dilation  float64          `json:"dilation"`
	Policy    scenarios.Policy `json:"policy"`
	// ProbeBytes is the message size of the information service's
	// bandwidth probes.
	ProbeBytes int `json:"probe_bytes"`
	// RankTimeout bounds how long a runner waits for its ranks (wall).
	RankTimeout time.Duration `json:"rank_timeout,omitempty"`
}

// Cluster is one cluster of a Grid.
type Cluster struct {
	Name       string               `json:"name"`
	Nodes      int                  `json:"nodes"`
	Processors int                  `json:"processors"`
	Speed      float64              `json:"speed"`
	Background scenarios.Background `json:"background"`
}

// Factor is scenario seconds per wall second.
func (g *Grid) Factor() float64 {
	d := g.Dilation
	if d <= 0 {
		d = 1
	}
	ts := g.TimeScale
	if ts <= 0 {
		ts = 1
	}
	return ts / d
}

// Cluster returns the cluster of that name and its index.
func (g *Grid) Cluster(name string) (Cluster, int, bool) {
	for i, c := range g.Clusters {
		if c.Name == name {
			return c, i, true
		}
	}
	return Cluster{}, -1, false
}

// Order returns the cluster names in scenario order.
func (g *Grid) Order() []string {
	out := make([]string, len(g.Clusters))
	for i, c := range g.Clusters {
		out[i] = c.Name
	}
	return out
}

// Unavailable returns the pairs no job may span (both orders).
func (g *Grid) Unavailable() map[[2]string]bool {
	u := map[[2]string]bool{}
	for i, a := range g.Links.Clusters {
		for j, b := range g.Links.Clusters {
			if g.Links.Links[i][j].Unavailable {
				u[[2]string{a, b}] = true
			}
		}
	}
	return u
}

// Encode returns the Grid as JSON.
func (g *Grid) Encode() (string, error) {
	b, err := json.Marshal(g)
	if err != nil {
		return "", fmt.Errorf("grid: encode: %w", err)
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
	if len(g.Clusters) == 0 {
		return fmt.Errorf("grid: no clusters")
	}
	if len(g.Links.Clusters) != len(g.Clusters) || len(g.Links.Links) != len(g.Clusters) {
		return fmt.Errorf("grid: link matrix covers %d clusters, the grid has %d", len(g.Links.Clusters), len(g.Clusters))
	}
	for i, c := range g.Clusters {
		if g.Links.Clusters[i] != c.Name {
			return fmt.Errorf("grid: link matrix cluster %d is %q, want %q", i, g.Links.Clusters[i], c.Name)
		}
		if len(g.Links.Links[i]) != len(g.Clusters) {
			return fmt.Errorf("grid: link matrix row %d has %d entries, want %d", i, len(g.Links.Links[i]), len(g.Clusters))
		}
	}
	return nil
}

// GridFromPlan builds the Grid of a scenario plan; the launcher fills in
// RunID, Launcher, Seeds and Subnets.
func GridFromPlan(plan *scenarios.Plan, probeBytes int) *Grid {
	g := &Grid{Links: plan.Links, Seed: plan.Seed, TimeScale: plan.TimeScale, Dilation: plan.Dilation,
		Policy: plan.Policy, ProbeBytes: probeBytes}
	for i, c := range plan.Clusters {
		gc := Cluster{Name: c.Name, Nodes: c.Nodes, Processors: c.Processors, Speed: c.Speed}
		if i < len(plan.Background) {
			gc.Background = plan.Background[i]
		}
		g.Clusters = append(g.Clusters, gc)
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

// pidOf is the PID of actor id in the actor system of member m.
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
		out[c] = pidOf(m, clusterActor(c))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cluster managers not in the membership: %s", strings.Join(missing, ", "))
	}
	return out, nil
}
