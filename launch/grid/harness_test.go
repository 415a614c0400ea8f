package grid

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/cachetest"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
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
	os.Exit(cachetest.Run(m))
}

// procPlatform runs every actor host as a process (this test binary,
// re-executed) on 127.0.0.1 with any free ports: memberlist, remote, probe
// endpoints and ranks all real, minus containers and kernel shaping (runs
// ask for the userspace shaper).
type procPlatform struct {
	procs
}

func newProcPlatform(log io.Writer) *procPlatform {
	return &procPlatform{procs: procs{log: log}}
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
		if err := p.start(h.Name, cmd); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (p *procPlatform) Exited(context.Context) (map[string]string, error) { return p.exited(), nil }

// Close stops every host with SIGTERM (a clean exit is required) and waits.
func (p *procPlatform) Close(ctx context.Context) error { return p.stop(ctx, true) }

// loadPlan expands the scenario testdata/name.
func loadPlan(t *testing.T, name string) *scenarios.Plan {
	t.Helper()
	s, err := scenarios.Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := s.Expand(wiring.ScenarioEnv(), scenarios.Overrides{})
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

// procTest is an end-to-end run of a testdata scenario on the process
// platform, with the userspace shaper and progress every second.
type procTest struct {
	plan           *scenarios.Plan
	plat           *procPlatform
	logs, progress lockedBuffer
}

// newProcTest loads testdata/scenario; it skips the test with -short.
func newProcTest(t *testing.T, scenario string) *procTest {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	p := &procTest{plan: loadPlan(t, scenario)}
	p.plat = newProcPlatform(&p.logs)
	return p
}

// run runs the plan with results in out ("" for none), within 3 minutes.
func (p *procTest) run(out string, cfg Config) (*wiring.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg.Platform = p.plat
	return Run(ctx, p.plan, wiring.Options{Out: out, Shaper: "userspace", Progress: &p.progress, ProgressEvery: time.Second}, cfg)
}
