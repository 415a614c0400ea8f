package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/scenarios"
)

// Environment of a test process re-executed as an actor host.
const (
	envTestHost = "KOALA_EMU_GRID_TEST_HOST" // the host's NodeMain arguments
)

// TestMain runs this test binary as an actor host when the platform below
// re-executes it (one actor system with remote per process, as in a
// container: protoactor's remote sets gRPC's global logger on start, which
// races between several remotes in one process).
func TestMain(m *testing.M) {
	if args := os.Getenv(envTestHost); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := NodeMain(ctx, strings.Fields(args), os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "host:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// procPlatform runs every actor host as a process (this test binary,
// re-executed) on 127.0.0.1 with any free ports: memberlist, remote, probe
// endpoints and ranks all real, minus containers and kernel shaping (runs
// ask for the userspace shaper).
type procPlatform struct {
	log     io.Writer
	started atomic.Int64

	mu    sync.Mutex
	hosts map[string]*procHost
}

type procHost struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func newProcPlatform(log io.Writer) *procPlatform {
	return &procPlatform{log: log, hosts: map[string]*procHost{}}
}

func (p *procPlatform) Setup(context.Context, []string) (Network, error) {
	return Network{LauncherIP: "127.0.0.1"}, nil
}

func (p *procPlatform) Membership(self membership.Member) (membership.Provider, error) {
	c := membership.DefaultConfig(self)
	c.BindAddr, c.AdvertiseAddr, c.BindPort = "127.0.0.1", "127.0.0.1", 0
	return membership.NewMemberlist(c)
}

func (p *procPlatform) Start(ctx context.Context, hosts []HostSpec, g *Grid) error {
	enc, err := g.Encode()
	if err != nil {
		return err
	}
	for _, h := range hosts {
		args := fmt.Sprintf("--role %s --name %s --cluster %s --ip 127.0.0.1 --port -1 --gossip-port -1", h.Role, h.Name, h.Cluster)
		if h.Cluster == "" {
			args = fmt.Sprintf("--role %s --name %s --ip 127.0.0.1 --port -1 --gossip-port -1", h.Role, h.Name)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envTestHost+"="+args, EnvGrid+"="+enc)
		cmd.Stdout, cmd.Stderr = p.log, p.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no host outlives the test
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start host %s: %w", h.Name, err)
		}
		ph := &procHost{cmd: cmd, done: make(chan struct{})}
		p.mu.Lock()
		p.hosts[h.Name] = ph
		p.mu.Unlock()
		go func() {
			ph.err = cmd.Wait()
			close(ph.done)
		}()
		p.started.Add(1)
	}
	return ctx.Err()
}

func (p *procPlatform) Started() int { return int(p.started.Load()) }

func (p *procPlatform) Exited(context.Context) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for n, h := range p.hosts {
		select {
		case <-h.done:
			out[n] = fmt.Sprint("exited: ", h.err)
		default:
		}
	}
	return out, nil
}

