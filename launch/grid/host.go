package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/node"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
)

// Membership meta keys.
const metaProbe = "probe" // host:port of the host's probe endpoint

// HostConfig describes one actor host: the process in one container.
type HostConfig struct {
	// Name is unique in the run (the container's name within the run and
	// its membership name); Role is a membership Role*; Cluster is set for
	// cluster managers and nodes.
	Name, Role, Cluster string
	// IP is the address the host's remote, probe endpoint and ranks listen
	// on and advertise (the container's fixed IP).
	IP string
	// RemotePort is the protoactor remote port; 0 means RemotePort, a
	// negative value any free port.
	RemotePort int
	// GossipPort is the memberlist port; 0 means GossipPort, a negative
	// value any free port.
	GossipPort int
	Grid       *Grid
	// Membership builds the host's membership provider; nil means
	// memberlist on IP:GossipPort with membership.DefaultConfig.
	Membership func(self membership.Member) (membership.Provider, error)
	// Candidates are the shaping mechanisms; nil means DefaultCandidates.
	Candidates Candidates
	// JoinTimeout bounds joining the membership; default 2 minutes.
	JoinTimeout time.Duration
	// Log receives the ready line and diagnostics; nil discards.
	Log io.Writer
}

// host is a running actor host.
type host struct {
	cfg    HostConfig
	grid   *Grid
	log    io.Writer
	system *actor.ActorSystem
	rem    *remote.Remote
	clk    *clock.Scaled
	env    actors.Env
	sh     *shaper
	probe  *wiring.Prober
	stats  *invariant.Stats // invariant counters of a malleable run's manager or runners
	prov   membership.Provider
	ctx    context.Context
	stop   context.CancelFunc // ends Serve
	quiet  atomic.Bool        // GridStop received
	stopBy chan *actor.PID    // who asked for GridStop (capacity 1)
	left   bool               // the membership is closed or left (Serve's goroutine only)
	logf   func(format string, a ...any)

	mu        sync.Mutex
	roleActor *actor.PID // spawned by activation (or at boot for nodes)
	down      map[string]bool
	peers     wiring.Peers // runner sites: the scheduler and the cluster managers
}

// ErrStopped is returned by Serve, once ctx ends, when the launcher had
// stopped the host (GridStop): the host stopped its role actor, removed
// its shaping, closed its membership without announcing a departure and
// acknowledged, then idled (its remote still up) until ctx ended.
var ErrStopped = errors.New("grid: host stopped by the launcher")

// Serve runs an actor host until ctx ends (SIGTERM in a container): it
// starts an actor system with remote on cfg.IP, spawns the control actor
// (and the node actor on a node host), joins the membership, prints
// docker.ReadyLine and serves. On the way out it leaves the membership,
// stops its actors and removes its shaping. It returns ErrStopped after a
// GridStop.
func Serve(ctx context.Context, cfg HostConfig) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	h := &host{cfg: cfg, grid: cfg.Grid, log: cfg.Log, ctx: ctx, stop: stop, down: map[string]bool{}, stopBy: make(chan *actor.PID, 1),
		logf: func(format string, a ...any) { fmt.Fprintf(cfg.Log, cfg.Name+": "+format+"\n", a...) }}
	var undo wiring.Undo
	defer func() { err = errors.Join(err, undo.Run()) }()
	if err := h.start(&undo); err != nil {
		return fmt.Errorf("grid: host %s: %w", cfg.Name, err)
	}
	if err := h.join(&undo); err != nil {
		return fmt.Errorf("grid: host %s: %w", cfg.Name, err)
	}
	fmt.Fprintf(h.log, "%s: %s %s (%s) at %s\n", docker.ReadyLine, cfg.Name, cfg.Role, cfg.Cluster, h.system.Address())
	return h.serve(parent)
}

// check validates a HostConfig and sets its defaults.
func (cfg *HostConfig) check() error {
	if cfg.Grid == nil {
		return errors.New("grid: host without a grid")
	}
	if cfg.Name == "" || cfg.IP == "" {
		return errors.New("grid: host needs a name and an IP")
	}
	switch cfg.Role {
	case membership.RoleNode, membership.RoleCluster, membership.RoleScheduler, membership.RoleKIS, membership.RoleRunner:
	default:
		return fmt.Errorf("grid: host %s: unknown role %q", cfg.Name, cfg.Role)
	}
	cfg.RemotePort = portOr(cfg.RemotePort, RemotePort)
	cfg.GossipPort = portOr(cfg.GossipPort, GossipPort)
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return nil
}

