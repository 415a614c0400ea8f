//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/cachetest"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/scenarios"
)

// image is the koala-emu image the docker tests run, built from
// ./cmd/koala-emu by the first test that needs it (dockerImage; a run of
// netns tests only needs no Docker); TestMain removes its tag at the end.
var (
	imageOnce sync.Once
	image     string
	imageErr  error
)

// dockerImage builds the image once and returns its reference.
func dockerImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		image, imageErr = docker.BuildImage(ctx, docker.ImageOptions{Package: "./cmd/koala-emu", Dir: "..", Repo: "koala-emu-it"})
	})
	if imageErr != nil {
		t.Fatalf("build the koala-emu image: %v", imageErr)
	}
	return image
}

func TestMain(m *testing.M) {
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "integration tests need root (kernel shaping in containers): skipped")
		os.Exit(0)
	}
	code := cachetest.Run(m)
	if image == "" {
		os.Exit(code)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	if err := docker.RemoveImage(rctx, image); err != nil {
		fmt.Fprintln(os.Stderr, "remove the test image:", err)
		code = 1
	}
	rcancel()
	if out, err := exec.Command("docker", "images", "-q", image).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		fmt.Fprintf(os.Stderr, "image tag %s left behind: %s %v\n", image, out, err)
		code = 1
	}
	os.Exit(code)
}

func runID(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "it-" + hex.EncodeToString(b[:])
}

// assertNothingLeft checks with the docker CLI that no container or
// network carries the run's label.
func assertNothingLeft(t *testing.T, id string) {
	t.Helper()
	filter := "label=" + docker.LabelRun + "=" + id
	for _, args := range [][]string{
		{"ps", "-a", "-q", "--filter", filter},
		{"network", "ls", "-q", "--filter", filter},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Errorf("docker %v: %v: %s", args, err, out)
			continue
		}
		for _, left := range strings.Fields(string(out)) {
			if args[0] == "network" && staleNetwork(t, left) {
				continue
			}
			t.Errorf("docker %v: left behind: %s", args, left)
		}
	}
}

// staleNetwork reports whether network id is one the daemon refuses to
// remove for endpoints no container holds (moby/moby#42119, a Docker
// Engine bug the run reports as a warning): it has no container and its
// removal, tried here, still fails with "active endpoints". A network the
// run merely forgot is removed here and reported as left behind.
func staleNetwork(t *testing.T, id string) bool {
	t.Helper()
	n, err := exec.Command("docker", "network", "inspect", "-f", "{{len .Containers}}", id).Output()
	if err != nil || strings.TrimSpace(string(n)) != "0" {
		return false
	}
	out, err := exec.Command("docker", "network", "rm", id).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "active endpoints") {
		return false
	}
	t.Logf("network %s kept by the daemon's stale endpoint count (moby/moby#42119; a daemon restart clears it): tolerated", id)
	return true
}

