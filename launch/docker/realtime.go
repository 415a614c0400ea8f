package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Real-time scheduling in containers. The delay line of the htb mechanism
// asks for SCHED_FIFO (netem/kernel); inside a container that needs
// CAP_SYS_NICE and, on a cgroup v1 host whose kernel has RT group
// scheduling (CONFIG_RT_GROUP_SCHED), a real-time budget for the
// container's cgroup: Docker gives containers none by default, and
// sched_setattr then fails with EPERM, silently leaving the line at normal
// priority (and its p99 release lateness above the calibration's limit
// when other containers run).

// RealtimePeriod is the cgroup real-time period of containers that get a
// budget (ContainerSpec.Realtime).
const RealtimePeriod = time.Second

// cgroupCPU is the cgroup v1 cpu controller's mount; dockerCgroup the
// parent of the containers' cgroups with Docker's cgroupfs driver.
var (
	cgroupCPU    = "/sys/fs/cgroup/cpu"
	dockerCgroup = "docker"
)

// rtGroupScheduling reports whether real-time budgets are per cgroup here
// (cgroup v1 with RT group scheduling): the root's cpu.rt_runtime_us exists.
func rtGroupScheduling() bool {
	_, err := os.Stat(filepath.Join(cgroupCPU, "cpu.rt_runtime_us"))
	return err == nil
}

func readMicros(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// EnsureRealtimeBudget makes room for n containers with a real-time budget
// of per each (per RealtimePeriod) under Docker's parent cgroup: where RT
// group scheduling is in effect (cgroup v1) and the parent's budget is
// smaller than n*per, it is raised (never lowered) to that, within what
// the root cgroup allows. It returns whether containers may be given the
// budget; false with a nil error means the host schedules real-time
// threads without per-cgroup budgets (cgroup v2, or no RT group
// scheduling), where CAP_SYS_NICE alone suffices.
func EnsureRealtimeBudget(n int, per time.Duration) (budgets bool, err error) {
	if !rtGroupScheduling() {
		return false, nil
	}
	need := int64(n) * per.Microseconds()
	parent := filepath.Join(cgroupCPU, dockerCgroup, "cpu.rt_runtime_us")
	cur, err := readMicros(parent)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("docker backend: real-time budget: no cgroup %s (is Docker using the cgroupfs driver?)", filepath.Dir(parent))
	}
	if err != nil {
		return false, fmt.Errorf("docker backend: real-time budget: %w", err)
	}
	if cur >= need {
		return true, nil
	}
	root, err := readMicros(filepath.Join(cgroupCPU, "cpu.rt_runtime_us"))
	if err != nil {
		return false, fmt.Errorf("docker backend: real-time budget: %w", err)
	}
	if need > root {
		return false, fmt.Errorf("docker backend: real-time budget: %d containers x %v exceed the host's %d µs per second", n, per, root)
	}
	// The parent's period must hold the budget (it is 1 s by default).
	if err := os.WriteFile(parent, []byte(strconv.FormatInt(need, 10)), 0o644); err != nil {
		return false, fmt.Errorf("docker backend: real-time budget: raise %s from %d to %d µs: %w", parent, cur, need, err)
	}
	return true, nil
}
