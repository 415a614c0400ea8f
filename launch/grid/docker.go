package grid

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// Label carrying a runner site's name (runner sites live in the control
// subnet, so they have no cluster label).
const labelSite = "koala-emu.site"

// Go runtime settings of every container. A node host idles with a few MiB
// of live heap, and the garbage collector was the largest share of an idle
// container's CPU at GOGC 50 (perf over 214 containers, 0.57 % of a core
// each before shaping). Measured with das3-smoke (204 node containers, as
// docker stats reports them): GOGC 50 gave 11.9 MiB per node on average,
// GOGC 200 19.6 MiB; GOGC 100 halves the collections of GOGC 50, and the
// memory limit bounds the heap when the ranks of a job allocate.
const (
	defaultGOGC       = "100"
	defaultGOMEMLIMIT = "32MiB"
)

// EnvGOMAXPROCS, when set in the launcher's environment, is the GOMAXPROCS
// of every container (DockerOptions.GOMAXPROCS).
const EnvGOMAXPROCS = "KOALA_EMU_GOMAXPROCS"

// DockerOptions configure a DockerPlatform.
type DockerOptions struct {
	// Image is a prebuilt koala-emu image (docker.BuildImage). Empty:
	// build (or reuse) one from Binary.
	Image string
	// Binary is the statically linked koala-emu binary the image is built
	// from. Empty: this executable when it is a static koala-emu binary,
	// otherwise ./cmd/koala-emu built from the module in Dir.
	Binary string
	// Dir is a directory inside the koala-emu module, for building the
	// binary; empty: the working directory.
	Dir string
	// Parallelism bounds concurrent container creations; default 16.
	Parallelism int
	// GOGC and GOMEMLIMIT are the Go runtime settings of the containers;
	// defaults 100 and 32MiB ("off" leaves one unset).
	GOGC, GOMEMLIMIT string
	// GOMAXPROCS of the containers; empty: the value of EnvGOMAXPROCS in
	// this process's environment, else unset (the runtime's default, the
	// host's cores).
	GOMAXPROCS string
	// ID names the run (label koala-emu.run); empty picks one.
	ID string
	// Logger receives the docker package's diagnostics; BuildLog the image
	// build's output; Log the platform's own notices (host tuning). Nil
	// discards.
	Logger   docker.Logger
	BuildLog io.Writer
	Log      io.Writer
	// Realtime, when positive, is the real-time budget (per second) of each
	// shaping container (nodes, cluster managers), so that its delay line
	// runs with SCHED_FIFO as it does on the host (docker.ContainerSpec):
	// Calibrate sets it; runs leave it off (hundreds of containers share
	// the host's budget, and a throttled line would stall for the rest of
	// the period). When the host cannot give it, a line says so and the
	// containers run without.
	Realtime time.Duration
	// NoHostTuning leaves the kernel's ARP table limits alone (see
	// EnsureNeighbourRoom): Start then fails when they are too small.
	NoHostTuning bool
}

// DockerPlatform runs every actor host in its own container on one Docker
// network (launch/docker): a /24 per cluster, fixed addresses, the label
// koala-emu.run on everything.
type DockerPlatform struct {
	opts    DockerOptions
	image   string
	run     *docker.Run
	started atomic.Int64
	mu      sync.Mutex
}

var _ Platform = (*DockerPlatform)(nil)

// NewDockerPlatform returns a platform that creates its run on Setup.
func NewDockerPlatform(opts DockerOptions) *DockerPlatform {
	if opts.Parallelism <= 0 {
		opts.Parallelism = 16
	}
	return &DockerPlatform{opts: opts}
}

// Run returns the Docker run once Setup has created it (nil before).
func (p *DockerPlatform) Run() *docker.Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// Image returns the image the platform uses (after Setup).
func (p *DockerPlatform) Image() string { return p.image }

// Setup builds or finds the image and creates the run's network.
func (p *DockerPlatform) Setup(ctx context.Context, clusters []string) (Network, error) {
	img, err := p.ensureImage(ctx)
	if err != nil {
		return Network{}, err
	}
	p.image = img
	if p.opts.ID == "" {
		p.opts.ID = docker.NewRunID()
	}
	// The owner's labels let `koala-emu clean` tell a live run from one
	// whose launcher is gone.
	own, err := owner.Self(p.opts.ID, "docker")
	if err != nil {
		return Network{}, fmt.Errorf("docker backend: %w", err)
	}
	run, err := docker.NewRun(ctx, docker.Options{ID: p.opts.ID, Image: img, Clusters: clusters, Parallelism: p.opts.Parallelism,
		Logger: p.opts.Logger, Progress: func(up, total int) { p.started.Store(int64(up)) }, Labels: own.Labels()})
	if err != nil {
		return Network{}, err
	}
	p.mu.Lock()
	p.run = run
	p.mu.Unlock()
	nw := Network{LauncherIP: gateway(run.ControlSubnet()).String(), Subnets: map[string][]netip.Prefix{}}
	for c, pr := range run.ClusterSubnets() {
		nw.Subnets[c] = []netip.Prefix{pr}
	}
	return nw, nil
}

