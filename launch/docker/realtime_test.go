package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeCgroup points the package at a cgroup v1 cpu tree in a temporary
// directory: the root's and Docker's cpu.rt_runtime_us.
func fakeCgroup(t *testing.T, root, docker string) string {
	t.Helper()
	dir := t.TempDir()
	old, oldDocker := cgroupCPU, dockerCgroup
	t.Cleanup(func() { cgroupCPU, dockerCgroup = old, oldDocker })
	cgroupCPU, dockerCgroup = dir, "docker"
	if root != "" {
		if err := os.WriteFile(filepath.Join(dir, "cpu.rt_runtime_us"), []byte(root+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if docker != "" {
		if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "docker", "cpu.rt_runtime_us"), []byte(docker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEnsureRealtimeBudgetRaisesDockerCgroup(t *testing.T) {
	dir := fakeCgroup(t, "950000", "0")
	ok, err := EnsureRealtimeBudget(8, 100*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("budget: %v %v", ok, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "docker", "cpu.rt_runtime_us"))
	if strings.TrimSpace(string(b)) != "800000" {
		t.Errorf("docker cgroup budget %q, want 800000", b)
	}
	// A smaller need never lowers it.
	if ok, err := EnsureRealtimeBudget(2, 100*time.Millisecond); err != nil || !ok {
		t.Fatalf("second budget: %v %v", ok, err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "docker", "cpu.rt_runtime_us"))
	if strings.TrimSpace(string(b)) != "800000" {
		t.Errorf("docker cgroup budget lowered to %q", b)
	}
}

func TestEnsureRealtimeBudgetBeyondHost(t *testing.T) {
	fakeCgroup(t, "950000", "0")
	_, err := EnsureRealtimeBudget(208, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "exceed the host's 950000 µs") {
		t.Fatalf("over budget: %v", err)
	}
}

func TestEnsureRealtimeBudgetWithoutGroupScheduling(t *testing.T) {
	fakeCgroup(t, "", "")
	ok, err := EnsureRealtimeBudget(8, 100*time.Millisecond)
	if err != nil || ok {
		t.Fatalf("no RT group scheduling: budgets %v, err %v; want false, nil", ok, err)
	}
}
