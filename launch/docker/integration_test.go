//go:build integration

package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
)

// testImage is the sleeper image shared by the tests of this file; TestMain
// builds it and removes its tag at the end.
var testImage string

func TestMain(m *testing.M) {
	if os.Getenv(unreachableChild) != "" {
		os.Exit(m.Run()) // child of TestDaemonUnreachable: no Docker here
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	img, err := BuildImage(ctx, ImageOptions{Package: "./testdata/sleeper", Repo: "koala-emu-test"})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build test image:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "test image %s ready in %v\n", img, time.Since(start).Round(time.Millisecond))
	testImage = img
	hadReaperNet := exec.Command("docker", "network", "inspect", "reaper_default").Run() == nil
	code := m.Run()
	if !hadReaperNet && exec.Command("docker", "network", "inspect", "reaper_default").Run() == nil {
		fmt.Fprintln(os.Stderr, "testcontainers created the unlabelled network reaper_default")
		code = 1
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	if err := RemoveImage(rctx, img); err != nil {
		fmt.Fprintln(os.Stderr, "remove test image:", err)
		code = 1
	}
	rcancel()
	os.Exit(code)
}

// newTestRun creates a run and guarantees, at the end of the test, that it
// is closed and nothing labelled with its ID is left.
func newTestRun(t *testing.T, opts Options) *Run {
	t.Helper()
	opts.Image = testImage
	if opts.ID == "" {
		opts.ID = "it-" + NewRunID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := NewRun(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		assertNothingLeft(t, r.ID)
	})
	return r
}

// assertNothingLeft checks with the docker CLI that no container or
// network carries the run's label.
func assertNothingLeft(t *testing.T, runID string) {
	t.Helper()
	filter := "label=" + LabelRun + "=" + runID
	for _, args := range [][]string{
		{"ps", "-a", "-q", "--filter", filter},
		{"network", "ls", "-q", "--filter", filter},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Errorf("docker %v: %v: %s", args, err, out)
			continue
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("docker %v: left behind:\n%s", args, s)
		}
	}
}

// waitLog waits until the container's output contains want.
func waitLog(t *testing.T, c *Container, want string, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := c.Logs(ctx)
		if err == nil && strings.Contains(out, want) {
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %q not in output within %v (err %v):\n%s", c.Name, want, within, err, out)
		case <-tick.C:
		}
	}
}