// gateway is the bridge's address in the control subnet (10.X.0.1).
func gateway(control netip.Prefix) netip.Addr { return control.Addr().Next() }

// ensureImage returns the image reference to run, building it if needed.
func (p *DockerPlatform) ensureImage(ctx context.Context) (string, error) {
	if p.opts.Image != "" {
		return p.opts.Image, nil
	}
	iopts := docker.ImageOptions{Binary: p.opts.Binary, Dir: p.opts.Dir, BuildLog: p.opts.BuildLog, Logger: p.opts.Logger}
	if iopts.Binary == "" {
		if exe, err := os.Executable(); err == nil && strings.HasPrefix(filepath.Base(exe), "koala-emu") && docker.CheckStatic(exe) == nil {
			iopts.Binary = exe
		}
	}
	if iopts.Binary == "" {
		dir, err := moduleDir(p.opts.Dir)
		if err != nil {
			return "", fmt.Errorf("docker backend: no static koala-emu binary to put into the image (this executable is dynamically linked or not koala-emu; build it with CGO_ENABLED=0, e.g. make build) and %w", err)
		}
		iopts.Dir, iopts.Package = dir, "./cmd/koala-emu"
	}
	img, err := docker.BuildImage(ctx, iopts)
	if err != nil {
		return "", fmt.Errorf("docker backend: the koala-emu image cannot be built: %w", err)
	}
	return img, nil
}

// moduleDir finds the koala-emu module's root from dir (or the working
// directory) upwards.
func moduleDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" && f[1] == "github.com/koala-emu/koala-emu" {
					return d, nil
				}
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside the koala-emu module to build one from", dir)
		}
	}
}

// Membership is memberlist on the run network's gateway, on a free port.
func (p *DockerPlatform) Membership(self membership.Member) (membership.Provider, error) {
	run := p.Run()
	if run == nil {
		return nil, errors.New("docker backend: membership before Setup")
	}
	gw := gateway(run.ControlSubnet()).String()
	c := MembershipConfig(self)
	c.BindAddr, c.AdvertiseAddr, c.BindPort = gw, gw, 0
	if os.Getenv(EnvDebug) != "" {
		c.LogOutput = os.Stderr
	}
	return membership.NewMemberlist(c)
}

// addresses assigns fixed addresses: in each cluster's /24 the manager is
// .1 and the nodes .2 on; in the control /24 (whose .1 is the gateway) the
// scheduler is .2, the information service .3, the runner sites .10 on.
func addresses(control netip.Prefix, subs map[string]netip.Prefix, hosts []HostSpec) (map[string]netip.Addr, error) {
	out := map[string]netip.Addr{}
	nextNode := map[string]int{}
	site := 10
	at := func(p netip.Prefix, host int) (netip.Addr, error) {
		if host < 1 || host > 254 {
			return netip.Addr{}, fmt.Errorf("docker backend: subnet %v holds at most 254 hosts", p)
		}
		b := p.Addr().As4()
		b[3] = byte(host)
		return netip.AddrFrom4(b), nil
	}
	for _, h := range hosts {
		var a netip.Addr
		var err error
		switch h.Role {
		case membership.RoleScheduler:
			a, err = at(control, 2)
		case membership.RoleKIS:
			a, err = at(control, 3)
		case membership.RoleRunner:
			a, err = at(control, site)
			site++
		case membership.RoleCluster, membership.RoleNode:
			p, ok := subs[h.Cluster]
			if !ok {
				err = fmt.Errorf("docker backend: host %s: unknown cluster %q", h.Name, h.Cluster)
				break
			}
			host := 1
			if h.Role == membership.RoleNode {
				nextNode[h.Cluster]++
				host += nextNode[h.Cluster]
			}
			a, err = at(p, host)
		default:
			err = fmt.Errorf("docker backend: host %s has unknown role %q", h.Name, h.Role)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (host %s)", err, h.Name)
		}
		out[h.Name] = a
	}
	return out, nil
}