// portOr is def for 0 and any free port (0) for a negative port.
func portOr(port, def int) int {
	switch {
	case port == 0:
		return def
	case port < 0:
		return 0
	}
	return port
}

// start starts the host's actor system with remote, its shaping and probe
// endpoint (nodes and cluster managers), the node actor on a node host and
// the control actor.
func (h *host) start(undo *wiring.Undo) (err error) {
	cfg := h.cfg
	h.system = actor.NewActorSystem(logTo(h.log, slog.LevelError))
	undo.Push(func() error { h.system.Shutdown(); return nil })
	if h.rem, err = startRemote(h.system, cfg.IP, cfg.RemotePort); err != nil {
		return err
	}
	undo.Push(func() error { h.rem.Shutdown(false); return nil })
	h.clk = clock.NewScaled(h.grid.Factor())
	h.env = actors.Env{System: h.system, Clock: h.clk, Recorder: actor.NewPID(h.grid.Launcher, wiring.ActorRecorder)}
	if h.grid.Policy.Malleability != nil && (cfg.Role == membership.RoleScheduler || cfg.Role == membership.RoleRunner) {
		h.stats = invariant.NewStats()
	}
	if cfg.Role == membership.RoleNode || cfg.Role == membership.RoleCluster {
		h.sh = newShaper(cfg.Name, cfg.Cluster, h.grid, cfg.Candidates)
		if ip := net.ParseIP(cfg.IP); ip == nil || ip.IsLoopback() {
			h.sh.shared = true
		}
		for _, p := range []int{cfg.RemotePort, cfg.GossipPort} {
			if p > 0 {
				h.sh.keep = append(h.sh.keep, uint16(p))
			}
		}
		undo.Push(h.sh.close)
		if h.probe, err = wiring.NewProber(h.ctx, cfg.Cluster, &h.sh.egress, cfg.IP); err != nil {
			return err
		}
		undo.Push(h.probe.Close)
	}
	if cfg.Role == membership.RoleNode {
		if err := h.spawnNode(); err != nil {
			return err
		}
	}
	ctl, err := h.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &ctlActor{h: h} }), actorCtl)
	if err != nil {
		return fmt.Errorf("spawn control actor: %w", err)
	}
	undo.Push(func() error { _ = h.system.Root.StopFuture(ctl).Wait(); return nil })
	undo.Push(h.stopRole)
	return nil
}

// spawnNode spawns a node host's node actor.
func (h *host) spawnNode() error {
	cfg, err := h.grid.NodeConfig(h.env, h.cfg.Cluster, h.cfg.Name, &h.sh.egress, h.cfg.IP)
	if err != nil {
		return err
	}
	p, err := h.system.Root.SpawnNamed(node.Props(cfg), wiring.NodeActor(h.cfg.Name))
	if err != nil {
		return fmt.Errorf("spawn node actor: %w", err)
	}
	h.roleActor = p
	return nil
}

// stopRole stops the role actor, waiting for its Stopping handler.
func (h *host) stopRole() error {
	h.mu.Lock()
	p := h.roleActor
	h.roleActor = nil
	h.mu.Unlock()
	if p != nil {
		_ = h.system.Root.StopFuture(p).Wait()
	}
	return nil
}

// join joins the membership; the undo step leaves it (announcing the
// departure) unless it was closed already.
func (h *host) join(undo *wiring.Undo) (err error) {
	cfg := h.cfg
	meta := map[string]string{}
	if h.probe != nil {
		meta[metaProbe] = h.probe.Addr()
	}
	self := membership.Member{Name: cfg.Name, Role: cfg.Role, Cluster: cfg.Cluster, Addr: h.system.Address(), Meta: meta}
	if cfg.Membership != nil {
		h.prov, err = cfg.Membership(self)
	} else {
		mc := MembershipConfig(self)
		mc.BindAddr, mc.AdvertiseAddr = cfg.IP, cfg.IP
		mc.BindPort = cfg.GossipPort
		if os.Getenv(EnvDebug) != "" {
			mc.LogOutput = h.log
		}
		h.prov, err = membership.NewMemberlist(mc)
	}
	if err != nil {
		return fmt.Errorf("membership: %w", err)
	}
	undo.Push(func() error {
		if h.left {
			return h.prov.Close()
		}
		lctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := h.prov.Leave(lctx); err != nil && !errors.Is(err, membership.ErrClosed) {
			return err
		}
		return nil
	})
	jctx, cancel := context.WithTimeout(h.ctx, cfg.JoinTimeout)
	defer cancel()
	return h.prov.Join(jctx, h.grid.Seeds)
}

