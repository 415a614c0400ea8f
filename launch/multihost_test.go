//go:build !simonly

package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/koala-emu/koala-emu/launch/owner"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// Two netns runs on this machine, one whose launcher died and one whose
// launcher is this test: clean lists the dead one (dry run removes
// nothing), then removes exactly its namespaces and record, and keeps the
// live run.
func TestCleanNetnsRemovesOnlyDeadOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creates network namespaces: needs root")
	}
	recs := owner.Records{Dir: filepath.Join(t.TempDir(), "runs")}
	dead, live := netns.RandomRunID(), netns.RandomRunID()
	for _, id := range []string{dead, live} {
		name := netns.NamePrefix + id + "-h1"
		ns, err := netns.NewNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		ns.Close()
		t.Cleanup(func() { _ = netns.DeleteNamed(name) })
	}
	self, err := owner.Self(live, "netns")
	if err != nil {
		t.Fatal(err)
	}
	gone := self
	gone.RunID, gone.PID = dead, exitedPID(t)
	for _, o := range []owner.Owner{self, gone} {
		if err := recs.Write(o); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := cleanNetns(CleanOptions{DryRun: true}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(rep.Removed); !slices.Equal(got, []string{dead}) {
		t.Fatalf("dry run would remove %v, want [%s]", got, dead)
	}
	if names, _ := netns.List(netns.NamePrefix + dead + "-"); len(names) != 1 {
		t.Fatalf("dry run removed the dead run's namespace: %v", names)
	}

	rep, err = cleanNetns(CleanOptions{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(rep.Removed); !slices.Equal(got, []string{dead}) || rep.Removed[0].Status != owner.Gone {
		t.Fatalf("removed %v (%+v), want [%s] with owner gone", got, rep.Removed, dead)
	}
	if names, _ := netns.List(netns.NamePrefix + dead + "-"); len(names) != 0 {
		t.Errorf("dead run's namespaces left: %v", names)
	}
	if o, _ := recs.Read(dead); o != nil {
		t.Errorf("dead run's record left: %+v", o)
	}
	if names, _ := netns.List(netns.NamePrefix + live + "-"); len(names) != 1 {
		t.Errorf("live run's namespace removed: %v", names)
	}
	if !slices.Contains(runIDs(rep.Kept), live) {
		t.Errorf("live run %s not listed as kept: %v", live, runIDs(rep.Kept))
	}
}

// exitedPID is the process id of a process that has exited.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func runIDs(runs []CleanedRun) []string {
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.RunID)
	}
	return ids
}