// Close stops every host with SIGTERM (a clean exit is required) and waits.
func (p *procPlatform) Close(ctx context.Context) error {
	p.mu.Lock()
	hosts := p.hosts
	p.hosts = map[string]*procHost{}
	p.mu.Unlock()
	var errs []error
	for _, h := range hosts {
		_ = h.cmd.Process.Signal(syscall.SIGTERM) // fails only for a process already gone
	}
	for n, h := range hosts {
		select {
		case <-h.done:
			var ee *exec.ExitError
			if h.err != nil && !(errors.As(h.err, &ee) && ee.ProcessState.String() == "signal: killed") {
				errs = append(errs, fmt.Errorf("host %s: %w", n, h.err))
			}
		case <-ctx.Done():
			_ = h.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("host %s did not stop: %w", n, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// kill crashes a host (SIGKILL).
func (p *procPlatform) kill(name string) error {
	p.mu.Lock()
	h := p.hosts[name]
	p.mu.Unlock()
	if h == nil {
		return fmt.Errorf("no host %s", name)
	}
	return h.cmd.Process.Kill()
}

const smallScenario = `
name: grid-small
seed: 7
time_scale: 100
topology:
  clusters:
    - {name: alpha, nodes: 3, processors: 2, speed: 1.0, interconnect: myri10g}
    - {name: beta,  nodes: 3, processors: 2, speed: 0.9, interconnect: myri10g}
  links:
    preset: myri10g
    pairs:
      - {a: alpha, b: beta, latency_ms: 0.4, bandwidth_mbps: 185}
workload:
  application: prime
  jobs:
    - {at_s: 0,  application: prime,     size: 3, request: flexible, args: {work_s: 600}}
    - {at_s: 0,  application: wave,      size: 2, request: flexible, args: {steps: 2000}}
    - {at_s: 30, application: allgather, size: 4, request: flexible, args: {iters: 2000}}
    - {at_s: 60, application: prime,     size: 2, request: fixed, components: [{cluster: beta, size: 2}], args: {work_s: 200}}
policy:
  placement: fcm
  scan_period_s: 10
  placement_tries: 100
  startup_delay_s: 2
  probe_period_s: 300
`

func loadPlan(t *testing.T, src string) *scenarios.Plan {
	t.Helper()
	s, err := scenarios.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := s.Expand(launch.ScenarioEnv(), scenarios.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A whole run with every host in this process: every job completes, the
// results directory is complete with backend "docker", the manifest says
// which mechanism every link uses, events come from the hosts.
func TestRunInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	plan := loadPlan(t, smallScenario)
	var logs lockedBuffer
	plat := newProcPlatform(&logs)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress lockedBuffer
	res, err := Run(ctx, plan, launch.Options{Out: dir, Shaper: "userspace", Progress: &progress, ProgressEvery: time.Second}, Config{Platform: plat})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s\nhosts:\n%s", err, progress.String(), logs.String())
	}
	for _, j := range res.Jobs {
		if j.Status != "completed" {
			t.Errorf("job %s: %s %q", j.ID, j.Status, j.Reason)
		}
		if j.Submit < 0 || j.Start < j.Placement || j.Placement < j.Submit || j.Exec() <= 0 {
			t.Errorf("job %s: inconsistent times %+v", j.ID, j)
		}
	}
	if res.Summary.Jobs.Completed != len(plan.Jobs) {
		t.Fatalf("completed %d of %d jobs\n%s", res.Summary.Jobs.Completed, len(plan.Jobs), progress.String())
	}
	if res.Summary.Backend != "docker" || res.Summary.Shaper != "userspace" {
		t.Errorf("summary: backend %q shaper %q", res.Summary.Backend, res.Summary.Shaper)
	}
	if res.Summary.Extra["node_failures"] != 0 {
		t.Errorf("node failures: %v", res.Summary.Extra["node_failures"])
	}
	// No job is submitted before its planned time (scenario time 0 is
	// shared); how late it comes depends on the host and is not asserted.
	for i, j := range res.Jobs {
		if want := plan.Jobs[i].Submit.Seconds(); j.Submit < want-1 {
			t.Errorf("job %s submitted at %.2f s, before its planned %.2f s", j.ID, j.Submit, want)
		}
	}
	if got := len(res.Manifest.Entries); got != 4 {
		t.Errorf("manifest has %d entries, want 4 (2x2 pairs)", got)
	}
	for _, e := range res.Manifest.Entries {
		if e.Mechanism != "userspace" || !strings.Contains(e.Reason, "nodes of "+e.Src) {
			t.Errorf("manifest %s-%s: mechanism %q reason %q", e.Src, e.Dst, e.Mechanism, e.Reason)
		}
	}
	for _, f := range []string{"results.json", "jobs.csv", "events.jsonl", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("results directory lacks %s: %v", f, err)
		}
	}
	ev, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{`"source":"scheduler"`, `"source":"runner"`, `"kind":"probe"`} {
		if !strings.Contains(string(ev), src) {
			t.Errorf("events.jsonl has no %s event", src)
		}
	}
	if !strings.Contains(progress.String(), "joined the membership") {
		t.Errorf("no startup progress:\n%s", progress.String())
	}
	t.Logf("progress:\n%s", progress.String())
	if left, _ := plat.Exited(context.Background()); len(left) != 0 {
		t.Errorf("hosts left behind: %v", left)
	}
}

// A node the membership declares dead mid-run: the job with a rank there
// fails with a reason naming the node, the cluster manager takes the node
// out of service, every other job completes, results.json counts it.
func TestNodeFailureInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	plan := loadPlan(t, `
name: grid-fail
seed: 3
time_scale: 50
topology:
  clusters:
    - {name: alpha, nodes: 3, processors: 2, speed: 1.0, interconnect: myri10g}
    - {name: beta,  nodes: 3, processors: 2, speed: 1.0, interconnect: myri10g}
  links:
    preset: myri10g
workload:
  application: prime
  jobs:
    - {at_s: 0,   application: wave,  size: 3, request: fixed, components: [{cluster: alpha, size: 3}]}
    - {at_s: 0,   application: prime, size: 3, request: fixed, components: [{cluster: beta, size: 3}], args: {work_s: 300}}
    - {at_s: 150, application: prime, size: 2, request: flexible, args: {work_s: 100}}
policy:
  placement: fcm
  scan_period_s: 10
  placement_tries: 100
  startup_delay_s: 1
  probe_period_s: 300
`)
	var logs lockedBuffer
	plat := newProcPlatform(&logs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var once sync.Once
	killed := make(chan error, 1)
	cfg := Config{Platform: plat, OnEvent: func(ev *msg.Event) {
		if ev.Kind == "start" && ev.JobId == "j0001" {
			once.Do(func() { go func() { killed <- plat.kill("alpha-n002") }() })
		}
	}}
	var progress lockedBuffer
	res, err := Run(ctx, plan, launch.Options{Shaper: "userspace", Progress: &progress, ProgressEvery: time.Second}, cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("job j0001 never started, so no node was failed")
	}
	byID := map[string]string{}
	for _, j := range res.Jobs {
		byID[j.ID] = j.Status + ": " + j.Reason
		switch j.ID {
		case "j0001":
			if j.Status != "failed" || !strings.HasPrefix(j.Reason, "node alpha-n002 of cluster alpha went down") {
				t.Errorf("j0001: %s %q, want failed by the node", j.Status, j.Reason)
			}
		default:
			if j.Status != "completed" {
				t.Errorf("%s: %s %q, want completed", j.ID, j.Status, j.Reason)
			}
		}
	}
	if len(res.Jobs) != len(plan.Jobs) {
		t.Errorf("%d of %d jobs recorded: %v", len(res.Jobs), len(plan.Jobs), byID)
	}
	if res.Summary.Extra["node_failures"] != 1 || res.Summary.Extra["jobs_failed_by_node_failure"] != 1 {
		t.Errorf("extra: %v", res.Summary.Extra)
	}
	if !strings.Contains(progress.String(), "node alpha-n002 of alpha fail") {
		t.Errorf("progress does not report the failure:\n%s", progress.String())
	}
	if !strings.Contains(logs.String(), "node alpha-n002 failed") {
		t.Errorf("the cluster manager's host did not log the failure:\n%s", logs.String())
	}
}

func TestGridEncodeDecode(t *testing.T) {
	plan := loadPlan(t, smallScenario)
	g := GridFromPlan(plan, 1234)
	g.Launcher = "10.1.0.1:4000"
	g.Subnets = map[string][]netip.Prefix{"alpha": {netip.MustParsePrefix("10.1.1.0/24")}}
	enc, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeGrid(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.Launcher != g.Launcher || back.ProbeBytes != 1234 || len(back.Clusters) != 2 || back.Clusters[1].Speed != 0.9 ||
		back.Policy.ScanPeriod != 10*time.Second || back.Subnets["alpha"][0] != g.Subnets["alpha"][0] {
		t.Errorf("round trip changed the grid: %+v", back)
	}
	l, err := back.Links.Link("alpha", "beta")
	if err != nil || l.Latency != 400*time.Microsecond {
		t.Errorf("alpha-beta link after round trip: %v %v", l, err)
	}
	if _, err := DecodeGrid(`{"launcher":""}`); err == nil {
		t.Error("a grid without launcher decoded")
	}
	if _, err := DecodeGrid(`{"launcher":"x","unknown":1}`); err == nil {
		t.Error("an unknown field decoded")
	}
}

func TestSiteOf(t *testing.T) {
	sites := []string{"alpha", "beta", "gamma"}
	fixed := scenarios.Job{Components: []scenarios.Component{{Cluster: "gamma", Size: 2}}}
	if s := SiteOf(fixed, 0, sites); s != "gamma" {
		t.Errorf("fixed job on gamma: site %q", s)
	}
	for i, want := range []string{"alpha", "beta", "gamma", "alpha"} {
		if s := SiteOf(scenarios.Job{}, i, sites); s != want {
			t.Errorf("job %d: site %q, want %q", i, s, want)
		}
	}
}

func TestAddresses(t *testing.T) {
	control := netip.MustParsePrefix("10.200.0.0/24")
	subs := map[string]netip.Prefix{"a": netip.MustParsePrefix("10.200.1.0/24"), "b": netip.MustParsePrefix("10.200.2.0/24")}
	g := &Grid{Clusters: []Cluster{{Name: "a", Nodes: 2}, {Name: "b", Nodes: 1}}, Sites: []string{"a", "b"}}
	ips, err := addresses(control, subs, hostsOf(g))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"scheduler": "10.200.0.2", "kis": "10.200.0.3", "runner-a": "10.200.0.10", "runner-b": "10.200.0.11",
		"cluster-a": "10.200.1.1", "a-n001": "10.200.1.2", "a-n002": "10.200.1.3", "cluster-b": "10.200.2.1", "b-n001": "10.200.2.2"}
	if len(ips) != len(want) {
		t.Errorf("%d addresses, want %d: %v", len(ips), len(want), ips)
	}
	for n, w := range want {
		if ips[n].String() != w {
			t.Errorf("%s: %v, want %s", n, ips[n], w)
		}
	}
	big := &Grid{Clusters: []Cluster{{Name: "a", Nodes: 254}}}
	if _, err := addresses(control, subs, hostsOf(big)); err == nil {
		t.Error("254 nodes fit a /24 with its manager")
	}
	if _, err := addresses(control, subs, []HostSpec{{Name: "x", Role: membership.RoleNode, Cluster: "zz"}}); err == nil {
		t.Error("a node of an unknown cluster got an address")
	}
}

func TestEpochClock(t *testing.T) {
	c := clock.NewScaled(20)
	epoch := time.Now().Add(-10 * time.Second)
	c.RestartAt(epoch)
	if now := c.Now(); now < 200*time.Second || now > 210*time.Second {
		t.Errorf("10 s after the epoch at factor 20: scenario %v", now)
	}
	if w := c.ToWall(20 * time.Second); w != time.Second {
		t.Errorf("ToWall(20s) = %v", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context: %v", err)
	}
}

// failingPlatform cannot set up a run; it records that it was closed.
type failingPlatform struct {
	procPlatform
	closed bool
}

func (p *failingPlatform) Setup(context.Context, []string) (Network, error) {
	return Network{}, errors.New("no image to run")
}

func (p *failingPlatform) Close(context.Context) error {
	p.closed = true
	return nil
}

// A platform that cannot set up the run fails the run with its error, and
// whatever it may have made is closed.
func TestRunSetupFails(t *testing.T) {
	plan := loadPlan(t, smallScenario)
	plat := &failingPlatform{}
	_, err := Run(context.Background(), plan, launch.Options{Out: t.TempDir(), Shaper: "userspace"}, Config{Platform: plat})
	if err == nil || !strings.Contains(err.Error(), "no image to run") {
		t.Fatalf("run: %v, want the platform's setup error", err)
	}
	if !plat.closed {
		t.Error("the platform was not closed after its setup failed")
	}
}

// silentPlatform starts its hosts slowly (one more every 100 ms) and none
// of them ever joins the membership.
type silentPlatform struct {
	procPlatform
	began time.Time
	total int
}

func (p *silentPlatform) Start(ctx context.Context, hosts []HostSpec, _ *Grid) error {
	p.mu.Lock()
	p.began, p.total = time.Now(), len(hosts)
	p.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (p *silentPlatform) Started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.began.IsZero() {
		return 0
	}
	return min(p.total, int(time.Since(p.began)/(100*time.Millisecond)))
}

// A start fails when it stops making progress, not at a fixed deadline:
// hosts that keep starting keep it going past StartStall, and once they
// stop (none joining) it fails, naming the counts and the missing hosts.
func TestStartStalls(t *testing.T) {
	plan := loadPlan(t, smallScenario)
	plat := &silentPlatform{procPlatform: *newProcPlatform(io.Discard)}
	stall := 500 * time.Millisecond
	var progress lockedBuffer
	_, err := Run(context.Background(), plan, launch.Options{Out: t.TempDir(), Shaper: "userspace", Progress: &progress},
		Config{Platform: plat, StartStall: stall})
	if err == nil {
		t.Fatal("a start where no host joins succeeded")
	}
	n := plat.total
	if time.Duration(n)*100*time.Millisecond <= stall {
		t.Fatalf("the scenario has %d hosts: too few to start for longer than the stall", n)
	}
	for _, want := range []string{"no progress for 500ms", fmt.Sprintf("(%d/%d containers started", n, n),
		fmt.Sprintf("at most 0/%d in the membership", n), fmt.Sprintf("%d hosts are not in the membership", n)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
