//go:build integration

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/internal/faultstest"
	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/grid"
	"github.com/koala-emu/koala-emu/netem/kernel"
)

// faultsScenario: 14 shaping hosts; a co-allocated job across vrije and
// leiden stalls while leiden is partitioned (200 s of scenario time, 10 s
// of wall time, longer than memberlist takes to declare a silent member
// dead), under a degraded vrije-leiden link; a job fixed on leiden waits
// for the heal.
const faultsScenario = `name: faults-small
seed: 3
time_scale: 20
topology:
  clusters:
    - {name: vrije,  nodes: 6, processors: 2, cpu_ghz: 2.4, speed: 0.9375, interconnect: myri10g}
    - {name: leiden, nodes: 6, processors: 2, cpu_ghz: 2.6, speed: 1.0,    interconnect: myri10g}
  links:
    preset: das3
workload:
  application: ccr
  jobs:
    - {at_s: 0,  application: ccr, size: 8, request: fixed, components: [{cluster: vrije, size: 4}, {cluster: leiden, size: 4}]}
    - {at_s: 60, application: ccr, size: 4, request: fixed, components: [{cluster: leiden, size: 4}]}
policy:
  placement: fcm
  scan_period_s: 10
  placement_tries: 200
  startup_delay_s: 5
faults:
  - {at_s: 20, kind: degrade, target: vrije, peer: leiden, bandwidth_factor: 0.5, latency_factor: 2, duration_s: 200}
  - {at_s: 40, kind: partition, target: leiden, duration_s: 200}
`

// hasCutTable reports whether the network namespace of a host of the run
// holds the cut's nftables table (netns: the host's named namespace;
// docker: the container's, entered by its process).
func hasCutTable(ctx context.Context, backend, id, host string) (bool, error) {
	var args []string
	switch backend {
	case "netns":
		args = []string{"ip", "netns", "exec", "koala-" + id + "-h-" + host, "nft", "list", "tables"}
	default:
		out, err := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label="+docker.LabelRun+"="+id,
			"--filter", "name="+host).Output()
		if err != nil {
			return false, err
		}
		ids := strings.Fields(string(out))
		if len(ids) != 1 {
			return false, &exec.Error{Name: "docker ps " + host, Err: exec.ErrNotFound}
		}
		pid, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Pid}}", ids[0]).Output()
		if err != nil {
			return false, err
		}
		args = []string{"nsenter", "-t", strings.TrimSpace(string(pid)), "-n", "nft", "list", "tables"}
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return false, &exec.Error{Name: strings.Join(args, " ") + ": " + string(out), Err: err}
	}
	return strings.Contains(string(out), kernel.CutTableName), nil
}

// assertRunGone checks that nothing of run id is left: its containers and
// network (docker), its namespaces and the launcher's veth (netns; the
// cut's tables live in the hosts' namespaces). Only the run's own: the
// machine may be running other runs meanwhile.
func assertRunGone(t *testing.T, backend, id string) {
	t.Helper()
	if backend == "docker" {
		assertNothingLeft(t, id)
		return
	}
	for _, args := range [][]string{{"ip", "netns", "list"}, {"ip", "-o", "link", "show"}} {
		out, err := exec.Command(args[0], args[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "koala-"+id+"-") || strings.Contains(l, grid.LauncherVeth(id)+"@") || strings.Contains(l, grid.LauncherVeth(id)+":") {
				t.Errorf("left behind: %s", l)
			}
		}
	}
}

// A partition and a degrade on each grid backend: every fault is applied
// without error; while leiden is partitioned its node holds the cut's
// nftables table and vrije's does not, and after the heal neither does;
// no node is reported dead (the control plane crosses the cut); every job
// completes, the books balance and nothing of the run is left.
func TestFaultsPartitionAndDegrade(t *testing.T) {
	for _, backend := range []string{"netns", "docker"} {
		t.Run(backend, func(t *testing.T) { faultsRun(t, backend) })
	}
}

// faultsPlatform is a fresh platform of backend for a faults run, and the
// run's ID.
func faultsPlatform(t *testing.T, backend string) (grid.Platform, string) {
	id := strings.ReplaceAll(runID(t), "-", "") // netns run IDs take no dash
	if backend == "docker" {
		return grid.NewDockerPlatform(grid.DockerOptions{Image: dockerImage(t), ID: id}), id
	}
	bin := cli(t) // the netns hosts run the command, not this test binary
	return grid.NewNetnsPlatform(grid.NetnsOptions{ID: id, Command: func(args []string) *exec.Cmd {
		return exec.Command(bin, append([]string{"node"}, args...)...)
	}}), id
}

