package mrunner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/invariant"
	mt "github.com/koala-emu/koala-emu/actors/malleabletest"
	"github.com/koala-emu/koala-emu/actors/mmanager"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/runner"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

// TestEndToEnd runs small W_mr-like workloads (FT and n-body malleable jobs
// mixed with rigid jobs of size 2) through the manager, real MRunners, rigid
// runners and cluster managers, over fake ranks that pass safe points, for
// both approaches and both policies. Every job must complete, the run's own
// invariant checks must all pass, and every processor must be free at the
// end.
func TestEndToEnd(t *testing.T) {
	for _, c := range []struct{ approach, policy string }{
		{"pra", "fpsma"}, {"pra", "egs"}, {"pwa", "fpsma"}, {"pwa", "egs"},
	} {
		t.Run(c.approach+"-"+c.policy, func(t *testing.T) {
			sizes := map[string]int{"a": 16, "b": 12}
			w := mt.NewWorld(t, 1000, sizes, "a", "b")
			props, err := mmanager.Props(mmanager.Config{Approach: c.approach, Policy: c.policy, Threshold: 1,
				Thresholds: map[string]float64{"b": 0.75}, PollPeriod: 20 * time.Second,
				Clusters: w.Clusters, Order: w.Order, Stats: w.Stats, Env: w.Env})
			if err != nil {
				t.Fatal(err)
			}
			mm, err := w.Sys.Root.SpawnNamed(props, "mm")
			if err != nil {
				t.Fatal(err)
			}
			w.Start(mm)

			const jobs = 12
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go func() {
				for i := 1; i <= jobs; i++ {
					if err := w.Env.Clock.Sleep(ctx, 40*time.Second); err != nil {
						return
					}
					id := fmt.Sprintf("j%02d", i)
					app := []string{"ft", "nbody"}[i%2]
					spec := &msg.JobSpec{Id: id, App: app, Size: 2, Request: "non-fixed", Args: map[string]float64{"work": 800}}
					if i%4 == 0 { // rigid
						w.Sys.Root.Spawn(runner.Props(runner.Config{Job: spec, Scheduler: mm, Clusters: w.Clusters,
							TimeScale: 1, StartupDelay: 10 * time.Second, Env: w.Env}))
						continue
					}
					max := map[string]int{"ft": 32, "nbody": 46}[app]
					w.Sys.Root.Spawn(Props(Config{Job: spec, Min: 2, Max: max, Profile: mt.Profile(app), Manager: mm, Clusters: w.Clusters,
						TimeScale: 1, StartupDelay: 10 * time.Second, Stats: w.Stats, Env: w.Env}))
				}
			}()
			waittest.Until(t, 60*time.Second, "every job to end", func() bool { return len(w.Events.Of("end")) == jobs })

			for _, e := range w.Events.Of("end") {
				if e.Fields["status"] != "completed" {
					t.Errorf("job %s: %v", e.JobId, e.Fields)
				}
				if e.Fields["malleable"] == "true" && e.Values["max_procs"] > float64(sizes["a"]) {
					t.Errorf("job %s held %v processors", e.JobId, e.Values["max_procs"])
				}
			}
			grows, shrinks, mandatory := len(w.Events.Of("grow")), len(w.Events.Of("shrink")), 0
			for _, e := range w.Events.Of("shrink") {
				if e.Fields["mandatory"] == "true" {
					mandatory++
				}
			}
			t.Logf("%s/%s: %d grows, %d shrinks (%d mandatory), %d requests", c.approach, c.policy, grows, shrinks, mandatory,
				len(w.Events.Of("resize_request")))
			if grows == 0 {
				t.Error("no job grew")
			}
			if c.approach == "pra" && shrinks != 0 {
				t.Errorf("PRA shrank %d times", shrinks)
			}
			if c.approach == "pwa" && mandatory == 0 {
				t.Error("PWA never shrank a job for a waiting one")
			}
			// FT ran on powers of two only, by the runners' own records.
			ft := map[string]bool{}
			for _, e := range w.Events.Of("submit") {
				if e.Fields["app"] == "ft" && e.Fields["malleable"] == "true" {
					ft[e.JobId] = true
				}
			}
			for _, e := range w.Events.Of("procs") {
				if n := int(e.Values["size"]); ft[e.JobId] && n&(n-1) != 0 {
					t.Errorf("FT job %s on %d processors", e.JobId, n)
				}
			}
			inv := w.Stats.Snapshot()
			for _, name := range []string{invariant.Capacity, invariant.Threshold, invariant.Bounds, invariant.Pow2} {
				if inv.Checks[name] == 0 {
					t.Errorf("invariant %s never checked", name)
				}
			}
			if c.approach == "pwa" && inv.Checks[invariant.Mandatory] == 0 {
				t.Error("no mandatory shrink checked")
			}
			if !inv.OK() {
				t.Errorf("invariant violations: %+v", inv)
			}
			// Every processor is free again.
			p := mt.NewProbe(t, w.Sys)
			for _, cl := range w.Order {
				waittest.Until(t, wait, "cluster "+cl+" free", func() bool {
					w.Sys.Root.Send(w.Clusters[cl], &msg.Claim{JobId: "all", Nodes: int32(sizes[cl]), ClaimId: 1, ReplyTo: msg.FromPID(p.PID)})
					r := mt.Expect[*msg.ClaimReply](t, p, "claim")
					if r.Ok {
						w.Sys.Root.Send(w.Clusters[cl], &msg.ReleaseNodes{JobId: "all"})
					}
					return r.Ok
				})
			}
		})
	}
}
