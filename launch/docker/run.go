package docker

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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	tc "github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Options configure a run.
type Options struct {
	// ID names the run; it goes into the label koala-emu.run, the network
	// name and the container names. Default: "r" and 8 random hex digits.
	ID string
	// Image is the image every container runs (see BuildImage). Required.
	Image string
	// Clusters lists the clusters in order; cluster i gets the subnet
	// 10.X.(i+1).0/24 of the run.
	Clusters []string
	// Parallelism bounds how many containers Start creates and waits for at
	// once; default 8.
	Parallelism int
	// ReadyTimeout bounds the wait for each container's readiness; default
	// 60 s.
	ReadyTimeout time.Duration
	// Progress, if set, is called after each container is ready with the
	// number ready so far in this Start call and the call's total. Calls
	// are serialised.
	Progress func(up, total int)
	// FirstOctet and LastOctet bound X of the run's 10.X.0.0/16; default
	// DefaultFirstOctet and DefaultLastOctet.
	FirstOctet, LastOctet int
	// Logger receives diagnostics, including testcontainers'; nil discards.
	Logger Logger
	// Labels are extra labels on the run's network and every container
	// (the owner of the run: launch/owner).
	Labels map[string]string
}

// Readiness says when a started container counts as up.
type Readiness struct {
	// Log is a line (substring) to wait for in the container's output.
	// Default ReadyLine, unless TCPPort is set.
	Log string
	// TCPPort, if set, waits until the container's fixed IP accepts TCP
	// connections on this port (dialled from this host).
	TCPPort int
	// None starts the container without waiting.
	None bool
	// Timeout overrides Options.ReadyTimeout.
	Timeout time.Duration
}

// ContainerSpec describes one container of a run.
type ContainerSpec struct {
	// Name is unique within the run ([a-zA-Z0-9_.-]); the Docker name is
	// ContainerName(runID, Name), and Name is also the container's host
	// name and its DNS alias on the run network.
	Name string
	// Role and Cluster go into labels; Cluster also chooses the subnet
	// ("" = the control subnet).
	Role    string
	Cluster string
	// Args are the command-line arguments given to the image's entrypoint,
	// for example {"node", "--role", "node", "--cluster", "vrije", ...}.
	Args []string
	// Env are extra environment variables.
	Env map[string]string
	// IP is a fixed address inside the cluster's subnet; zero assigns the
	// next free one.
	IP netip.Addr
	// NetAdmin adds CAP_NET_ADMIN (needed to shape the container's own
	// egress); TUN also passes /dev/net/tun (needed by the TUN delay line).
	// Containers are never privileged.
	NetAdmin bool
	TUN      bool
	// WakeLatency passes /dev/cpu_dma_latency (where the host has it), so
	// that the container's delay lines can ask the kernel for zero CPU
	// wake-up latency while they run (ptimer.HoldWakeLatency; the request
	// acts on the whole machine, as it does on the netns backend).
	WakeLatency bool
	// Sysctls are namespaced kernel settings of the container (its network
	// namespace's, such as net.ipv4.tcp_congestion_control).
	Sysctls map[string]string
	// Realtime, when positive, lets the container's threads use SCHED_FIFO:
	// CAP_SYS_NICE, plus this budget per RealtimePeriod for its cgroup
	// where real-time budgets are per cgroup (call EnsureRealtimeBudget
	// for all such containers first). A real-time thread that uses up the
	// budget is throttled until the period ends.
	Realtime time.Duration
	// RealtimeBudget says whether Realtime is set as a cgroup budget (the
	// result of EnsureRealtimeBudget).
	RealtimeBudget bool
	// Ready says when the container counts as started.
	Ready Readiness
	// Labels are extra labels; the koala-emu.* labels are set by the run.
	Labels map[string]string
}

// Run is one run's network and containers. Its methods are safe for
// concurrent use.
type Run struct {
	// ID is the run ID (label koala-emu.run).
	ID string
	// Network is the Docker network's name.
	Network string

	opts      Options
	provider  *tc.DockerProvider
	cli       client.APIClient
	networkID string

	mu         sync.Mutex
	plan       *AddressPlan
	containers map[string]*Container
	batch      int
	closed     bool
	starting   map[int]context.CancelFunc // Start calls in flight, by batch
	inflight   sync.WaitGroup
}

