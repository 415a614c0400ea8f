package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
)

// HostSpec is one actor host a platform starts.
type HostSpec struct {
	Name, Role, Cluster string
}

// Network is where a platform put a run.
type Network struct {
	// LauncherIP is the launcher's address as the hosts reach it (the run
	// network's gateway on Docker).
	LauncherIP string
	// Subnets maps each cluster to the prefixes of its hosts.
	Subnets map[string][]netip.Prefix
}

// Platform starts and removes the actor hosts of a run: Docker containers
// (DockerPlatform), or goroutines of this process in the tests.
type Platform interface {
	// Setup prepares a run over the clusters (in order).
	Setup(ctx context.Context, clusters []string) (Network, error)
	// Membership returns the launcher's membership provider.
	Membership(self membership.Member) (membership.Provider, error)
	// Start starts the hosts and returns once each has been started (not
	// once each is up: the launcher learns that from the membership). If
	// it fails, what it started is removed again.
	Start(ctx context.Context, hosts []HostSpec, g *Grid) error
	// Started is how many hosts of the current Start call have started.
	Started() int
	// Exited returns the hosts that stopped, each with a diagnostic (the
	// tail of its output).
	Exited(ctx context.Context) (map[string]string, error)
	// Close removes every host and the network. Pass a fresh context.
	Close(ctx context.Context) error
}

// launcher is the koala-emu side of a grid: an actor system with remote on
// the run network, a member of the membership, and the driver of the hosts'
// control actors.
type launcher struct {
	plat     Platform
	grid     *Grid
	system   *actor.ActorSystem
	prov     membership.Provider
	progress io.Writer
	began    time.Time

	ready     chan struct{}
	readyOnce sync.Once

	mu       sync.Mutex
	members  map[string]membership.Member
	total    int // hosts expected
	joined   int
	up       bool                // every host has joined
	stopping bool                // the run is going away
	failed   []membership.Member // hosts that failed or left after being up
	onFail   func(membership.Event)
	undo     wiring.Undo
}

// newLauncher sets up the platform's network, the launcher's actor system
// (remote on the network) and its membership. Close undoes it.
func newLauncher(ctx context.Context, plat Platform, g *Grid, progress io.Writer) (l *launcher, err error) {
	if progress == nil {
		progress = io.Discard
	}
	l = &launcher{plat: plat, grid: g, progress: progress, began: time.Now(), ready: make(chan struct{}),
		members: map[string]membership.Member{}}
	// The error returns below set l to nil: close what was set up through
	// this copy.
	built := l
	defer func() {
		if err != nil {
			err = errors.Join(err, built.Close())
			l = nil
		}
	}()
	l.undo.Push(func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		err := plat.Close(cctx)
		if se, ok := docker.OnlyStaleNetwork(err); ok {
			// Everything of the run is gone but an empty network the daemon
			// will not delete: the run's results stand; say so, do not fail.
			fmt.Fprintf(progress, "warning: %v\n", se)
			return nil
		}
		return err
	})
	nw, err := plat.Setup(ctx, g.Order())
	if err != nil {
		return nil, err
	}
	g.Subnets = nw.Subnets

	// The launcher's remote reports every connection to a host that goes
	// away (all of them at the end of a run): nothing a user can act on.
	l.system = actor.NewActorSystem(logTo(io.Discard, slog.LevelError))
	l.undo.Push(func() error { l.system.Shutdown(); return nil })
	rem, err := startRemote(l.system, nw.LauncherIP, 0)
	if err != nil {
		return nil, fmt.Errorf("grid: launcher: %w (is %s an address of this host?)", err, nw.LauncherIP)
	}
	l.undo.Push(func() error { rem.Shutdown(false); return nil })
	g.Launcher = l.system.Address()
	if _, err := l.system.Root.SpawnNamed(actor.PropsFromFunc(l.receive), actorLauncher); err != nil {
		return nil, fmt.Errorf("grid: launcher: %w", err)
	}

	self := membership.Member{Name: RoleLauncher, Role: RoleLauncher, Addr: l.system.Address()}
	if l.prov, err = plat.Membership(self); err != nil {
		return nil, fmt.Errorf("grid: launcher membership: %w", err)
	}
	l.undo.Push(l.stopHosts)
	if err := l.prov.Join(ctx, nil); err != nil {
		return nil, fmt.Errorf("grid: launcher membership: %w", err)
	}
	if ga, ok := l.prov.(interface{ GossipAddr() string }); ok {
		g.Seeds = []string{ga.GossipAddr()}
	}
	go l.watch()
	return l, nil
}