func TestRunLifecycle(t *testing.T) {
	var (
		progMu   sync.Mutex
		progress [][2]int
	)
	r := newTestRun(t, Options{
		Clusters: []string{"vrije", "leiden"},
		Progress: func(up, total int) {
			progMu.Lock()
			progress = append(progress, [2]int{up, total})
			progMu.Unlock()
		},
		Labels: map[string]string{"koala-emu.owner.pid": "1"},
	})
	specs, leidenN2 := lifecycleSpecs(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	cs, err := r.Start(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("5 containers up in %v", time.Since(start).Round(time.Millisecond))
	if len(cs) != len(specs) {
		t.Fatalf("%d containers, want %d", len(cs), len(specs))
	}
	if cs[4].IP != leidenN2 {
		t.Fatalf("assigned address %v, want %v", cs[4].IP, leidenN2)
	}
	progMu.Lock()
	if len(progress) != 5 || progress[4] != [2]int{5, 5} {
		t.Errorf("progress calls %v, want 1/5 .. 5/5", progress)
	}
	progMu.Unlock()
	if got := r.Containers(); len(got) != 5 || r.Container("kis") != cs[0] {
		t.Errorf("run lists %d containers", len(got))
	}
	for _, c := range cs {
		checkLifecycleContainer(ctx, t, r, c)
	}
	waitLog(t, cs[1], "tun ok", 10*time.Second)
	checkStatsAndKill(ctx, t, r, cs)

	// A second Start cannot reuse a name.
	if _, err := r.Start(ctx, []ContainerSpec{{Name: "kis"}}); err == nil {
		t.Errorf("duplicate name accepted")
	}
	// Close happens in the cleanup, which asserts nothing is left.
}

// lifecycleSpecs are five containers over the control subnet and two
// clusters, each greeting the others; the last one gets the first free
// leiden address (returned) and waits on a TCP port.
func lifecycleSpecs(t *testing.T, r *Run) ([]ContainerSpec, netip.Addr) {
	t.Helper()
	subs := r.ClusterSubnets()
	if !r.Subnet().Contains(subs["vrije"].Addr()) || !r.Subnet().Contains(subs["leiden"].Addr()) || subs["vrije"] == subs["leiden"] {
		t.Fatalf("cluster subnets %v not distinct /24s of %v", subs, r.Subnet())
	}
	host := func(p netip.Prefix, n byte) netip.Addr {
		b := p.Addr().As4()
		b[3] = n
		return netip.AddrFrom4(b)
	}
	specs := []ContainerSpec{
		{Name: "kis", Role: "kis", IP: host(r.ControlSubnet(), 10)},
		{Name: "vrije-n1", Role: "node", Cluster: "vrije", IP: host(subs["vrije"], 11), NetAdmin: true, TUN: true},
		{Name: "vrije-n2", Role: "node", Cluster: "vrije", IP: host(subs["vrije"], 12), NetAdmin: true},
		{Name: "leiden-n1", Role: "node", Cluster: "leiden", IP: host(subs["leiden"], 21), NetAdmin: true},
		{Name: "leiden-n2", Role: "node", Cluster: "leiden", NetAdmin: true, Ready: Readiness{TCPPort: 7000}},
	}
	// leiden-n2 gets the first free leiden address; the plan hands out .1.
	leidenN2 := host(subs["leiden"], 1)
	addrs := []string{}
	for _, s := range specs {
		ip := s.IP
		if !ip.IsValid() {
			ip = leidenN2
		}
		addrs = append(addrs, net.JoinHostPort(ip.String(), "7000"))
	}
	for i := range specs {
		peers := slices.Delete(slices.Clone(addrs), i, i+1)
		specs[i].Args = []string{"-listen", ":7000", "-peers", strings.Join(peers, ",")}
		if specs[i].TUN {
			specs[i].Args = append(specs[i].Args, "-tun")
		}
	}
	return specs, leidenN2
}

// checkLifecycleContainer checks that a container has its fixed address,
// reaches its peers and is reached from this host, is on the run network
// only, unprivileged, with NET_ADMIN for nodes only, and labelled.
func checkLifecycleContainer(ctx context.Context, t *testing.T, r *Run, c *Container) {
	t.Helper()
	waitLog(t, c, "addr "+c.IP.String()+"\n", 30*time.Second)
	out := waitLog(t, c, "reached all", 90*time.Second)
	if !strings.Contains(out, "reached all peers") {
		t.Errorf("%s did not reach every peer:\n%s", c.Name, out)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.IP.String(), "7000"), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s at %v: %v", c.Name, c.IP, err)
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if want := "hello from " + c.Name + "\n"; line != want {
		t.Errorf("%s greets %q, want %q", c.Name, line, want)
	}
	info, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nets := info.NetworkSettings.Networks; len(nets) != 1 || nets[r.Network] == nil || nets[r.Network].IPAddress != c.IP {
		t.Errorf("%s networks %v, want only %s at %v", c.Name, nets, r.Network, c.IP)
	}
	if info.HostConfig.Privileged {
		t.Errorf("%s is privileged", c.Name)
	}
	hasNetAdmin := slices.Contains(info.HostConfig.CapAdd, "NET_ADMIN") || slices.Contains(info.HostConfig.CapAdd, "CAP_NET_ADMIN")
	if hasNetAdmin != (c.Role == "node") {
		t.Errorf("%s: CapAdd %v", c.Name, info.HostConfig.CapAdd)
	}
	if l := info.Config.Labels; l[LabelRun] != r.ID || l[LabelRole] != c.Role || l[LabelCluster] != c.Cluster || l[LabelName] != c.Name ||
		l["koala-emu.owner.pid"] != "1" {
		t.Errorf("%s labels %v", c.Name, l)
	}
}

// checkStatsAndKill samples one container's stats, kills a node and checks
// that it alone stopped and that the run's stats leave it out.
func checkStatsAndKill(ctx context.Context, t *testing.T, r *Run, cs []*Container) {
	t.Helper()
	statStart := time.Now()
	st, err := cs[0].Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one stats sample took %v", time.Since(statStart).Round(time.Millisecond))
	if st.Memory == 0 || st.Memory > st.MemoryRaw || st.PIDs == 0 {
		t.Errorf("implausible stats %+v", st)
	}
	t.Logf("kis container: %.2f MiB in use (%.2f MiB raw), %d pids",
		float64(st.Memory)/(1<<20), float64(st.MemoryRaw)/(1<<20), st.PIDs)
	if err := cs[2].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 30*time.Second, "the killed container to stop", func() bool {
		running, err := cs[2].Running(ctx)
		return err == nil && !running
	})
	if running, err := cs[3].Running(ctx); err != nil || !running {
		t.Errorf("untouched container running=%v err=%v", running, err)
	}
	all, err := r.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all[cs[2].Name]; len(all) != 4 || ok {
		t.Errorf("run stats cover %d containers (killed one included: %v), want the 4 running", len(all), ok)
	}
}

func TestStartFailureRemovesBatch(t *testing.T) {
	r := newTestRun(t, Options{Clusters: []string{"delft"}, ReadyTimeout: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first, err := r.Start(ctx, []ContainerSpec{{Name: "scheduler", Role: "scheduler"}})
	if err != nil {
		t.Fatal(err)
	}
	bad := []ContainerSpec{
		{Name: "delft-n1", Cluster: "delft", Role: "node"},
		{Name: "delft-n2", Cluster: "delft", Role: "node", Args: []string{"-exit", "3"}},
		{Name: "delft-n3", Cluster: "delft", Role: "node"},
	}
	_, err = r.Start(ctx, bad)
	if err == nil {
		t.Fatal("start with a crashing container: want an error")
	}
	if !strings.Contains(err.Error(), "delft-n2") || !strings.Contains(err.Error(), "exiting early on request") {
		t.Errorf("error does not name the container or show its output: %v", err)
	}
	t.Logf("start error: %v", err)

	out, lerr := exec.Command("docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "label="+LabelRun+"="+r.ID).CombinedOutput()
	if lerr != nil {
		t.Fatalf("docker ps: %v: %s", lerr, out)
	}
	if got, want := strings.TrimSpace(string(out)), ContainerName(r.ID, "scheduler"); got != want {
		t.Errorf("after the failed batch: containers %q, want only %q", got, want)
	}
	if running, err := first[0].Running(ctx); err != nil || !running {
		t.Errorf("earlier container running=%v err=%v", running, err)
	}

	// The names and addresses of the failed batch are free again.
	bad[1].Args = nil
	cs, err := r.Start(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].IP != netip.MustParsePrefix(r.ClusterSubnets()["delft"].String()).Addr().Next() {
		t.Errorf("delft-n1 at %v, want the first host of %v", cs[0].IP, r.ClusterSubnets()["delft"])
	}
}

func TestStartCancelledRemovesBatch(t *testing.T) {
	r := newTestRun(t, Options{Parallelism: 2})
	ctx, cancel := context.WithCancel(context.Background())
	specs := make([]ContainerSpec, 6)
	for i := range specs {
		specs[i] = ContainerSpec{Name: fmt.Sprintf("c%d", i), Role: "runner"}
	}
	n := 0
	r.opts.Progress = func(up, total int) {
		n = up
		if up == 2 {
			cancel() // Ctrl-C in the middle of startup
		}
	}
	_, err := r.Start(ctx, specs)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start: %v, want context.Canceled", err)
	}
	if n < 2 {
		t.Fatalf("cancelled before 2 containers were up (%d)", n)
	}
	out, lerr := exec.Command("docker", "ps", "-a", "-q", "--filter", "label="+LabelRun+"="+r.ID).CombinedOutput()
	if lerr != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left after a cancelled start (%v): %s", lerr, out)
	}
}

func TestCleanRunRemovesLeftovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := NewRun(ctx, Options{ID: "it-" + NewRunID(), Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, []ContainerSpec{{Name: "a"}, {Name: "b", Ready: Readiness{None: true}}}); err != nil {
		_ = r.Close(ctx)
		t.Fatal(err)
	}
	// Pretend the process crashed: no Close, only the clean command.
	n, err := CleanRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("clean removed %d objects, want 2 containers and 1 network", n)
	}
	assertNothingLeft(t, r.ID)
	if err := r.Close(ctx); err != nil {
		t.Errorf("close after clean: %v", err)
	}
	if n, err := CleanRun(ctx, r.ID); err != nil || n != 0 {
		t.Errorf("second clean removed %d, err %v", n, err)
	}
}

func TestNewRunRejectsMissingImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := NewRun(ctx, Options{Image: "koala-emu-test:does-not-exist"})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing image: %v", err)
	}
}