// NewRun creates the run's Docker network: a bridge 10.X.0.0/16 with X
// free among existing networks and host addresses, labelled
// koala-emu.run=<ID>. Errors wrap ErrDaemon when Docker is not reachable.
func NewRun(ctx context.Context, opts Options) (*Run, error) {
	if opts.Image == "" {
		return nil, errors.New("docker backend: Options.Image is empty (see BuildImage)")
	}
	if opts.ID == "" {
		opts.ID = NewRunID()
	}
	if err := checkRunID(opts.ID); err != nil {
		return nil, err
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 8
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.FirstOctet == 0 && opts.LastOctet == 0 {
		opts.FirstOctet, opts.LastOctet = DefaultFirstOctet, DefaultLastOctet
	}
	// Validate the cluster list before touching Docker.
	if _, err := NewAddressPlan(netip.MustParsePrefix("10.0.0.0/16"), opts.Clusters); err != nil {
		return nil, err
	}

	p, err := connect(ctx, opts.Logger)
	if err != nil {
		return nil, err
	}
	r := &Run{ID: opts.ID, Network: NetworkName(opts.ID), opts: opts, provider: p, cli: p.Client(),
		containers: map[string]*Container{}, starting: map[int]context.CancelFunc{}}
	if _, err := r.cli.ImageInspect(ctx, opts.Image); err != nil {
		_ = p.Close()
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker backend: image %s not found: build it first (BuildImage, make image)", opts.Image)
		}
		return nil, fmt.Errorf("docker backend: inspect image %s: %w", opts.Image, err)
	}
	if err := r.createNetwork(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return r, nil
}

// NewRunID returns a fresh run ID: "r" and 8 random hex digits.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "r" + hex.EncodeToString(b[:])
}

// createNetwork picks a free /16 and creates the run's network in it,
// moving on to the next candidate when Docker reports an overlap (another
// run may have taken it meanwhile).
func (r *Run) createNetwork(ctx context.Context) error {
	used, err := r.usedSubnets(ctx)
	if err != nil {
		return err
	}
	for {
		sub, err := PickRunSubnet(used, r.opts.FirstOctet, r.opts.LastOctet)
		if err != nil {
			return err
		}
		plan, err := NewAddressPlan(sub, r.opts.Clusters)
		if err != nil {
			return err
		}
		res, err := r.cli.NetworkCreate(ctx, r.Network, client.NetworkCreateOptions{
			Driver: "bridge",
			Labels: networkLabels(r.ID, r.opts.Labels),
			IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{
				Subnet:  sub,
				Gateway: plan.Gateway(),
			}}},
		})
		if err != nil {
			if strings.Contains(err.Error(), "overlap") {
				used = append(used, sub)
				continue
			}
			return fmt.Errorf("docker backend: create network %s (%v): %w", r.Network, sub, err)
		}
		r.networkID = res.ID
		r.plan = plan
		if r.opts.Logger != nil {
			r.opts.Logger.Printf("docker backend: run %s: network %s %v", r.ID, r.Network, sub)
		}
		return nil
	}
}

// usedSubnets lists the IPv4 subnets of Docker networks and of this host's
// interfaces.
func (r *Run) usedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	nets, err := r.cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker backend: list networks: %w", err)
	}
	var used []netip.Prefix
	for _, n := range nets.Items {
		for _, c := range n.IPAM.Config {
			if c.Subnet.IsValid() {
				used = append(used, c.Subnet)
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("docker backend: host addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if p, err := netip.ParsePrefix(ipn.String()); err == nil && p.Addr().Is4() {
				used = append(used, p.Masked())
			}
		}
	}
	return used, nil
}

// Subnet returns the run's /16.
func (r *Run) Subnet() netip.Prefix { return r.plan.Run() }

// ControlSubnet returns the control-plane /24 (scheduler, information
// service, runners without a cluster).
func (r *Run) ControlSubnet() netip.Prefix { return r.plan.Control() }

// ClusterSubnets returns every cluster's /24 by cluster name, for shaping
// a node's egress per destination cluster.
func (r *Run) ClusterSubnets() map[string]netip.Prefix {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan.Clusters()
}

// Containers returns the run's started containers sorted by name.
func (r *Run) Containers() []*Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := make([]*Container, 0, len(r.containers))
	for _, c := range r.containers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs
}

// Container returns the started container of that name, or nil.
func (r *Run) Container(name string) *Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.containers[name]
}