// stopHosts leaves the membership silently and tells every host to stop
// (GridStop): each stops its actors, removes its shaping and closes its
// membership without announcing a departure, then idles until its
// container is removed. Nobody reports the others as failed meanwhile.
func (l *launcher) stopHosts() error {
	l.mu.Lock()
	l.stopping = true
	hosts := make([]membership.Member, 0, len(l.members))
	for _, m := range l.members {
		hosts = append(hosts, m)
	}
	l.mu.Unlock()
	err := l.prov.Close()
	// Each host acknowledges once its shaping is gone; a host that does not
	// answer is removed all the same.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = l.askAll(ctx, hosts, func(membership.Member) interface{} { return &msg.GridStop{} }, 20*time.Second, 64)
	return err
}

// Close stops the launcher and removes every host and the network.
func (l *launcher) Close() error { return l.undo.Run() }

func (l *launcher) receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*msg.GridReady); ok {
		l.readyOnce.Do(func() { close(l.ready) })
	}
}

// watch follows the membership.
func (l *launcher) watch() {
	for ev := range l.prov.Events() {
		if ev.Member.Name == RoleLauncher {
			continue
		}
		l.mu.Lock()
		switch ev.Kind {
		case membership.Join, membership.Update:
			if _, ok := l.members[ev.Member.Name]; !ok {
				l.joined++
			}
			l.members[ev.Member.Name] = ev.Member
		case membership.Fail, membership.Leave:
			delete(l.members, ev.Member.Name)
			if l.up {
				l.failed = append(l.failed, ev.Member)
			}
		}
		on := l.onFail
		if l.stopping {
			on = nil
		}
		l.mu.Unlock()
		if on != nil && (ev.Kind == membership.Fail || ev.Kind == membership.Leave) {
			on(ev)
		}
	}
}

// member returns a live member by name.
func (l *launcher) member(name string) (membership.Member, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.members[name]
	return m, ok
}

// Failed returns the hosts that failed or left after the grid was up.
func (l *launcher) Failed() []membership.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]membership.Member(nil), l.failed...)
}

// StartupTimes are the wall times from the launcher's start.
type StartupTimes struct {
	// Started: every container created and started; Joined: every host
	// in the membership.
	Started, Joined time.Duration
}

// startHosts starts the hosts and waits until every one has joined the
// membership, showing progress. It gives up when the start stalls: when for
// stall neither another host has started nor the membership has held more
// hosts than ever before (a count that falls back while failure detection
// catches up does not count as progress). A slow machine therefore only
// makes the start slower; ctx bounds it as a whole. It fails early when a
// host exits.
func (l *launcher) startHosts(ctx context.Context, hosts []HostSpec, stall time.Duration) (StartupTimes, error) {
	var st StartupTimes
	l.mu.Lock()
	l.total = len(hosts)
	l.mu.Unlock()
	w := &startWatch{l: l, hosts: hosts, want: map[string]bool{}, lastCheck: time.Now(), lastProgress: time.Now()}
	for _, h := range hosts {
		w.want[h.Name] = true
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	startErr := make(chan error, 1)
	go func() { startErr <- l.plat.Start(sctx, hosts, l.grid) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-startErr:
			if err != nil {
				return st, err
			}
			w.started = true
			st.Started = time.Since(l.began)
			startErr = nil
		case <-ctx.Done():
			return st, fmt.Errorf("grid: interrupted while starting: %w", ctx.Err())
		case <-tick.C:
		}
		miss := w.missing()
		if len(miss) == 0 && w.started {
			st.Joined = time.Since(l.began)
			w.show(true)
			l.mu.Lock()
			l.up = true
			l.mu.Unlock()
			return st, nil
		}
		if err := w.check(ctx, miss, stall); err != nil {
			return st, err
		}
		w.show(false)
	}
}

// startWatch follows a start: which hosts are missing from the membership,
// the progress shown, and when the start last made progress.
type startWatch struct {
	l       *launcher
	hosts   []HostSpec
	want    map[string]bool
	started bool // the platform's Start returned

	lastShown, lastCheck, lastProgress time.Time
	mostStarted, mostJoined            int
}

