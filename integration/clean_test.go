//go:build integration

package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// smallGrid is a scenario of 16 hosts and four short jobs, so that several
// runs fit on the machine at once.
const smallGrid = `name: clean-small
seed: 3
wall_budget: 40s
dilation: auto
topology:
  clusters:
    - {name: vrije,  nodes: 8, processors: 2, cpu_ghz: 2.4, speed: 0.9375, interconnect: myri10g}
    - {name: leiden, nodes: 8, processors: 2, cpu_ghz: 2.6, speed: 1.0,    interconnect: myri10g}
  links:
    preset: das3
workload:
  application: wave
  jobs:
    - {at_s: 0,  application: wave,  size: 4, request: flexible}
    - {at_s: 0,  application: prime, size: 4, request: flexible}
    - {at_s: 10, application: wave,  size: 8, request: flexible}
    - {at_s: 20, application: prime, size: 4, request: flexible}
policy:
  placement: fcm
  scan_period_s: 10
  placement_tries: 200
  startup_delay_s: 5
`

// launcher is one `koala-emu run` in the background.
type launcher struct {
	backend string
	out     string
	cmd     *exec.Cmd
	up      chan struct{} // closed at its first progress line
	done    chan error
	tail    []string
}

func startRun(t *testing.T, bin, scenario, backend string, args ...string) *launcher {
	t.Helper()
	l := &launcher{backend: backend, out: filepath.Join(t.TempDir(), "run"), up: make(chan struct{}), done: make(chan error, 1)}
	l.cmd = exec.Command(bin, append([]string{"run", scenario, "--backend", backend, "--out", l.out}, args...)...)
	stderr, err := l.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		up := false
		for sc.Scan() {
			line := sc.Text()
			l.tail = append(l.tail, line)
			if len(l.tail) > 20 {
				l.tail = l.tail[1:]
			}
			if !up && progressCompleted.MatchString(line) {
				up = true
				close(l.up)
			}
		}
		l.done <- l.cmd.Wait()
	}()
	t.Cleanup(func() { _ = l.cmd.Process.Kill() })
	return l
}

func (l *launcher) awaitUp(t *testing.T) {
	t.Helper()
	select {
	case <-l.up:
	case err := <-l.done:
		t.Fatalf("%s run ended before it was up: %v\n%s", l.backend, err, strings.Join(l.tail, "\n"))
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s run not up after 5 minutes", l.backend)
	}
}

// awaitCompleted waits for a run's end and checks that it completed every
// job with its books balanced.
func (l *launcher) awaitCompleted(t *testing.T) {
	t.Helper()
	select {
	case err := <-l.done:
		if err != nil {
			t.Fatalf("%s run: %v\n%s", l.backend, err, strings.Join(l.tail, "\n"))
		}
	case <-time.After(8 * time.Minute):
		t.Fatalf("%s run not done after 8 minutes", l.backend)
	}
	if b := readBooks(t, l.out); !b.Balanced() || b.Completed != b.Planned {
		t.Errorf("%s run: want every job completed and the books balanced, got %+v", l.backend, b)
	}
}

func clean(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "clean").CombinedOutput()
	if err != nil {
		t.Fatalf("koala-emu clean: %v\n%s", err, out)
	}
	t.Logf("koala-emu clean:\n%s", out)
	return string(out)
}

// Runs on one machine and a `koala-emu clean` beside them (issue: clean
// must tell a crashed run from a live one):
//  1. a netns and a docker run are up; clean removes nothing of theirs and
//     both complete every job;
//  2. a docker launcher is killed with SIGKILL while a netns run goes on;
//     clean removes the dead run's containers and networks and keeps the
//     live run's namespaces, and the live run completes;
//  3. a netns launcher is killed with SIGKILL; clean removes its
//     namespaces, links and rules.
//
// After each step the machine holds what it held before the test.
func TestCleanBesideRuns(t *testing.T) {
	bin := cli(t)
	removeNewCLIImages(t)
	scenario := filepath.Join(t.TempDir(), "clean-small.yaml")
	if err := os.WriteFile(scenario, []byte(smallGrid), 0o644); err != nil {
		t.Fatal(err)
	}
	// What an earlier run on this machine left when its launcher was
	// killed (a CI job stopped in the middle, say) is no part of this
	// test: clean it first, or the first step counts its removal as the
	// removal of a live run's containers.
	clean(t, bin)
	before := hostState(t)
	// A run that must still be live when the other is up (or when clean
	// runs) gets a longer wall budget than the scenario's 40 s: the two
	// backends start at different speeds, and a docker run once ended
	// before the netns run beside it was up, so the kill found no process.
	live := []string{"--wall-budget", "2m"}

	t.Run("live runs kept", func(t *testing.T) {
		n, d := startRun(t, bin, scenario, "netns", live...), startRun(t, bin, scenario, "docker", live...)
		n.awaitUp(t)
		d.awaitUp(t)
		during := hostState(t)
		clean(t, bin)
		if now := hostState(t); !slices.Equal(during["containers"], now["containers"]) || !slices.Equal(during["namespaces"], now["namespaces"]) {
			t.Errorf("clean removed parts of live runs: containers %d -> %d, namespaces %d -> %d",
				len(during["containers"]), len(now["containers"]), len(during["namespaces"]), len(now["namespaces"]))
		}
		n.awaitCompleted(t)
		d.awaitCompleted(t)
		assertState(t, "after two runs", before)
	})

	t.Run("killed docker launcher removed, live netns run kept", func(t *testing.T) {
		n, d := startRun(t, bin, scenario, "netns", live...), startRun(t, bin, scenario, "docker", live...)
		n.awaitUp(t)
		d.awaitUp(t)
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.done
		killed := hostState(t)
		if len(killed["containers"]) == len(before["containers"]) {
			t.Fatal("the killed docker launcher left no container: nothing to clean, the test proves nothing")
		}
		clean(t, bin)
		now := hostState(t)
		if !slices.Equal(now["containers"], before["containers"]) || !slices.Equal(now["networks"], before["networks"]) {
			t.Errorf("clean left the dead run's containers or networks: %d containers, %d networks (before the test: %d, %d)",
				len(now["containers"]), len(now["networks"]), len(before["containers"]), len(before["networks"]))
		}
		if !slices.Equal(now["namespaces"], killed["namespaces"]) {
			t.Errorf("clean touched the live netns run's namespaces: %d -> %d", len(killed["namespaces"]), len(now["namespaces"]))
		}
		n.awaitCompleted(t)
		assertState(t, "after the live run", before)
	})

	t.Run("killed netns launcher removed", func(t *testing.T) {
		n := startRun(t, bin, scenario, "netns")
		n.awaitUp(t)
		if err := n.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-n.done
		if killed := hostState(t); len(killed["namespaces"]) == len(before["namespaces"]) {
			t.Fatal("the killed netns launcher left no namespace: nothing to clean, the test proves nothing")
		}
		clean(t, bin)
		// The run's host processes notice their namespaces go and exit.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && !mapsEqual(before, hostState(t)) {
			time.Sleep(time.Second)
		}
		assertState(t, "after clean", before)
	})
}