// serve handles membership events until the host's context ends.
func (h *host) serve(parent context.Context) error {
	for {
		select {
		case <-h.ctx.Done():
			if h.quiet.Load() {
				return h.quietStop(parent)
			}
			// Leave first (so peers see a departure, not a failure), then
			// stop the actors.
			lctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			lerr := h.prov.Leave(lctx)
			cancel()
			h.left = true
			if lerr != nil && !errors.Is(lerr, membership.ErrClosed) {
				h.logf("leave: %v", lerr)
			}
			return nil
		case ev, ok := <-h.prov.Events():
			if !ok {
				<-h.ctx.Done()
				continue
			}
			h.member(ev)
		}
	}
}

// quietStop ends a host the launcher stopped (GridStop): the whole run is
// going away, so it closes the membership without departure gossip, stops
// the role actor, removes the shaping (so the container's namespace is
// plain when Docker removes it), acknowledges, and idles until parent ends.
func (h *host) quietStop(parent context.Context) error {
	h.left = true
	err := errors.Join(h.prov.Close(), h.stopRole(), h.closeShaping())
	ack := &msg.GridAck{Host: h.cfg.Name}
	if err != nil {
		ack.Error = err.Error()
	}
	select {
	case to := <-h.stopBy:
		h.system.Root.Send(to, ack)
	default:
	}
	<-parent.Done()
	return ErrStopped
}

// logTo sends protoactor's own log lines at level and above to w.
func logTo(w io.Writer, level slog.Level) actor.ConfigOption {
	return actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	})
}

// MembershipConfig is the memberlist configuration of every member of a
// run: membership.DefaultConfig with gossip every second (not 100 ms),
// probes every 3 s with a 2 s timeout, two indirect checks, suspicion
// multiplier 4, push/pull every minute (memberlist stretches it to 4
// minutes above 128 members) and each change passed on 2 x ceil(log10(n+1))
// times (memberlist's default is 4 x).
//
// Measured on this project's 2-core machine: with 216 processes on
// loopback and gossip at 100-200 ms the membership never converged (the
// machine saturated, probes timed out, suspicions made more gossip); with
// 500 ms all 216 joined in 9 s. What an idle grid spends is mostly the
// start's own gossip: every member passes on every other member's join,
// so 214 members send about 214 x 214 x 12 join messages with the default
// multiplier, and go on sending them for a minute or two after the last
// join (on a slow machine, all through a slow start). On netns, das3-smoke's
// 215 processes used 0.58 cores (twice) from 10 to 70 s after the grid was
// ready with the default, 0.35 with 3 x and 0.19-0.25 with 2 x. A member
// that gossip missed is found by the hosts that wait for it (waitPeers
// exchanges the membership with the seeds). A death is missed only by a
// member that misses both the suspicion (each member that hears it
// declares the death on its own when it times out) and the death itself,
// until the next push/pull.
//
// The price of the long intervals is detection time: a killed host is
// declared dead after about 4 x log10(n) x 3 s once others confirm (about
// 28 s for 216 members, 13 s for 12), plus up to one probe round.
func MembershipConfig(self membership.Member) membership.Config {
	c := membership.DefaultConfig(self)
	c.ProbeInterval = 3 * time.Second
	c.ProbeTimeout = 2 * time.Second
	c.IndirectChecks = 2
	c.SuspicionMult = 4
	c.SuspicionMaxTimeoutMult = 3
	c.GossipInterval = time.Second
	c.TCPTimeout = 5 * time.Second
	c.PushPullInterval = time.Minute
	c.RetransmitMult = 2
	return c
}

// startRemote starts protoactor remote on ip:port. Remote.Start panics when
// it cannot listen; that becomes an error. The endpoint queues start small
// (they grow on demand): the default preallocates a million slots per peer.
func startRemote(system *actor.ActorSystem, ip string, port int) (r *remote.Remote, err error) {
	r = remote.NewRemote(system, remote.Configure(ip, port,
		remote.WithEndpointWriterQueueSize(256), remote.WithEndpointManagerQueueSize(256),
		remote.WithEndpointWriterBatchSize(256), remote.WithEndpointManagerBatchSize(256)))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("start remote on %s: %v", net.JoinHostPort(ip, strconv.Itoa(port)), p)
		}
	}()
	r.Start()
	return r, nil
}