// Stats samples every running container of the run at once (each sample
// waits up to a second for the daemon's collection round, so they are
// requested concurrently) and returns them by container name. Stopped
// containers are left out.
func (r *Run) Stats(ctx context.Context) (map[string]Stats, error) {
	cs := r.Containers()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		out  = make(map[string]Stats, len(cs))
		errs []error
	)
	sem := make(chan struct{}, 64)
	for _, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func(c *Container) {
			defer wg.Done()
			defer func() { <-sem }()
			running, err := c.Running(ctx)
			if err == nil && !running {
				return
			}
			st, err := c.Stats(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[c.Name] = st
		}(c)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Start creates and starts the containers of specs, at most
// Options.Parallelism at a time, each with its fixed IP on the run network,
// and waits until each is ready (see Readiness), reporting progress. It
// returns the containers in the order of specs.
//
// If any container fails to start or become ready, or ctx ends, Start stops
// the others and removes every container this call created (found by its
// batch label, so even half-created ones go), then returns the error,
// which includes the tail of the failed container's output. Containers of
// earlier Start calls stay.
func (r *Run) Start(ctx context.Context, specs []ContainerSpec) ([]*Container, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("docker backend: run is closed")
	}
	r.batch++
	batch := r.batch
	ips, err := r.assignLocked(specs)
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	r.starting[batch] = cancel
	r.inflight.Add(1)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.starting, batch)
		r.mu.Unlock()
		cancel()
		r.inflight.Done()
	}()

	out, firstErr := r.startAll(sctx, cancel, batch, specs, ips)
	if firstErr == nil && sctx.Err() != nil { // cancelled by ctx or by Close
		firstErr = fmt.Errorf("docker backend: start: %w", context.Canceled)
		if ctx.Err() != nil {
			firstErr = fmt.Errorf("docker backend: start: %w", ctx.Err())
		}
	}
	if firstErr == nil {
		r.mu.Lock()
		for _, c := range out {
			r.containers[c.Name] = c
		}
		r.mu.Unlock()
		return out, nil
	}

	// Undo this batch with a context that survives the caller's cancellation.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer ccancel()
	_, cerr := removeContainers(cctx, r.cli, runFilter(r.ID, LabelBatch+"="+strconv.Itoa(batch)), r.opts.Parallelism)
	r.mu.Lock()
	for _, ip := range ips {
		r.plan.Release(ip)
	}
	r.mu.Unlock()
	if cerr != nil {
		return nil, errors.Join(firstErr, fmt.Errorf("docker backend: undo failed start: %w", cerr))
	}
	return nil, firstErr
}

// startAll starts every spec (at most Options.Parallelism at once) and
// returns the containers in the order of specs and the first error; a
// failure cancels the others (cancel ends ctx).
func (r *Run) startAll(ctx context.Context, cancel context.CancelFunc, batch int, specs []ContainerSpec, ips []netip.Addr) ([]*Container, error) {
	out := make([]*Container, len(specs))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		up       int
	)
	sem := make(chan struct{}, r.opts.Parallelism)
	for i := range specs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := r.startOne(ctx, batch, specs[i], ips[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				cancel()
				return
			}
			out[i] = c
			up++
			if r.opts.Progress != nil {
				r.opts.Progress(up, len(specs))
			}
		}(i)
	}
	wg.Wait()
	return out, firstErr
}