const unreachableChild = "KOALA_DOCKER_UNREACHABLE_CHILD"

// TestDaemonUnreachable hides the Docker socket in a private mount
// namespace and checks the error a user gets.
func TestDaemonUnreachable(t *testing.T) {
	if os.Getenv(unreachableChild) != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := NewRun(ctx, Options{Image: "koala-emu:any"})
		if !errors.Is(err, ErrDaemon) || !strings.HasPrefix(err.Error(), "docker backend: cannot reach the Docker daemon: ") {
			t.Fatalf("NewRun without Docker: %v", err)
		}
		_, err = BuildImage(ctx, ImageOptions{Binary: os.Args[0]})
		if !errors.Is(err, ErrDaemon) {
			t.Fatalf("BuildImage without Docker: %v", err)
		}
		if _, err := ListRuns(ctx); !errors.Is(err, ErrDaemon) {
			t.Fatalf("ListRuns without Docker: %v", err)
		}
		fmt.Println("child error:", err)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to hide the Docker socket in a mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	script := `for s in /var/run/docker.sock /run/docker.sock; do [ -e "$s" ] && mount --bind /dev/null "$s"; done; exec "$0" -test.run='^TestDaemonUnreachable$' -test.v`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, os.Args[0])
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "DOCKER_HOST=") || strings.HasPrefix(e, "TESTCONTAINERS_HOST_OVERRIDE=")
	}), unreachableChild+"=1", "HOME="+t.TempDir(), "XDG_RUNTIME_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child output:\n%s", out)
}