func plan(t *testing.T, ref string, src []byte) *scenarios.Plan {
	t.Helper()
	var s *scenarios.Scenario
	var err error
	if src != nil {
		s, err = scenarios.Parse(src, ref)
	} else {
		s, err = scenarios.LoadBuiltin(ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Expand(launch.ScenarioEnv(), scenarios.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer collects progress output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// calibrate --backend docker: two node containers per cluster, every pair
// of das3-coalloc measured through the kernel shaping. It comes first in
// this file (go test runs a package's tests in order): after a run of
// hundreds of containers the kernel goes on tearing down their network
// namespaces for a while, and the machine is busy.
func TestDockerCalibrate(t *testing.T) {
	img := dockerImage(t)
	p := plan(t, "das3-coalloc", nil)
	id := runID(t)
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rows, sum, info, err := grid.Calibrate(ctx, p.Links, netem.Auto,
		grid.CalibrateOptions{Docker: grid.DockerOptions{Image: img, ID: id}, Dilation: p.Dilation, Log: &log})
	assertNothingLeft(t, id)
	if err != nil {
		t.Fatalf("calibrate: %v\n%s", err, log.String())
	}
	var table strings.Builder
	netem.PrintCalibration(&table, rows, sum)
	t.Logf("mechanism %s (%s)\n%s", info.Mechanism, info.Reason, table.String())
	if info.Mechanism != kernel.NameHTB && info.Mechanism != kernel.NameNetem {
		t.Errorf("auto picked %q in the containers, want a kernel mechanism: %s", info.Mechanism, info.Reason)
	}
	if want := 10; len(rows) != want {
		t.Errorf("%d pairs measured, want %d", len(rows), want)
	}
	// Every link is judged as the command judges it, at the scenario's
	// dilation (as a run shapes it): bandwidth within 5 % and latency within
	// max(10 %, 20 µs) of the target on every pair, and no dropped byte.
	// The delay lines' p99 release lateness (the command's 50 µs gate) is a
	// timing figure of the machine at the moment rather than of the code: it
	// is logged here and reported from measured runs.
	for _, r := range rows {
		if math.Abs(r.BwErr) > netem.BandwidthTolerance {
			t.Errorf("%s-%s: bandwidth %+.1f %% off its target", r.Src, r.Dst, 100*r.BwErr)
		}
		if r.Verdict != netem.VerdictPass && r.Verdict != netem.VerdictFloor {
			t.Errorf("%s-%s: %s: bandwidth %+.1f %%, latency %+.1f %%", r.Src, r.Dst, r.Verdict, 100*r.BwErr, 100*r.LatErr)
		}
		if r.Drops != 0 {
			t.Errorf("%s-%s: %d drops", r.Src, r.Dst, r.Drops)
		}
		t.Logf("%s-%s: p99 release lateness %v", r.Src, r.Dst, r.Lateness.P99)
	}
	if sum.Failed {
		t.Logf("the command's verdict (lateness gate included): %s", sum.Reason)
	}
}

// das3-smoke with every actor in its own container: 204 node containers,
// 4 cluster managers, scheduler, information service, 4 runner sites.
func TestDockerSmoke(t *testing.T) {
	img := dockerImage(t)
	p := plan(t, "das3-smoke", nil)
	id := runID(t)
	dir := t.TempDir()
	var progress syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// As `koala-emu run` does: the scenario's dilation auto and wall budget
	// resolved for this host before the run.
	opts, err := launch.Prepare(ctx, "docker", p, launch.Options{Out: dir, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	res, err := grid.Run(ctx, p, opts, grid.Config{Docker: grid.DockerOptions{Image: img, ID: id}})
	assertNothingLeft(t, id)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(progress.String(), 40))
	}
	t.Logf("progress (tail):\n%s", tail(progress.String(), 12))
	if res.Summary.Jobs.Submitted != len(p.Jobs) {
		t.Fatalf("submitted %d of %d jobs", res.Summary.Jobs.Submitted, len(p.Jobs))
	}
	for _, j := range res.Jobs {
		switch {
		case j.Status == "completed":
			if j.Exec() <= 0 || j.Start < j.Placement || j.Placement < j.Submit {
				t.Errorf("job %s: inconsistent times %+v", j.ID, j)
			}
		case j.Status == "failed" && j.Reason != "":
			t.Logf("job %s failed: %s", j.ID, j.Reason)
		default:
			t.Errorf("job %s ended %q without a reason", j.ID, j.Status)
		}
	}
	if res.Summary.Jobs.Completed == 0 {
		t.Fatal("no job completed")
	}
	if res.Summary.Backend != "docker" {
		t.Errorf("backend %q", res.Summary.Backend)
	}
	// The fidelity monitor measures across containers: every completed
	// job's frames carry the senders' stamps (one kernel, one monotonic
	// clock). The verdict itself is a figure of the machine at the moment.
	if f := res.Summary.Fidelity; f == nil || f.Jobs == 0 || f.Run.Link.N == 0 || f.Run.ComputeCalls == 0 {
		t.Errorf("fidelity %+v: the monitor measured no job, frame or computation", f)
	} else {
		t.Logf("fidelity %s (%d jobs measured): %v; dilation %v", f.Verdict, f.Jobs, f.Reasons, res.Summary.Dilation)
	}
	// Every link is shaped in the kernel, by every node container.
	for _, e := range res.Manifest.Entries {
		if e.Requested.Unavailable {
			continue
		}
		if e.Mechanism != kernel.NameHTB && e.Mechanism != kernel.NameNetem {
			t.Errorf("link %s-%s shaped by %q (%s), want a kernel mechanism", e.Src, e.Dst, e.Mechanism, e.Reason)
		}
		if !strings.Contains(e.Reason, "nodes of "+e.Src) {
			t.Errorf("link %s-%s: reason %q does not say who shapes it", e.Src, e.Dst, e.Reason)
		}
	}
	for _, f := range []string{"results.json", "jobs.csv", "events.jsonl", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("results directory lacks %s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Backend string         `json:"backend"`
		Extra   map[string]any `json:"extra"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Backend != "docker" || back.Extra["containers"] != float64(214) {
		t.Errorf("results.json: backend %q, extra %v", back.Backend, back.Extra)
	}
	if !strings.Contains(progress.String(), "214/214 joined the membership") {
		t.Errorf("startup progress missing:\n%s", tail(progress.String(), 20))
	}
}

// An explicitly requested mechanism that the containers cannot run fails,
// naming what is missing, instead of degrading.
func TestDockerExplicitUnavailableMechanism(t *testing.T) {
	img := dockerImage(t)
	id := runID(t)
	m, err := netem.Preset("myri10g", []string{"alpha"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, _, info, err := grid.Calibrate(ctx, m, kernel.NameNetem, grid.CalibrateOptions{Docker: grid.DockerOptions{Image: img, ID: id}})
	assertNothingLeft(t, id)
	if err == nil {
		t.Skipf("this kernel has netem (%s): nothing unavailable to request", info.Reason)
	}
	if !strings.Contains(err.Error(), `mechanism "netem" requested but unavailable`) || !strings.Contains(err.Error(), "netem qdisc") {
		t.Errorf("error does not name what is missing: %v", err)
	}
}

const killScenario = `
name: grid-kill
seed: 3
time_scale: 20
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
  placement_tries: 200
  startup_delay_s: 1
  probe_period_s: 300
`

// A node container killed mid-run (SIGKILL) is detected through the
// membership: the job with a rank on it fails with a reason naming the
// node, the cluster manager takes the node out of service, every other job
// completes, results.json counts the failure.
func TestDockerNodeKilled(t *testing.T) {
	p := plan(t, "kill.yaml", []byte(killScenario))
	id := runID(t)
	dir := t.TempDir()
	plat := grid.NewDockerPlatform(grid.DockerOptions{Image: dockerImage(t), ID: id})
	var once sync.Once
	killed := make(chan error, 1)
	cfg := grid.Config{Platform: plat, OnEvent: func(ev *msg.Event) {
		if ev.Kind == "start" && ev.JobId == "j0001" {
			once.Do(func() {
				go func() {
					kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					killed <- plat.Kill(kctx, "alpha-n002")
				}()
			})
		}
	}}
	var progress syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := grid.Run(ctx, p, launch.Options{Out: dir, Progress: &progress, ProgressEvery: 5 * time.Second}, cfg)
	assertNothingLeft(t, id)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(progress.String(), 40))
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("job j0001 never started, so no node was killed")
	}
	if len(res.Jobs) != len(p.Jobs) {
		t.Errorf("%d of %d jobs recorded", len(res.Jobs), len(p.Jobs))
	}
	for _, j := range res.Jobs {
		if j.ID == "j0001" {
			if j.Status != "failed" || !strings.HasPrefix(j.Reason, "node alpha-n002 of cluster alpha went down") || j.Cause != "node_down" {
				t.Errorf("j0001: %s %q (cause %q), want failed by the killed node (cause node_down)", j.Status, j.Reason, j.Cause)
			}
			continue
		}
		if j.Status != "completed" {
			t.Errorf("%s: %s %q, want completed", j.ID, j.Status, j.Reason)
		}
	}
	if res.Summary.Extra["node_failures"] != 1 || res.Summary.Extra["jobs_failed_by_node_failure"] != 1 {
		t.Errorf("results extra: %v", res.Summary.Extra)
	}
	ev, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ev), `"kind":"node_down"`) || !strings.Contains(string(ev), `"node":"alpha-n002"`) {
		t.Errorf("the cluster manager emitted no node_down for alpha-n002")
	}
	t.Logf("progress (tail):\n%s", tail(progress.String(), 10))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