// assignLocked validates specs and reserves their addresses.
func (r *Run) assignLocked(specs []ContainerSpec) ([]netip.Addr, error) {
	seen := map[string]bool{}
	ips := make([]netip.Addr, 0, len(specs))
	fail := func(err error) ([]netip.Addr, error) {
		for _, ip := range ips {
			r.plan.Release(ip)
		}
		return nil, err
	}
	for _, s := range specs {
		if err := checkName(s.Name); err != nil {
			return fail(err)
		}
		if seen[s.Name] || r.containers[s.Name] != nil {
			return fail(fmt.Errorf("docker backend: container name %q used twice in run %s", s.Name, r.ID))
		}
		seen[s.Name] = true
		if s.IP.IsValid() {
			if err := r.plan.Reserve(s.Cluster, s.IP, s.Name); err != nil {
				return fail(err)
			}
			ips = append(ips, s.IP)
			continue
		}
		ip, err := r.plan.Assign(s.Cluster, s.Name)
		if err != nil {
			return fail(err)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// startOne creates, starts and waits for one container.
func (r *Run) startOne(ctx context.Context, batch int, spec ContainerSpec, ip netip.Addr) (*Container, error) {
	name := ContainerName(r.ID, spec.Name)
	req := tc.ContainerRequest{
		Image:      r.opts.Image,
		Name:       name,
		Cmd:        spec.Args,
		Env:        spec.Env,
		Labels:     containerLabels(r.ID, batch, spec, r.opts.Labels),
		Networks:   []string{r.Network},
		WaitingFor: r.readiness(spec.Ready, ip),
		ConfigModifier: func(c *container.Config) {
			c.Hostname = spec.Name
		},
		HostConfigModifier: func(h *container.HostConfig) {
			h.NetworkMode = container.NetworkMode(r.Network)
			h.Privileged = false
			if len(spec.Sysctls) > 0 {
				h.Sysctls = maps.Clone(spec.Sysctls)
			}
			if spec.NetAdmin {
				h.CapAdd = append(h.CapAdd, "NET_ADMIN")
			}
			if spec.Realtime > 0 {
				h.CapAdd = append(h.CapAdd, "SYS_NICE")
				if spec.RealtimeBudget {
					h.CPURealtimePeriod = RealtimePeriod.Microseconds()
					h.CPURealtimeRuntime = spec.Realtime.Microseconds()
				}
			}
			if spec.WakeLatency && hostHas(wakeLatencyDev) {
				h.Devices = append(h.Devices, container.DeviceMapping{
					PathOnHost: wakeLatencyDev, PathInContainer: wakeLatencyDev, CgroupPermissions: "rw"})
			}
			if spec.TUN {
				h.Devices = append(h.Devices, container.DeviceMapping{
					PathOnHost: "/dev/net/tun", PathInContainer: "/dev/net/tun", CgroupPermissions: "rwm"})
			}
		},
		EndpointSettingsModifier: func(eps map[string]*network.EndpointSettings) {
			ep := eps[r.Network]
			if ep == nil {
				ep = &network.EndpointSettings{}
				eps[r.Network] = ep
			}
			ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
			ep.Aliases = append(ep.Aliases, spec.Name)
		},
	}
	// The create is not cancelled with ctx: a create the client gives up on
	// may still be carried out by the daemon after the failed start's undo
	// has listed the batch, and the container would outlive the run. Once
	// it returns the container exists (or not) for sure, and the undo
	// finds it by its batch label.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	ctr, err := r.provider.CreateContainer(cctx, req)
	ccancel()
	if err != nil {
		return nil, fmt.Errorf("docker backend: create container %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docker backend: start container %s: %w", name, err)
	}
	dc, ok := ctr.(*tc.DockerContainer)
	if !ok {
		return nil, fmt.Errorf("docker backend: create container %s: unexpected type %T", name, ctr)
	}
	c := &Container{Name: spec.Name, DockerName: name, ID: dc.GetContainerID(), Role: spec.Role,
		Cluster: spec.Cluster, IP: ip, run: r}
	if err := dc.Start(ctx); err != nil {
		tail := c.logTail(context.WithoutCancel(ctx), 20)
		if tail != "" {
			return nil, fmt.Errorf("docker backend: start container %s: %w\n--- last output of %s ---\n%s", name, err, name, tail)
		}
		return nil, fmt.Errorf("docker backend: start container %s: %w", name, err)
	}
	return c, nil
}

// createTimeout bounds one container's create, which a cancelled start
// waits for (seconds under load on a slow storage driver).
const createTimeout = 2 * time.Minute

// readiness turns a Readiness into a testcontainers wait strategy.
func (r *Run) readiness(rd Readiness, ip netip.Addr) wait.Strategy {
	if rd.None {
		return nil
	}
	timeout := rd.Timeout
	if timeout <= 0 {
		timeout = r.opts.ReadyTimeout
	}
	if rd.TCPPort > 0 {
		return &tcpReady{addr: net.JoinHostPort(ip.String(), strconv.Itoa(rd.TCPPort)), timeout: timeout}
	}
	line := rd.Log
	if line == "" {
		line = ReadyLine
	}
	return wait.ForLog(line).WithStartupTimeout(timeout).WithPollInterval(100 * time.Millisecond)
}

// Close removes every container and the network of the run, found by the
// run label so nothing escapes, and returns the errors joined. Start calls
// still in flight are cancelled and waited for first. Pass a fresh context
// (the run's may be cancelled by Ctrl-C). Close is idempotent.
func (r *Run) Close(ctx context.Context) error {
	if !r.cancelStarts() {
		return nil
	}
	r.inflight.Wait()
	_, err1 := removeContainers(ctx, r.cli, runFilter(r.ID), min(r.opts.Parallelism, removeParallelism))
	_, err2 := removeNetworks(ctx, r.cli, runFilter(r.ID))
	err3 := r.provider.Close()
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("docker backend: close run %s: %w", r.ID, err)
	}
	return nil
}

// StaleNetworkError is a network that could not be removed because the
// Docker daemon still counts endpoints on it although no container is
// attached (a Docker Engine bug, moby/moby#42119). Nothing of the run is
// left running and the network holds no address in use; only a daemon
// restart clears the count, after which `koala-emu clean` removes it.
type StaleNetworkError struct {
	// Names are the networks left.
	Names []string
	// Err is the daemon's last answer.
	Err error
}

func (e *StaleNetworkError) Error() string {
	return fmt.Sprintf("network %s left: no container is attached but the Docker daemon still counts endpoints (moby/moby#42119); it is harmless, a daemon restart clears it, then run `koala-emu clean`: %v",
		strings.Join(e.Names, ", "), e.Err)
}

func (e *StaleNetworkError) Unwrap() error { return e.Err }

// OnlyStaleNetwork reports whether err is a StaleNetworkError and nothing
// else: a chain of single wraps ending in one, with no joined error beside
// it. A close that failed only this way left nothing running.
func OnlyStaleNetwork(err error) (*StaleNetworkError, bool) {
	for err != nil {
		if se, ok := err.(*StaleNetworkError); ok {
			return se, true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			var rest []error
			for _, e := range j.Unwrap() {
				if e != nil {
					rest = append(rest, e)
				}
			}
			if len(rest) != 1 {
				return nil, false
			}
			err = rest[0]
			continue
		}
		err = errors.Unwrap(err)
	}
	return nil, false
}

// cancelStarts marks the run closed and cancels the Start calls in flight;
// it reports false when the run was closed already.
func (r *Run) cancelStarts() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.closed = true
	for _, cancel := range r.starting {
		cancel()
	}
	return true
}

// CleanRun removes the containers and network of one run and returns how
// many it removed. `koala-emu clean` (launch.Clean) decides which runs:
// those whose owner (launch/owner labels) is gone, or those it is told to.
func CleanRun(ctx context.Context, runID string) (removed int, err error) {
	if err := checkRunID(runID); err != nil { // never "": that would select every run
		return 0, err
	}
	p, err := connect(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	n1, err1 := removeContainers(ctx, p.Client(), runFilter(runID), 8)
	n2, err2 := removeNetworks(ctx, p.Client(), runFilter(runID))
	if err := errors.Join(err1, err2); err != nil {
		return n1 + n2, fmt.Errorf("docker backend: clean: %w", err)
	}
	return n1 + n2, nil
}

// removeParallelism bounds concurrent stops and removals of a run's
// containers (see removeContainers).
const removeParallelism = 4

// stopGrace is how long a container gets to exit on SIGTERM before
// removeContainers kills it.
const stopGrace = 2

// removeContainers stops, then removes every container matching f,
// parallel at a time. Stopping first lets each container's network
// endpoint be released once, by its exit: force-removing hundreds of
// running containers at once made the daemon (Engine 20.10) release
// endpoints on two paths at a time and keep a stale endpoint count, after
// which the run's network could not be removed (moby/moby#42119).
func removeContainers(ctx context.Context, cli client.APIClient, f client.Filters, parallel int) (int, error) {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	if parallel <= 0 {
		parallel = 8
	}
	var stops sync.WaitGroup
	stopSem := make(chan struct{}, parallel)
	for _, c := range list.Items {
		if c.State != container.StateRunning {
			continue
		}
		stopSem <- struct{}{}
		stops.Add(1)
		go func(id string) {
			defer stops.Done()
			defer func() { <-stopSem }()
			grace := stopGrace
			// An error here (gone already) is settled by the removal below.
			_, _ = cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace})
		}(c.ID)
	}
	stops.Wait()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n    int
		errs []error
	)
	sem := make(chan struct{}, parallel)
	for _, c := range list.Items {
		sem <- struct{}{}
		wg.Add(1)
		go func(id string, names []string) {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				n++
			case cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "already in progress"):
				// gone already, or being removed by a concurrent call
			default:
				errs = append(errs, fmt.Errorf("remove container %v: %w", names, err))
			}
		}(c.ID, c.Names)
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// removeNetworks removes every network matching f.
func removeNetworks(ctx context.Context, cli client.APIClient, f client.Filters) (int, error) {
	list, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return 0, fmt.Errorf("list networks: %w", err)
	}
	n := 0
	var errs []error
	var stale *StaleNetworkError
	for _, nw := range list.Items {
		err := removeNetwork(ctx, cli, nw.ID, nw.Name)
		var se *StaleNetworkError
		switch {
		case err == nil:
			n++
		case errors.As(err, &se):
			if stale == nil {
				stale = &StaleNetworkError{Err: se.Err}
			}
			stale.Names = append(stale.Names, se.Names...)
		default:
			errs = append(errs, err)
		}
	}
	if stale != nil {
		if len(errs) == 0 {
			return n, stale
		}
		errs = append(errs, stale)
	}
	return n, errors.Join(errs...)
}