// member handles a membership event. A cluster manager's host reports its
// nodes that fail or leave (wiring.NodeLossOf): NodeDown to its cluster
// actor (which marks the node down and emits node_down) and to every runner
// site, which forwards it to its runners (the runner whose job had a rank
// there fails the job).
func (h *host) member(ev membership.Event) {
	if h.cfg.Role != membership.RoleCluster {
		return
	}
	loss, ok := wiring.NodeLossOf(ev, h.cfg.Cluster)
	if !ok {
		return
	}
	if !loss.Suspected {
		h.nodeDown(loss.Node, loss.Reason)
		return
	}
	// A failure is confirmed before it is reported: a host whose kernel
	// still accepts connections on its remote port is alive (the kernel
	// answers even when the process waits for a CPU); a killed container's
	// address answers nothing, a killed process's port refuses.
	go func(l wiring.NodeLoss) {
		if alive(h.ctx, l.Node.Addr) {
			h.logf("node %s suspected by the membership but it accepts connections: not reported", l.Node.Name)
			return
		}
		h.nodeDown(l.Node, l.Reason)
	}(loss)
}

// closeShaping removes the host's shaping (no-op without a shaper).
func (h *host) closeShaping() error {
	if h.sh == nil {
		return nil
	}
	return h.sh.close()
}

