package docker

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
)

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

func TestPickRunSubnet(t *testing.T) {
	cases := []struct {
		used []netip.Prefix
		want string
	}{
		{nil, "10.200.0.0/16"},
		{prefixes("172.17.0.0/16", "192.168.1.0/24"), "10.200.0.0/16"},
		{prefixes("10.200.5.0/24"), "10.201.0.0/16"},
		{prefixes("10.200.0.0/16", "10.201.0.0/16"), "10.202.0.0/16"},
		{prefixes("10.192.0.0/12"), "10.208.0.0/16"}, // 10.192-10.207 taken
		{prefixes("10.200.0.0/13", "10.208.0.0/12"), "10.224.0.0/16"},
	}
	for _, c := range cases {
		got, err := PickRunSubnet(c.used, 200, 250)
		if err != nil || got.String() != c.want {
			t.Errorf("used %v: got %v, %v; want %s", c.used, got, err, c.want)
		}
	}
	if _, err := PickRunSubnet(prefixes("10.0.0.0/8"), 200, 250); err == nil {
		t.Errorf("all of 10/8 used: want an error")
	}
	if _, err := PickRunSubnet(nil, 250, 200); err == nil {
		t.Errorf("reversed range: want an error")
	}
}

func TestAddressPlan(t *testing.T) {
	p, err := NewAddressPlan(netip.MustParsePrefix("10.210.0.0/16"), []string{"vrije", "leiden"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Gateway().String(); got != "10.210.0.1" {
		t.Errorf("gateway %s", got)
	}
	if got := p.Control().String(); got != "10.210.0.0/24" {
		t.Errorf("control %s", got)
	}
	subs := p.Clusters()
	if subs["vrije"].String() != "10.210.1.0/24" || subs["leiden"].String() != "10.210.2.0/24" || len(subs) != 2 {
		t.Errorf("cluster subnets %v", subs)
	}

	assign := func(cluster, owner string) string {
		t.Helper()
		a, err := p.Assign(cluster, owner)
		if err != nil {
			t.Fatalf("assign %s in %q: %v", owner, cluster, err)
		}
		return a.String()
	}
	if got := assign("", "scheduler"); got != "10.210.0.2" {
		t.Errorf("first control address %s, want 10.210.0.2 (after the gateway)", got)
	}
	if got := assign("vrije", "n1"); got != "10.210.1.1" {
		t.Errorf("first vrije address %s", got)
	}
	if err := p.Reserve("vrije", netip.MustParseAddr("10.210.1.2"), "n2"); err != nil {
		t.Fatal(err)
	}
	if got := assign("vrije", "n3"); got != "10.210.1.3" {
		t.Errorf("address after a reserved one %s, want 10.210.1.3", got)
	}
	for _, bad := range []struct{ cluster, addr string }{
		{"vrije", "10.210.1.2"},   // taken
		{"vrije", "10.210.2.9"},   // other cluster's subnet
		{"vrije", "10.210.1.0"},   // network address
		{"vrije", "10.210.1.255"}, // broadcast-looking
		{"", "10.210.0.1"},        // gateway
		{"nowhere", "10.210.9.9"}, // unknown cluster
	} {
		if err := p.Reserve(bad.cluster, netip.MustParseAddr(bad.addr), "x"); err == nil {
			t.Errorf("reserve %s in %q: want an error", bad.addr, bad.cluster)
		}
	}
	if _, err := p.Assign("nowhere", "x"); err == nil {
		t.Errorf("assign in unknown cluster: want an error")
	}

	p.Release(netip.MustParseAddr("10.210.1.1"))
	if got := assign("vrije", "n4"); got != "10.210.1.1" {
		t.Errorf("released address not reused: got %s", got)
	}
	// Fill leiden: 254 hosts, then an error.
	for i := 0; i < 254; i++ {
		assign("leiden", "l")
	}
	if _, err := p.Assign("leiden", "overflow"); err == nil {
		t.Errorf("255th address in a /24: want an error")
	}
}

func TestAddressPlanRejects(t *testing.T) {
	run := netip.MustParsePrefix("10.200.0.0/16")
	if _, err := NewAddressPlan(netip.MustParsePrefix("10.200.0.0/24"), nil); err == nil {
		t.Errorf("/24 run subnet: want an error")
	}
	if _, err := NewAddressPlan(netip.MustParsePrefix("10.200.1.0/16"), nil); err == nil {
		t.Errorf("unmasked run subnet: want an error")
	}
	if _, err := NewAddressPlan(run, []string{"a", "a"}); err == nil {
		t.Errorf("duplicate cluster: want an error")
	}
	if _, err := NewAddressPlan(run, []string{""}); err == nil {
		t.Errorf("unnamed cluster: want an error")
	}
	if _, err := NewAddressPlan(run, make([]string, 256)); err == nil {
		t.Errorf("256 clusters: want an error")
	}
}

func TestLabelsAndFilters(t *testing.T) {
	l := containerLabels("r1", 3, ContainerSpec{Name: "vrije-n001", Role: "node", Cluster: "vrije",
		Labels: map[string]string{"extra": "x", LabelRun: "spoofed"}}, map[string]string{"owner": "o", LabelName: "spoofed"})
	want := map[string]string{LabelRun: "r1", LabelName: "vrije-n001", LabelBatch: "3", LabelRole: "node",
		LabelCluster: "vrije", "extra": "x", "owner": "o"}
	if len(l) != len(want) {
		t.Fatalf("labels %v, want %v", l, want)
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("label %s=%q, want %q", k, l[k], v)
		}
	}
	if l := containerLabels("r1", 1, ContainerSpec{Name: "scheduler"}, nil); l[LabelCluster] != "" || len(l) != 3 {
		t.Errorf("control-plane labels %v", l)
	}
	if l := networkLabels("r1", map[string]string{"owner": "o", LabelRun: "spoofed"}); len(l) != 2 || l[LabelRun] != "r1" || l["owner"] != "o" {
		t.Errorf("network labels %v", l)
	}

	any := runFilter("")
	if !any["label"][LabelRun] || len(any["label"]) != 1 {
		t.Errorf("any-run filter %v", any)
	}
	one := runFilter("r1", LabelBatch+"=2")
	if !one["label"][LabelRun+"=r1"] || !one["label"][LabelBatch+"=2"] || len(one["label"]) != 2 {
		t.Errorf("run filter %v", one)
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"r1a2b3c4", "ci-42", "x"} {
		if err := checkRunID(ok); err != nil {
			t.Errorf("run ID %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "A", "a b", "a/b", strings.Repeat("a", 41)} {
		if err := checkRunID(bad); err == nil {
			t.Errorf("run ID %q: want an error", bad)
		}
	}
	for _, bad := range []string{"", "_x", "a b", "a:b"} {
		if err := checkName(bad); err == nil {
			t.Errorf("name %q: want an error", bad)
		}
	}
	if got := ContainerName("r1", "vrije-n001"); got != "koala-emu-r1-vrije-n001" {
		t.Errorf("container name %s", got)
	}
	if got := NetworkName("r1"); got != "koala-emu-r1" {
		t.Errorf("network name %s", got)
	}
	if got := NewRunID(); checkRunID(got) != nil || len(got) != 9 {
		t.Errorf("generated run ID %q", got)
	}
}

func TestMemoryInUse(t *testing.T) {
	v1 := container.MemoryStats{Usage: 5 << 20, Stats: map[string]uint64{"total_inactive_file": 1 << 20, "cache": 2 << 20}}
	if got := memoryInUse(v1); got != 4<<20 {
		t.Errorf("cgroup v1: %d", got)
	}
	v2 := container.MemoryStats{Usage: 5 << 20, Stats: map[string]uint64{"inactive_file": 3 << 20}}
	if got := memoryInUse(v2); got != 2<<20 {
		t.Errorf("cgroup v2: %d", got)
	}
	if got := memoryInUse(container.MemoryStats{Usage: 7}); got != 7 {
		t.Errorf("no breakdown: %d", got)
	}
	if got := memoryInUse(container.MemoryStats{Usage: 1, Stats: map[string]uint64{"inactive_file": 9}}); got != 1 {
		t.Errorf("cache above usage: %d", got)
	}
}

func TestGoArch(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "amd64", "aarch64": "arm64", "s390x": "s390x", "mips": ""} {
		if got := goArch(in); got != want {
			t.Errorf("goArch(%q) = %q, want %q", in, got, want)
		}
	}
}

// The built-in Dockerfile is the repository's docker/Dockerfile.
func TestDockerfileInSync(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Dockerfile {
		t.Fatalf("docker/Dockerfile and docker.Dockerfile differ:\n--- file ---\n%s--- const ---\n%s", b, Dockerfile)
	}
}

func TestCheckStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF checks need linux binaries")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool to build test binaries")
	}
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	build := exec.Command("go", "build", "-o", static, "./testdata/sleeper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := CheckStatic(static); err != nil {
		t.Errorf("static binary refused: %v", err)
	}
	// /bin/sh is dynamically linked on every distribution this runs on.
	if sh, err := filepath.EvalSymlinks("/bin/sh"); err == nil {
		if err := CheckStatic(sh); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("CheckStatic(%s) = %v, want a dynamically-linked error", sh, err)
		}
	}
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(notELF); err == nil {
		t.Errorf("script accepted as an ELF binary")
	}
}