// TestMeasureStart40 starts 40 containers (KOALA_MEASURE_COUNT) with
// bounded parallelism (KOALA_MEASURE_PARALLELISM, a comma list) and reports
// the time and each container's memory. Figures only, no asserts on them.
func TestMeasureStart40(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	pars := []int{8}
	if env := os.Getenv("KOALA_MEASURE_PARALLELISM"); env != "" { // e.g. "4,8,16"
		pars = nil
		for _, f := range strings.Split(env, ",") {
			var p int
			if _, err := fmt.Sscan(f, &p); err != nil || p <= 0 {
				t.Fatalf("KOALA_MEASURE_PARALLELISM=%q", env)
			}
			pars = append(pars, p)
		}
	}
	count := 40
	if env := os.Getenv("KOALA_MEASURE_COUNT"); env != "" { // at most 254: one cluster subnet
		if _, err := fmt.Sscan(env, &count); err != nil || count <= 0 || count > 254 {
			t.Fatalf("KOALA_MEASURE_COUNT=%q", env)
		}
	}
	for _, par := range pars {
		r := newTestRun(t, Options{Clusters: []string{"vrije"}, Parallelism: par})
		specs := make([]ContainerSpec, count)
		for i := range specs {
			specs[i] = ContainerSpec{Name: fmt.Sprintf("vrije-n%03d", i+1), Role: "node", Cluster: "vrije", NetAdmin: true}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t0 := time.Now()
		defer func() { t.Logf("whole measurement %v", time.Since(t0).Round(time.Millisecond)) }()
		start := time.Now()
		cs, err := r.Start(ctx, specs)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		up := time.Since(start)
		statsStart := time.Now()
		stats, err := r.Stats(ctx)
		if err != nil || len(stats) != len(cs) {
			cancel()
			t.Fatalf("stats of %d containers, err %v", len(stats), err)
		}
		mem := make([]float64, 0, len(cs))
		for _, st := range stats {
			mem = append(mem, float64(st.Memory)/(1<<20))
		}
		statsTook := time.Since(statsStart)
		sort.Float64s(mem)
		sum := 0.0
		for _, m := range mem {
			sum += m
		}
		closeStart := time.Now()
		if err := r.Close(ctx); err != nil {
			t.Error(err)
		}
		cancel()
		t.Logf("parallelism %d: %d containers ready in %v (%.0f ms each on average); memory in use per container: min %.2f, median %.2f, mean %.2f, max %.2f MiB; removed in %v; stats sampled in %v",
			par, count, up.Round(time.Millisecond), float64(up.Milliseconds())/float64(count), mem[0], mem[len(mem)/2], sum/float64(len(mem)), mem[len(mem)-1],
			time.Since(closeStart).Round(time.Millisecond), statsTook.Round(time.Millisecond))
	}
}

func TestBuildImageReuseAndRebuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	out, err := exec.Command("docker", "images", "-q", "--filter", "dangling=true").CombinedOutput()
	if err != nil {
		t.Fatalf("docker images: %v: %s", err, out)
	}
	danglingBefore := len(strings.TrimSpace(string(out))) > 0

	// Same package, default content-hash tag: found, not rebuilt.
	var log strings.Builder
	ref, err := BuildImage(ctx, ImageOptions{Package: "./testdata/sleeper", Repo: "koala-emu-test", BuildLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	if ref != testImage {
		t.Errorf("rebuilt under a new tag %s, want %s", ref, testImage)
	}
	if strings.Contains(log.String(), "Step") {
		t.Errorf("image was rebuilt although it exists:\n%s", log.String())
	}

	// Prebuilt binary with an explicit tag: rebuilt only when the binary
	// is newer than the image.
	bin := t.TempDir() + "/koala-emu"
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/sleeper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	tag := "it-" + NewRunID()
	opts := ImageOptions{Binary: bin, Repo: "koala-emu-test", Tag: tag}
	steps := func() string {
		t.Helper()
		var b strings.Builder
		o := opts
		o.BuildLog = &b
		got, err := BuildImage(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if got != "koala-emu-test:"+tag {
			t.Fatalf("ref %s", got)
		}
		return b.String()
	}
	t.Cleanup(func() {
		if err := RemoveImage(context.Background(), "koala-emu-test:"+tag); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(steps(), "Step") {
		t.Errorf("first build of %s did not build", tag)
	}
	if out := steps(); strings.Contains(out, "Step") {
		t.Errorf("image newer than the binary was rebuilt:\n%s", out)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, future, future); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(steps(), "Step") {
		t.Errorf("binary newer than the image did not trigger a rebuild")
	}

	checkTagMoves(t, bin, tag, future.Add(time.Hour), steps, danglingBefore)

	checkBuildRefusals(ctx, t, tag)
}

// checkBuildRefusals: a dynamically linked binary is refused with a clear
// message; a package that does not compile fails with the compiler's.
func checkBuildRefusals(ctx context.Context, t *testing.T, tag string) {
	t.Helper()
	if _, err := BuildImage(ctx, ImageOptions{Binary: "/bin/sh", Repo: "koala-emu-test", Tag: tag + "-sh"}); err == nil ||
		!strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("dynamic binary: %v", err)
	}
	if _, err := BuildImage(ctx, ImageOptions{Package: "./does/not/exist", Repo: "koala-emu-test"}); err == nil ||
		!strings.Contains(err.Error(), "go build") {
		t.Errorf("bad package: %v", err)
	}
}

// checkTagMoves gives the binary new content and a newer time, rebuilds
// (steps) and checks that the tag moved and the replaced image is gone,
// leaving no dangling image that was not there before.
func checkTagMoves(t *testing.T, bin, tag string, mtime time.Time, steps func() string, danglingBefore bool) {
	t.Helper()
	idOf := func(ref string) string {
		out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	before := idOf("koala-emu-test:" + tag)
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("different content"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	steps()
	if after := idOf("koala-emu-test:" + tag); after == "" || after == before {
		t.Errorf("tag did not move: before %s after %s", before, after)
	}
	if idOf(before) != "" {
		t.Errorf("replaced image %s left dangling", before)
	}
	if out, err := exec.Command("docker", "images", "-q", "--filter", "dangling=true").CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 && !danglingBefore {
		t.Errorf("dangling images after a rebuild (%v): %s", err, out)
	}
}

func TestCloseDuringStart(t *testing.T) {
	r := newTestRun(t, Options{Parallelism: 2})
	specs := make([]ContainerSpec, 6)
	for i := range specs {
		specs[i] = ContainerSpec{Name: fmt.Sprintf("c%d", i), Role: "runner"}
	}
	closed := make(chan error, 1)
	var once sync.Once
	r.opts.Progress = func(up, total int) {
		once.Do(func() {
			go func() { // Ctrl-C handler closing the run from elsewhere
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				closed <- r.Close(ctx)
			}()
		})
	}
	_, err := r.Start(context.Background(), specs)
	if err == nil {
		t.Fatal("start finished although the run was closed during it")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("close did not return")
	}
	assertNothingLeft(t, r.ID)
	if _, err := r.Start(context.Background(), specs[:1]); err == nil {
		t.Error("start on a closed run succeeded")
	}
}
