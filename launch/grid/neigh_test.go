package grid

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fakeNeigh(t *testing.T, v [3]int) string {
	t.Helper()
	dir := t.TempDir()
	for i, x := range v {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("gc_thresh%d", i+1)), []byte(fmt.Sprintf("%d\n", x)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := neighDir
	neighDir = dir
	t.Cleanup(func() { neighDir = old })
	return dir
}

func readNeigh(t *testing.T, dir string) [3]int {
	t.Helper()
	var out [3]int
	for i := range out {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("gc_thresh%d", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(string(b), &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestEnsureNeighbourRoom(t *testing.T) {
	// The kernel's defaults and 215 hosts: raised to n², 2n², 4n², with a line.
	dir := fakeNeigh(t, [3]int{128, 512, 1024})
	var log bytes.Buffer
	if err := EnsureNeighbourRoom("netns", 215, true, &log); err != nil {
		t.Fatal(err)
	}
	if got, want := readNeigh(t, dir), [3]int{215 * 215, 2 * 215 * 215, 4 * 215 * 215}; got != want {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if !strings.Contains(log.String(), "netns: raised net.ipv4.neigh.default.gc_thresh1/2/3") {
		t.Fatalf("no line says the limits were raised: %q", log.String())
	}

	// Large enough already: untouched, silent, never lowered.
	dir = fakeNeigh(t, [3]int{1 << 20, 1 << 21, 1 << 22})
	log.Reset()
	if err := EnsureNeighbourRoom("docker", 10, true, &log); err != nil {
		t.Fatal(err)
	}
	if got := readNeigh(t, dir); got != [3]int{1 << 20, 1 << 21, 1 << 22} || log.Len() != 0 {
		t.Fatalf("limits %v, log %q: want them untouched and no line", got, log.String())
	}

	// Too small without tuning: an error naming the sysctls, nothing written.
	dir = fakeNeigh(t, [3]int{128, 512, 1024})
	err := EnsureNeighbourRoom("docker", 100, false, &log)
	if err == nil || !strings.Contains(err.Error(), "sysctl -w net.ipv4.neigh.default.gc_thresh1=10000") {
		t.Fatalf("error %v, want one naming the sysctls to set", err)
	}
	if got := readNeigh(t, dir); got != [3]int{128, 512, 1024} {
		t.Fatalf("limits changed without tuning: %v", got)
	}
}
