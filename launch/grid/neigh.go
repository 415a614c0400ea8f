package grid

import (
	"fmt"
	"io"
	"os"
)

// neighDir holds the kernel's ARP table limits.
var neighDir = "/proc/sys/net/ipv4/neigh/default"

// EnsureNeighbourRoom makes sure the kernel's ARP table can hold an entry
// for every pair of n hosts on one bridge (backend names the caller in
// messages). Every member of the membership talks to every other one, so
// each host's network namespace (container or netns host) learns
// up to n neighbours, and the kernel counts the entries of all namespaces
// against one limit (net.ipv4.neigh.default.gc_thresh3, 1024 by default):
// past it new neighbours are not resolved ("neighbor table overflow"),
// containers cannot reach each other and joins time out, at about 32
// containers with the defaults. When the limits are lower than n² (gc_thresh1),
// 2n² and 4n² and tune is set, they are raised (never lowered) and a line
// says so; otherwise the error says which sysctl to set.
func EnsureNeighbourRoom(backend string, n int, tune bool, log io.Writer) error {
	need := [3]int{n * n, 2 * n * n, 4 * n * n}
	var cur [3]int
	for i := range cur {
		b, err := os.ReadFile(fmt.Sprintf("%s/gc_thresh%d", neighDir, i+1))
		if err != nil {
			return fmt.Errorf("%s backend: read the ARP table limits: %w", backend, err)
		}
		if _, err := fmt.Sscan(string(b), &cur[i]); err != nil {
			return fmt.Errorf("%s backend: parse gc_thresh%d %q: %w", backend, i+1, b, err)
		}
	}
	if cur[2] >= need[2] && cur[1] >= need[1] {
		return nil
	}
	if !tune {
		return fmt.Errorf("%s backend: %d hosts need up to %d ARP entries, but the kernel's ARP table (shared by every network namespace) keeps at most %d: run sysctl -w net.ipv4.neigh.default.gc_thresh1=%d net.ipv4.neigh.default.gc_thresh2=%d net.ipv4.neigh.default.gc_thresh3=%d",
			backend, n, need[0], cur[2], need[0], need[1], need[2])
	}
	var set [3]int
	// Raise the highest first, so the thresholds stay ordered.
	for i := 2; i >= 0; i-- {
		set[i] = max(cur[i], need[i])
		if set[i] == cur[i] {
			continue
		}
		if err := os.WriteFile(fmt.Sprintf("%s/gc_thresh%d", neighDir, i+1), []byte(fmt.Sprint(set[i])), 0o644); err != nil {
			return fmt.Errorf("%s backend: %d hosts need up to %d ARP entries, but the kernel's ARP table keeps at most %d and raising net.ipv4.neigh.default.gc_thresh%d failed (run as root, or sysctl -w it yourself): %w",
				backend, n, need[0], cur[2], i+1, err)
		}
	}
	fmt.Fprintf(log, "%s: raised net.ipv4.neigh.default.gc_thresh1/2/3 from %d/%d/%d to %d/%d/%d: %d hosts gossip with each other (up to %d ARP entries, counted over every network namespace); they stay raised\n",
		backend, cur[0], cur[1], cur[2], set[0], set[1], set[2], n, need[0])
	return nil
}
