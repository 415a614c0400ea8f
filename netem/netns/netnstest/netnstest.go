package netnstest

import (
	"os"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/netem/netns"
)

// RequireRoot skips the test when the process is not root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces and shape links")
	}
}

// Leftovers lists what the project may have left in this machine's view:
// namespaces under /run/netns starting with prefix, links in the caller's
// namespace whose name starts with "koala", and nftables tables in the
// caller's namespace whose name starts with "koala".
func Leftovers(prefix string) ([]string, error) {
	var out []string
	names, err := netns.List(prefix)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		out = append(out, "netns "+n)
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "koala") {
			out = append(out, "link "+l.Attrs().Name)
		}
	}
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	// A dump interrupted by a concurrent change of the ruleset (other
	// software on the machine) is retried.
	var tables []*nftables.Table
	for try := 0; ; try++ {
		tables, err = c.ListTables()
		if err == nil || try == 4 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for _, tb := range tables {
		if strings.HasPrefix(tb.Name, "koala") {
			out = append(out, "nftables table "+tb.Name)
		}
	}
	return out, nil
}

// AssertNoLeftovers fails the test when Leftovers finds anything.
func AssertNoLeftovers(t testing.TB, prefix string) {
	t.Helper()
	left, err := Leftovers(prefix)
	if err != nil {
		t.Fatalf("listing leftovers: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Setup builds a topology for a test and removes it when the test ends,
// whatever its outcome; it then asserts that none of the topology's
// namespaces is left.
func Setup(t testing.TB, spec netns.Spec) *netns.Topology {
	t.Helper()
	RequireRoot(t)
	topo, err := netns.Setup(t.Context(), spec)
	if err != nil {
		t.Fatalf("netns setup: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("netns close: %v", err)
		}
		AssertNoLeftovers(t, topo.Prefix)
	})
	return topo
}
