//go:build integration && !simonly

package launch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/launch/owner"
)

// Two docker runs, one labelled with an owner that has exited and one with
// this test as owner: a dry run lists the dead one and removes nothing;
// clean then removes the dead run's network and keeps the live one.
func TestCleanDockerRemovesOnlyDeadOwners(t *testing.T) {
	docker.DisableReaper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := docker.BuildImage(ctx, docker.ImageOptions{Package: "./testdata/sleeper", Dir: "docker", Repo: "koala-emu-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = docker.RemoveImage(context.Background(), img) }) // refused while another test's containers use it
	self, err := owner.Self("x", "docker")
	if err != nil {
		t.Fatal(err)
	}
	gone := self
	gone.PID = exitedPID(t)
	runs := map[string]*docker.Run{}
	for name, o := range map[string]owner.Owner{"dead": gone, "live": self} {
		r, err := docker.NewRun(ctx, docker.Options{ID: "it-" + docker.NewRunID(), Image: img, Clusters: []string{"a"}, Labels: o.Labels()})
		if err != nil {
			t.Fatal(err)
		}
		runs[name] = r
		t.Cleanup(func() { _ = r.Close(context.Background()) })
	}
	dead, live := runs["dead"].ID, runs["live"].ID

	rep, err := cleanDocker(ctx, CleanOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(runIDs(rep.Removed), dead) || slices.Contains(runIDs(rep.Removed), live) {
		t.Fatalf("dry run would remove %v; want %s and not %s", runIDs(rep.Removed), dead, live)
	}
	if !networkExists(t, docker.NetworkName(dead)) {
		t.Fatal("the dry run removed the dead run's network")
	}
	rep, err = cleanDocker(ctx, CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(runIDs(rep.Removed), dead) || !slices.Contains(runIDs(rep.Kept), live) {
		t.Errorf("removed %v, kept %v; want %s removed and %s kept", runIDs(rep.Removed), runIDs(rep.Kept), dead, live)
	}
	if networkExists(t, docker.NetworkName(dead)) || !networkExists(t, docker.NetworkName(live)) {
		t.Errorf("after clean: dead run's network exists %v, live run's %v; want false, true",
			networkExists(t, docker.NetworkName(dead)), networkExists(t, docker.NetworkName(live)))
	}
}

func networkExists(t *testing.T, name string) bool {
	t.Helper()
	runs, err := docker.ListRuns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if slices.Contains(r.Networks, name) {
			return true
		}
	}
	return false
}