// A close that failed only on a stale network is told apart from one that
// failed on anything else as well, however the error was wrapped.
func TestOnlyStaleNetwork(t *testing.T) {
	daemon := errors.New("network koala-emu-r1 has active endpoints")
	stale := &StaleNetworkError{Names: []string{"koala-emu-r1"}, Err: daemon}
	other := errors.New("remove container [/x]: boom")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"bare", stale, true},
		{"wrapped twice", fmt.Errorf("launcher: %w", fmt.Errorf("close run r1: %w", stale)), true},
		{"joined with nils", errors.Join(nil, fmt.Errorf("close: %w", stale), nil), true},
		{"joined with another failure", errors.Join(other, stale), false},
		{"wrapped join with another failure", fmt.Errorf("close: %w", errors.Join(stale, other)), false},
		{"other alone", other, false},
		{"daemon error alone", daemon, false},
	} {
		se, ok := OnlyStaleNetwork(tc.err)
		if ok != tc.want {
			t.Errorf("%s: OnlyStaleNetwork = %v, want %v", tc.name, ok, tc.want)
		}
		if ok && (len(se.Names) != 1 || se.Names[0] != "koala-emu-r1" || !errors.Is(se, daemon)) {
			t.Errorf("%s: got %+v", tc.name, se)
		}
	}
	if msg := stale.Error(); !strings.Contains(msg, "koala-emu-r1") || !strings.Contains(msg, "moby/moby#42119") || !strings.Contains(msg, "koala-emu clean") {
		t.Errorf("message does not name the network, the bug and the remedy: %s", msg)
	}
}