// alive reports whether addr accepts a TCP connection, trying twice.
func alive(ctx context.Context, addr string) bool {
	for i := 0; i < 2; i++ {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return false
}

// nodeDown reports a node of this cluster down.
func (h *host) nodeDown(m membership.Member, reason string) {
	nd := &msg.NodeDown{Node: m.Name, Cluster: m.Cluster, Reason: reason}
	h.mu.Lock()
	h.down[m.Name] = true
	mgr := h.roleActor
	h.mu.Unlock()
	h.logf("node %s %s", m.Name, reason)
	if mgr != nil {
		h.system.Root.Send(mgr, nd)
	}
	for _, s := range viewOf(h.prov.Members()).sites {
		h.system.Root.Send(pidOf(s, actorCtl), nd)
	}
}

// waitPeers polls the membership until ok accepts it or the timeout ends.
// While it is not accepted it exchanges the whole membership with the
// seeds every resyncEvery: a member whose join gossip never reached this
// host (dropped under load) is found there, since every host joins through
// the seeds.
func (h *host) waitPeers(timeout time.Duration, ok func(peers) error) (peers, error) {
	const resyncEvery = 3 * time.Second
	began := time.Now()
	deadline, nextResync := began.Add(timeout), began.Add(resyncEvery)
	for {
		v := viewOf(h.prov.Members())
		err := ok(v)
		if err == nil {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("after %v: %w", timeout, err)
		}
		if now := time.Now(); now.After(nextResync) {
			nextResync = now.Add(resyncEvery)
			h.logf("after %.0f s: %v; exchanging the membership with the seeds", now.Sub(began).Seconds(), err)
			rctx, cancel := context.WithTimeout(h.ctx, resyncEvery)
			if jerr := h.prov.Join(rctx, h.grid.Seeds); jerr != nil {
				h.logf("membership exchange: %v", jerr)
			}
			cancel()
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return v, h.ctx.Err()
		case <-t.C:
		}
	}
}

// activate spawns the host's role actor with its peers found through the
// membership; the role's props come from the run's Spec (launch/wiring).
func (h *host) activate() error {
	h.mu.Lock()
	active := h.roleActor != nil
	h.mu.Unlock()
	if active && h.cfg.Role != membership.RoleNode {
		return errors.New("already active")
	}
	switch h.cfg.Role {
	case membership.RoleNode:
		return nil
	case membership.RoleScheduler:
		return h.activateScheduler()
	case membership.RoleKIS:
		return h.activateKIS()
	case membership.RoleRunner:
		p, err := h.waitRoles(true, false)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.peers = p
		h.mu.Unlock()
		return nil
	case membership.RoleCluster:
		return h.activateCluster()
	}
	return fmt.Errorf("unknown role %q", h.cfg.Role)
}

// activationPatience bounds how long an activation waits for its peers.
const activationPatience = time.Minute

// waitRoles waits until the membership shows every cluster manager, and
// the scheduler and the information service when asked for.
func (h *host) waitRoles(scheduler, kis bool) (wiring.Peers, error) {
	order := h.grid.Order()
	v, err := h.waitPeers(activationPatience, func(v peers) error {
		if scheduler && v.scheduler == nil {
			return errors.New("no scheduler in the membership")
		}
		if kis && v.kis == nil {
			return errors.New("no information service in the membership")
		}
		_, err := v.clusterPIDs(order)
		return err
	})
	if err != nil {
		return wiring.Peers{}, err
	}
	return v.roles(order)
}

// spawnRole spawns the host's role actor.
func (h *host) spawnRole(props *actor.Props, name string) error {
	p, err := h.system.Root.SpawnNamed(props, name)
	if err != nil {
		return fmt.Errorf("spawn %s: %w", name, err)
	}
	h.mu.Lock()
	h.roleActor = p
	h.mu.Unlock()
	return nil
}

// activateScheduler spawns the scheduler, or the malleability manager of a
// malleable run (its invariant counters are the host's, reported to the
// launcher on request).
func (h *host) activateScheduler() error {
	p, err := h.waitRoles(false, false)
	if err != nil {
		return err
	}
	props, err := h.grid.Scheduler(h.env, p, h.stats)
	if err != nil {
		return err
	}
	return h.spawnRole(props, wiring.ActorScheduler)
}

// activateKIS spawns the information service and tells the launcher when
// its first probe round is done.
func (h *host) activateKIS() error {
	p, err := h.waitRoles(true, false)
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	if err := h.spawnRole(h.grid.KIS(h.env, p, ready), wiring.ActorKIS); err != nil {
		return err
	}
	launcher := actor.NewPID(h.grid.Launcher, actorLauncher)
	go func() {
		select {
		case <-ready:
			h.system.Root.Send(launcher, &msg.GridReady{})
		case <-h.ctx.Done():
		}
	}()
	return nil
}

// activateCluster spawns the cluster manager once every node of its
// cluster has joined (minus nodes already reported down).
func (h *host) activateCluster() error {
	c, _, ok := h.grid.Cluster(h.cfg.Cluster)
	if !ok {
		return fmt.Errorf("unknown cluster %q", h.cfg.Cluster)
	}
	v, err := h.waitPeers(activationPatience, func(v peers) error {
		if v.kis == nil {
			return errors.New("no information service in the membership")
		}
		h.mu.Lock()
		down := len(h.down)
		h.mu.Unlock()
		if n := len(v.nodes[c.Name]); n+down < c.Nodes {
			return fmt.Errorf("%d of %d nodes of %s joined", n, c.Nodes, c.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var infos []cluster.NodeInfo
	for _, m := range v.nodes[c.Name] {
		infos = append(infos, cluster.NodeInfo{Name: m.Name, PID: pidOf(m, wiring.NodeActor(m.Name))})
	}
	props, err := h.grid.ClusterManager(h.env, c.Name, infos, wiring.Peers{KIS: pidOf(*v.kis, wiring.ActorKIS)}, h.probe)
	if err != nil {
		return err
	}
	return h.spawnRole(props, wiring.ClusterActor(c.Name))
}

// fromLauncher reports whether a control message with sender comes from
// the run's launcher at address launcher. Only the launcher asks a host's
// control actor anything (a RequestFuture: the sender is its future) or
// hands it a job (SpawnRunner, sent as the launcher actor); hosts tell
// each other of a lost node without a sender. A message asked
// by another actor system is an earlier run's: a launcher that is closed
// leaves its remote's connection attempts behind (protoactor's endpoint
// writers retry for about 10 s), and in a process that runs one grid
// after another (a test binary, a study) an earlier run's GridStop reached
// the next run's host at the same address and port and stopped it.
func fromLauncher(sender *actor.PID, launcher string) bool {
	return sender == nil || sender.Address == launcher
}

// ctlActor is the control actor of a host (see grid.proto). Long operations
// (shaping, ping-pongs) run in goroutines that reply to the asker.
type ctlActor struct {
	h *host
}

func (c *ctlActor) Receive(ctx actor.Context) {
	h := c.h
	if s := ctx.Sender(); !fromLauncher(s, h.grid.Launcher) {
		h.logf("ignored %T from %s: not this run's launcher (%s)", ctx.Message(), s.Address, h.grid.Launcher)
		return
	}
	switch x := ctx.Message().(type) {
	case *msg.GridShape:
		if h.sh == nil {
			ctx.Respond(&msg.GridShaped{Host: h.cfg.Name, Error: h.cfg.Name + ": role " + h.cfg.Role + " does not shape"})
			return
		}
		sender := ctx.Sender()
		go func() { h.system.Root.Send(sender, h.sh.shape(h.ctx, x)) }()
	case *msg.GridPingPong:
		if h.sh == nil {
			ctx.Respond(&msg.GridPingPongResult{Error: h.cfg.Name + ": role " + h.cfg.Role + " does not measure"})
			return
		}
		sender := ctx.Sender()
		go func() {
			pctx, cancel := context.WithTimeout(h.ctx, 60*time.Second)
			defer cancel()
			h.system.Root.Send(sender, h.sh.pingPong(pctx, x))
		}()
	case *msg.GridSetLink, *msg.GridCut:
		c.fault(ctx)
	case *msg.GridLoad:
		ctx.Respond(h.load(x))
	case *msg.GridLineStats:
		if h.sh == nil {
			ctx.Respond(&msg.GridLineStatsResult{})
			return
		}
		ctx.Respond(h.sh.lineStats(x))
	case *msg.GridActivate:
		ack := &msg.GridAck{Host: h.cfg.Name}
		if err := h.activate(); err != nil {
			ack.Error = fmt.Sprintf("%s: activate %s: %v", h.cfg.Name, h.cfg.Role, err)
			h.logf("%s", ack.Error)
		}
		ctx.Respond(ack)
	case *msg.GridEpoch:
		h.clk.RestartAt(time.Unix(0, x.UnixNano))
		ctx.Respond(&msg.GridAck{Host: h.cfg.Name})
	case *msg.SpawnRunner:
		c.spawnRunner(ctx, x)
	case *msg.GridStop:
		if h.quiet.Swap(true) {
			ctx.Respond(&msg.GridAck{Host: h.cfg.Name})
			return
		}
		h.stopBy <- ctx.Sender()
		h.stop()
	case *msg.NodeDown:
		for _, child := range ctx.Children() {
			ctx.Send(child, x)
		}
	case *msg.Event:
		if x.Kind == wiring.KindInvariantReport {
			ctx.Respond(wiring.InvariantReport(h.stats.Snapshot()))
		}
	}
}

// fault handles a GridSetLink or a GridCut (faults timeline) in a
// goroutine that replies to the asker; a host that does not shape refuses
// both.
func (c *ctlActor) fault(ctx actor.Context) {
	h := c.h
	if h.sh == nil {
		e := h.cfg.Name + ": role " + h.cfg.Role + " does not shape"
		if _, ok := ctx.Message().(*msg.GridCut); ok {
			ctx.Respond(&msg.GridAck{Host: h.cfg.Name, Error: e})
		} else {
			ctx.Respond(&msg.GridShaped{Host: h.cfg.Name, Error: e})
		}
		return
	}
	sender, m := ctx.Sender(), ctx.Message()
	go func() {
		var reply interface{}
		switch x := m.(type) {
		case *msg.GridSetLink:
			reply = h.sh.setLink(h.ctx, x)
		case *msg.GridCut:
			reply = h.sh.setCut(x)
		}
		h.system.Root.Send(sender, reply)
	}()
}

// load handles a GridLoad: a node host hands the load to its node actor as
// the inproc backend does (wiring.LoadNode); a host of another role
// refuses it.
func (h *host) load(x *msg.GridLoad) *msg.GridAck {
	ack := &msg.GridAck{Host: h.cfg.Name}
	h.mu.Lock()
	p := h.roleActor
	h.mu.Unlock()
	switch {
	case h.cfg.Role != membership.RoleNode:
		ack.Error = h.cfg.Name + ": role " + h.cfg.Role + " runs no node to load"
	case p == nil:
		ack.Error = h.cfg.Name + ": the node actor is stopped"
	default:
		wiring.LoadNode(h.system.Root, p, int(x.Programs))
	}
	return ack
}

// spawnRunner starts a job's runner (rigid or malleable, see
// wiring.Spec.Runner) as a child of the site's control actor, so NodeDown
// reaches every runner of the site.
func (c *ctlActor) spawnRunner(ctx actor.Context, x *msg.SpawnRunner) {
	h := c.h
	h.mu.Lock()
	p := h.peers
	h.mu.Unlock()
	job := x.Job
	if job == nil {
		return
	}
	if p.Scheduler == nil {
		wiring.FailJob(h.env, job.GetId(), "runner site "+h.cfg.Name+" is not active")
		return
	}
	if _, err := ctx.SpawnNamed(h.grid.Runner(h.env, job, p, h.stats), wiring.RunnerActor(job.Id)); err != nil {
		wiring.FailJob(h.env, job.GetId(), "spawn runner: "+err.Error())
	}
}