// removeNetwork removes one network. Right after its containers are
// removed the daemon may still count their endpoints for a moment (longer
// on a loaded host), so "active endpoints" is retried for up to 30 s. If
// the count never drops although no container is attached, the daemon's
// endpoint count is stale (a Docker Engine bug, moby/moby#42119, seen in
// about one run in a hundred with Engine 20.10); only a daemon restart
// clears it, and the error, a *StaleNetworkError, says so.
func removeNetwork(ctx context.Context, cli client.APIClient, id, name string) error {
	const patience = 30 * time.Second
	deadline := time.Now().Add(patience)
	delay := 100 * time.Millisecond
	for {
		_, err := cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		switch {
		case err == nil, cerrdefs.IsNotFound(err):
			return nil
		case !strings.Contains(err.Error(), "active endpoints"):
			return fmt.Errorf("remove network %s: %w", name, err)
		case time.Now().After(deadline):
			attached := -1
			if res, ierr := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{}); ierr == nil {
				attached = len(res.Network.Containers)
			}
			if attached == 0 {
				return &StaleNetworkError{Names: []string{name}, Err: err}
			}
			return fmt.Errorf("remove network %s (%d containers still attached): %w", name, attached, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("remove network %s: %w (last: %v)", name, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// wakeLatencyDev is the kernel's CPU wake-up latency (PM QoS) request device.
const wakeLatencyDev = "/dev/cpu_dma_latency"

func hostHas(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// RunInfo is one run found on the Docker daemon by its label.
type RunInfo struct {
	// ID is the run's ID (label koala-emu.run).
	ID string
	// Labels are the labels of the run's network, or of one of its
	// containers when the network is gone.
	Labels map[string]string
	// Containers and Networks are the Docker names of the run's containers
	// and networks.
	Containers, Networks []string
}

// ListRuns lists every run on the Docker daemon (containers and networks
// labelled koala-emu.run), sorted by ID. Errors wrap ErrDaemon when Docker
// is not reachable.
func ListRuns(ctx context.Context) ([]RunInfo, error) {
	p, err := connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	cli := p.Client()
	runs := map[string]*RunInfo{}
	get := func(labels map[string]string) *RunInfo {
		id := labels[LabelRun]
		if runs[id] == nil {
			runs[id] = &RunInfo{ID: id, Labels: labels}
		}
		return runs[id]
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: runFilter("")})
	if err != nil {
		return nil, fmt.Errorf("docker backend: list networks: %w", err)
	}
	for _, n := range nets.Items {
		r := get(n.Labels)
		r.Labels, r.Networks = n.Labels, append(r.Networks, n.Name)
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter("")})
	if err != nil {
		return nil, fmt.Errorf("docker backend: list containers: %w", err)
	}
	for _, c := range cs.Items {
		r := get(c.Labels)
		r.Containers = append(r.Containers, strings.TrimPrefix(firstOr(c.Names, c.ID), "/"))
	}
	out := make([]RunInfo, 0, len(runs))
	for _, r := range runs {
		sort.Strings(r.Containers)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func firstOr(names []string, def string) string {
	if len(names) > 0 {
		return names[0]
	}
	return def
}
