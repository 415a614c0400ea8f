package grid

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// netnsTestCommand runs this test binary as a host (TestMain).
func netnsTestCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{envTestHost + "=" + strings.Join(args, " ")}
	return cmd
}

// The small scenario on the netns platform: every host a process in its own
// network namespace, shaping its egress in the kernel; every job completes,
// the manifest names a kernel mechanism for every link and backend netns,
// and no namespace nor the launcher's veth is left afterwards.
func TestRunNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the netns platform creates network namespaces: needs root")
	}
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	plan := loadPlan(t, "small.yaml")
	var logs lockedBuffer
	plat := NewNetnsPlatform(NetnsOptions{Command: netnsTestCommand, Log: &logs})
	prefix := netns.NamePrefix + plat.opts.ID + "-"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress lockedBuffer
	res, err := Run(ctx, plan, wiring.Options{Out: t.TempDir(), Progress: &progress, ProgressEvery: time.Second}, Config{Platform: plat})
	if left, lerr := netns.List(prefix); lerr != nil || len(left) > 0 {
		t.Errorf("namespaces left behind (%v): %v", lerr, left)
	}
	if _, lerr := netlink.LinkByName("kl-" + plat.opts.ID); lerr == nil {
		t.Errorf("launcher veth kl-%s left behind", plat.opts.ID)
	}
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s\nhosts:\n%s", err, progress.String(), logs.String())
	}
	if res.Summary.Jobs.Completed != len(plan.Jobs) {
		t.Fatalf("completed %d of %d jobs\n%s", res.Summary.Jobs.Completed, len(plan.Jobs), progress.String())
	}
	if res.Summary.Backend != "netns" || res.Manifest.Backend != "netns" {
		t.Errorf("backend %q, manifest %q; want netns", res.Summary.Backend, res.Manifest.Backend)
	}
	for _, e := range res.Manifest.Entries {
		if e.Mechanism != kernel.NameHTB && e.Mechanism != kernel.NameNetem {
			t.Errorf("link %s-%s shaped by %q, want a kernel mechanism", e.Src, e.Dst, e.Mechanism)
		}
	}
}