// Start creates and starts one container per host, without waiting for
// readiness (the launcher watches the membership).
func (p *DockerPlatform) Start(ctx context.Context, hosts []HostSpec, g *Grid) error {
	run := p.Run()
	if run == nil {
		return errors.New("docker backend: Start before Setup")
	}
	p.started.Store(0)
	logw := p.opts.Log
	if logw == nil {
		logw = io.Discard
	}
	enc, err := prepareStart("docker", len(hosts), !p.opts.NoHostTuning, logw, g)
	if err != nil {
		return err
	}
	ips, err := addresses(run.ControlSubnet(), run.ClusterSubnets(), hosts)
	if err != nil {
		return err
	}
	env := map[string]string{EnvGrid: enc}
	if v := os.Getenv(EnvDebug); v != "" {
		env[EnvDebug] = v
	}
	gomaxprocs := p.opts.GOMAXPROCS
	if v := os.Getenv(EnvGOMAXPROCS); gomaxprocs == "" && v != "" {
		gomaxprocs = v
	}
	for k, v := range map[string]string{"GOGC": or(p.opts.GOGC, defaultGOGC), "GOMEMLIMIT": or(p.opts.GOMEMLIMIT, defaultGOMEMLIMIT),
		"GOMAXPROCS": or(gomaxprocs, "off")} {
		if v != "off" {
			env[k] = v
		}
	}
	var rt time.Duration
	rtBudget := false
	if p.opts.Realtime > 0 {
		n := 0
		for _, h := range hosts {
			if h.Role == membership.RoleNode || h.Role == membership.RoleCluster {
				n++
			}
		}
		b, err := docker.EnsureRealtimeBudget(n, p.opts.Realtime)
		if err != nil {
			fmt.Fprintf(logw, "docker: delay lines without real-time priority: %v\n", err)
		} else {
			rt, rtBudget = p.opts.Realtime, b
		}
	}
	specs := make([]docker.ContainerSpec, 0, len(hosts))
	for _, h := range hosts {
		ip := ips[h.Name]
		spec := docker.ContainerSpec{
			Name: h.Name, Role: h.Role, Cluster: h.Cluster, IP: ip, Env: env,
			Args:  []string{"node", "--role", h.Role, "--name", h.Name, "--cluster", h.Cluster, "--ip", ip.String()},
			Ready: docker.Readiness{None: true},
			// The same TCP on every emulated host as on the netns backend.
			Sysctls: maps.Clone(netns.HostSysctls),
		}
		switch h.Role {
		case membership.RoleNode, membership.RoleCluster:
			spec.NetAdmin = true // each shapes its own egress
			spec.WakeLatency = true
			spec.Realtime, spec.RealtimeBudget = rt, rtBudget
		case membership.RoleRunner:
			spec.Cluster = "" // control subnet
			spec.Labels = map[string]string{labelSite: h.Cluster}
		}
		specs = append(specs, spec)
	}
	_, err = run.Start(ctx, specs)
	return err
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Started implements Platform.
func (p *DockerPlatform) Started() int { return int(p.started.Load()) }

// Exited implements Platform: containers that are no longer running, with
// the tail of their output.
func (p *DockerPlatform) Exited(ctx context.Context) (map[string]string, error) {
	run := p.Run()
	if run == nil {
		return nil, nil
	}
	out := map[string]string{}
	for _, c := range run.Containers() {
		ok, err := c.Running(ctx)
		if err != nil {
			return out, err
		}
		if !ok {
			logs, _ := c.Logs(ctx)
			lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			out[c.Name] = strings.Join(lines, "\n")
		}
	}
	return out, nil
}

// Kill kills a host's container with SIGKILL, as a crash would.
func (p *DockerPlatform) Kill(ctx context.Context, name string) error {
	run := p.Run()
	if run == nil {
		return errors.New("docker backend: no run")
	}
	c := run.Container(name)
	if c == nil {
		return fmt.Errorf("docker backend: no container %q in run %s", name, run.ID)
	}
	return c.Kill(ctx)
}

// NodeMemory samples the memory in use (as docker stats shows it) of every
// running container and summarises it per role in MiB: node_mean,
// node_p50, node_max, node_n, and max_<role> for the other roles.
func (p *DockerPlatform) NodeMemory(ctx context.Context) (map[string]float64, error) {
	run := p.Run()
	if run == nil {
		return nil, errors.New("docker backend: no run")
	}
	stats, err := run.Stats(ctx)
	if err != nil && len(stats) == 0 {
		return nil, err
	}
	role := map[string]string{}
	for _, c := range run.Containers() {
		role[c.Name] = c.Role
	}
	var nodes []float64
	out := map[string]float64{}
	for name, s := range stats {
		mib := float64(s.Memory) / (1 << 20)
		if role[name] == membership.RoleNode {
			nodes = append(nodes, mib)
			continue
		}
		k := "max_" + role[name]
		out[k] = max(out[k], round2(mib))
	}
	if len(nodes) > 0 {
		sort.Float64s(nodes)
		sum := 0.0
		for _, v := range nodes {
			sum += v
		}
		out["node_n"] = float64(len(nodes))
		out["node_mean"] = round2(sum / float64(len(nodes)))
		out["node_p50"] = round2(nodes[len(nodes)/2])
		out["node_max"] = round2(nodes[len(nodes)-1])
	}
	return out, nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// Close removes the run's containers and network.
func (p *DockerPlatform) Close(ctx context.Context) error {
	run := p.Run()
	if run == nil {
		return nil
	}
	return run.Close(ctx)
}