// missing returns the hosts not in the membership, sorted.
func (w *startWatch) missing() []string {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	var out []string
	for n := range w.want {
		if _, ok := w.l.members[n]; !ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// counts are the hosts started and those in the membership.
func (w *startWatch) counts() (nStarted, joined int) {
	w.l.mu.Lock()
	joined = min(len(w.l.members), len(w.hosts))
	w.l.mu.Unlock()
	nStarted = w.l.plat.Started()
	if w.started {
		nStarted = len(w.hosts)
	}
	return nStarted, joined
}

// show prints the counts every 3 s, or now when final.
func (w *startWatch) show(final bool) {
	nStarted, joined := w.counts()
	if final || time.Since(w.lastShown) >= 3*time.Second {
		fmt.Fprintf(w.l.progress, "grid: %d/%d %s started, %d/%d joined the membership (%.1f s)\n",
			nStarted, len(w.hosts), hostUnit(backendOf(w.l.plat)), joined, len(w.hosts), time.Since(w.l.began).Seconds())
		w.lastShown = time.Now()
	}
}

// check fails the start when it made no progress for stall, or when a host
// exited (looked at every 5 s once every host has started).
func (w *startWatch) check(ctx context.Context, miss []string, stall time.Duration) error {
	if nStarted, joined := w.counts(); nStarted > w.mostStarted || joined > w.mostJoined {
		w.mostStarted, w.mostJoined = max(w.mostStarted, nStarted), max(w.mostJoined, joined)
		w.lastProgress = time.Now()
	} else if time.Since(w.lastProgress) >= stall {
		n := len(miss)
		if n > 8 {
			miss = append(miss[:8], fmt.Sprintf("and %d more", n-8))
		}
		return fmt.Errorf("grid: the start made no progress for %v (%d/%d %s started, at most %d/%d in the membership at once); %d hosts are not in the membership: %s",
			stall, w.mostStarted, len(w.hosts), hostUnit(backendOf(w.l.plat)), w.mostJoined, len(w.hosts), n, strings.Join(miss, ", "))
	}
	if !w.started || time.Since(w.lastCheck) <= 5*time.Second {
		return nil
	}
	w.lastCheck = time.Now()
	exited, err := w.l.plat.Exited(ctx)
	if err != nil || len(exited) == 0 {
		return nil
	}
	var names []string
	for n := range exited {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Errorf("grid: %d hosts exited while starting; %s said:\n%s", len(names), names[0], exited[names[0]])
}

// hostsByRole returns the live members of a role (or every host for ""),
// sorted by name.
func (l *launcher) hostsByRole(roles ...string) []membership.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []membership.Member
	for _, m := range l.members {
		for _, r := range roles {
			if m.Role == r {
				out = append(out, m)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ask sends a request to a host's control actor and waits for the reply.
func (l *launcher) ask(ctx context.Context, m membership.Member, req interface{}, timeout time.Duration) (interface{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := l.system.Root.RequestFuture(pidOf(m, actorCtl), req, timeout)
	res, err := f.Result()
	if err != nil {
		return nil, fmt.Errorf("%s: %T: %w", m.Name, req, err)
	}
	return res, nil
}

// askAll asks every member (at most parallel at once) and returns the
// replies in the members' order.
func (l *launcher) askAll(ctx context.Context, ms []membership.Member, req func(m membership.Member) interface{}, timeout time.Duration, parallel int) ([]interface{}, error) {
	out := make([]interface{}, len(ms))
	errs := make([]error, len(ms))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, m membership.Member) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = l.ask(ctx, m, req(m), timeout)
		}(i, m)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// ackError turns the replies' errors (GridAck, GridShaped: any reply with GetError)
// into one error.
func ackError(replies []interface{}) error {
	var errs []error
	for _, r := range replies {
		switch a := r.(type) {
		case interface{ GetError() string }: // GridAck, GridShaped
			if e := a.GetError(); e != "" {
				errs = append(errs, errors.New(e))
			}
		case nil:
		default:
			errs = append(errs, fmt.Errorf("unexpected reply %T", r))
		}
	}
	return errors.Join(errs...)
}

// activate activates the hosts of the given roles, one role after the
// other.
func (l *launcher) activate(ctx context.Context, roles ...string) error {
	for _, r := range roles {
		hs := l.hostsByRole(r)
		replies, err := l.askAll(ctx, hs, func(membership.Member) interface{} { return &msg.GridActivate{} }, 90*time.Second, 32)
		if err := errors.Join(err, ackError(replies)); err != nil {
			return fmt.Errorf("grid: activate %s: %w", r, err)
		}
	}
	return nil
}

// setEpoch tells every host that scenario time 0 is epoch.
func (l *launcher) setEpoch(ctx context.Context, epoch time.Time) error {
	hs := l.hostsByRole(membership.RoleScheduler, membership.RoleKIS, membership.RoleRunner, membership.RoleCluster, membership.RoleNode)
	replies, err := l.askAll(ctx, hs, func(membership.Member) interface{} { return &msg.GridEpoch{UnixNano: epoch.UnixNano()} }, 30*time.Second, 32)
	if err := errors.Join(err, ackError(replies)); err != nil {
		return fmt.Errorf("grid: start the scenario clock: %w", err)
	}
	return nil
}