func faultsRun(t *testing.T, backend string) {
	p := plan(t, "faults-small.yaml", []byte(faultsScenario))
	plat, id := faultsPlatform(t, backend)
	var mu sync.Mutex
	var checks []string
	var wg sync.WaitGroup
	check := func(when, host string, want bool) {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got, err := hasCutTable(ctx, backend, id, host)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			checks = append(checks, when+" "+host+": "+err.Error())
		case got != want:
			checks = append(checks, when+" "+host+": cut table "+map[bool]string{true: "present", false: "absent"}[got])
		}
	}
	cfg := grid.Config{Platform: plat, OnEvent: func(ev *msg.Event) {
		if ev.Kind != msg.EventFault {
			return
		}
		switch ev.Fields["kind"] {
		case "partition":
			wg.Add(2)
			go check("partitioned", "leiden-n001", true)
			go check("partitioned", "vrije-n001", false)
		case "heal":
			wg.Add(1)
			go check("healed", "leiden-n001", false)
		}
	}}
	var progress syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := grid.Run(ctx, p, launch.Options{Out: t.TempDir(), Progress: &progress, ProgressEvery: 5 * time.Second}, cfg)
	wg.Wait()
	assertRunGone(t, backend, id)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(progress.String(), 40))
	}
	for _, c := range checks {
		t.Error(c)
	}
	f := res.Summary.Faults
	if f == nil || len(f.Applied) != 4 {
		t.Fatalf("faults applied: %+v, want degrade, partition, restore, heal", f)
	}
	for _, a := range f.Applied {
		if a.Error != "" {
			t.Errorf("%s %s at %.0f s: %s", a.Kind, a.Target, a.TS, a.Error)
		}
	}
	if res.Summary.Extra["node_failures"] != 0 {
		t.Errorf("the partition made nodes fail: %v", res.Summary.Extra)
	}
	for _, j := range res.Jobs {
		if j.Status != "completed" {
			t.Errorf("%s: %s %q, want completed", j.ID, j.Status, j.Reason)
		}
	}
	if !res.Summary.Books.Balanced() {
		t.Errorf("books: %v", res.Summary.Books.Err())
	}
	t.Logf("%s: faults %+v; progress (tail):\n%s", backend, f.Applied, tail(progress.String(), 6))
}

// A load and its unload on each grid backend, on the inproc backend's
// test scenario (launch/testdata/faults-load.yaml: 10 hosts): two loading
// programs on each dual-processor leiden node from 50 s to 150 s halve its
// job's computation speed for 100 s, so the leiden job runs about 50 s
// longer than the vrije job, the same work on nodes nothing loads. Both
// faults are applied without error, every leiden node records its load
// and its unload (node_load), the books balance and nothing of the run is
// left.
func TestFaultsLoad(t *testing.T) {
	for _, backend := range []string{"netns", "docker"} {
		t.Run(backend, func(t *testing.T) { faultsLoadRun(t, backend) })
	}
}

func faultsLoadRun(t *testing.T, backend string) {
	src, err := os.ReadFile(filepath.Join("..", "launch", "testdata", "faults-load.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, "faults-load.yaml", src)
	plat, id := faultsPlatform(t, backend)
	var mu sync.Mutex
	loads := map[string]int{} // node -> node_load events
	cfg := grid.Config{Platform: plat, OnEvent: func(ev *msg.Event) {
		if ev.Kind == msg.EventNodeLoad {
			mu.Lock()
			loads[ev.Fields["node"]]++
			mu.Unlock()
		}
	}}
	var progress syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := grid.Run(ctx, p, launch.Options{Out: t.TempDir(), Progress: &progress, ProgressEvery: 5 * time.Second}, cfg)
	assertRunGone(t, backend, id)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(progress.String(), 40))
	}
	mu.Lock()
	faultstest.CheckLoadRun(t, res.Jobs, res.Summary.Faults.Applied, loads, 10)
	mu.Unlock()
	if !res.Summary.Books.Balanced() {
		t.Errorf("books: %v", res.Summary.Books.Err())
	}
}
