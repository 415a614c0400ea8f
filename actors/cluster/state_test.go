package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%02d", i)
	}
	return out
}

func TestClaimIsExclusiveAndReleaseFrees(t *testing.T) {
	n := NewNodes(names(4))
	a, err := n.Claim("j1", 3)
	if err != nil || len(a) != 3 {
		t.Fatalf("claim 3 of 4: %v %v", a, err)
	}
	if _, err := n.Claim("j2", 2); !errors.Is(err, ErrNotEnough) {
		t.Fatalf("claim 2 of 1 idle: want ErrNotEnough, got %v", err)
	}
	b, err := n.Claim("j2", 1)
	if err != nil || b[0] == a[0] || b[0] == a[1] || b[0] == a[2] {
		t.Fatalf("second claim overlaps the first: %v %v", a, b)
	}
	if n.Idle() != 0 {
		t.Fatalf("idle = %d, want 0", n.Idle())
	}
	if got := n.Release("j1", a[:1]); got != 1 {
		t.Fatalf("partial release freed %d", got)
	}
	if got := n.Release("j1", nil); got != 2 {
		t.Fatalf("release of the rest freed %d", got)
	}
	if n.Idle() != 3 {
		t.Fatalf("idle = %d, want 3", n.Idle())
	}
	if _, err := n.Claim("", 1); err == nil {
		t.Fatal("claim without a job id must fail")
	}
	if _, err := n.Claim("j3", 0); err == nil {
		t.Fatal("claim of 0 nodes must fail")
	}
}

func TestLocalQueueIsFCFSWithoutBackfilling(t *testing.T) {
	n := NewNodes(names(4))
	if _, err := n.Claim("k", 2); err != nil {
		t.Fatal(err)
	}
	n.SubmitLocal(LocalJob{ID: "big", Nodes: 3})
	n.SubmitLocal(LocalJob{ID: "small", Nodes: 1})
	if started := n.StartLocal(); len(started) != 0 {
		t.Fatalf("the small job must not jump the big one: started %v", started)
	}
	n.Release("k", nil)
	started := n.StartLocal()
	if len(started) != 2 || started[0].ID != "big" || started[1].ID != "small" {
		t.Fatalf("started %v, want big then small", started)
	}
	if koala, local := n.Held(); koala != 0 || local != 4 {
		t.Fatalf("held koala=%d local=%d", koala, local)
	}
	n.EndLocal("big")
	if n.Idle() != 3 {
		t.Fatalf("idle after local end = %d", n.Idle())
	}
}

func TestMarkDownReportsTheJob(t *testing.T) {
	n := NewNodes(names(3))
	got, _ := n.Claim("j", 2)
	job, ok := n.MarkDown(got[1])
	if !ok || job != "j" {
		t.Fatalf("MarkDown = %q %v", job, ok)
	}
	if n.Capacity() != 2 || n.Idle() != 1 {
		t.Fatalf("capacity %d idle %d", n.Capacity(), n.Idle())
	}
	if _, ok := n.MarkDown("nope"); ok {
		t.Fatal("unknown node marked down")
	}
}

// Property: whatever sequence of claims, releases and local jobs, a cluster
// never hands out more nodes than it has and counts stay consistent.
func TestNodesNeverOverbook(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := 0; round < 200; round++ {
		n := NewNodes(names(1 + r.IntN(20)))
		held := map[string]bool{}
		for step := 0; step < 50; step++ {
			switch r.IntN(4) {
			case 0:
				id := fmt.Sprintf("j%d", step)
				if got, err := n.Claim(id, 1+r.IntN(5)); err == nil {
					for _, g := range got {
						if held[g] {
							t.Fatalf("node %s handed out twice", g)
						}
						held[g] = true
					}
				}
			case 1:
				id := fmt.Sprintf("j%d", r.IntN(step+1))
				for i, o := range n.owner {
					if o == id {
						delete(held, n.names[i])
					}
				}
				n.Release(id, nil)
			case 2:
				n.SubmitLocal(LocalJob{ID: fmt.Sprint(step), Nodes: 1 + r.IntN(3)})
				n.StartLocal()
			case 3:
				n.EndLocal(fmt.Sprint(r.IntN(step + 1)))
				n.StartLocal()
			}
			koala, local := n.Held()
			if koala+local+n.Idle() != n.Capacity() {
				t.Fatalf("koala %d + local %d + idle %d != capacity %d", koala, local, n.Idle(), n.Capacity())
			}
		}
	}
}

func TestBackgroundStaysInBand(t *testing.T) {
	b := NewBackground(0.1, 0.3, 10*time.Minute, 4, 42)
	capacity := 100
	local := 0
	for i := 0; i < 100; i++ {
		jobs := b.Tick(capacity, local)
		for _, j := range jobs {
			if j.Nodes < 1 || j.Nodes > 4 {
				t.Fatalf("local job of %d nodes, want 1..4", j.Nodes)
			}
			if j.Duration < time.Second {
				t.Fatalf("local job of %s", j.Duration)
			}
			local += j.Nodes
		}
		if local > 30 {
			t.Fatalf("tick pushed local load to %d of %d, above the band", local, capacity)
		}
		if local < 10 {
			t.Fatalf("tick left local load at %d of %d, below the band", local, capacity)
		}
		local /= 2 // half the local jobs end
	}
	again := NewBackground(0.1, 0.3, 10*time.Minute, 4, 42)
	if fmt.Sprint(again.Tick(100, 0)) != fmt.Sprint(NewBackground(0.1, 0.3, 10*time.Minute, 4, 42).Tick(100, 0)) {
		t.Fatal("same seed, different local jobs")
	}
	if (*Background)(nil).Enabled() || NewBackground(0, 0, 0, 0, 1).Enabled() {
		t.Fatal("a zero band must be disabled")
	}
}

// A release frees only the nodes the releasing job holds: a late or
// mistaken release (of nodes another job holds now, or of nodes a job never
// had) leaves them held, so ownership per node is the one truth claims go by.
func TestReleaseFreesOnlyTheJobsOwnNodes(t *testing.T) {
	n := NewNodes(names(4))
	a, _ := n.Claim("j1", 2)
	if got := n.Release("j1", a); got != 2 {
		t.Fatalf("release freed %d", got)
	}
	b, _ := n.Claim("j2", 4) // j2 now holds j1's former nodes
	if got := n.Release("j1", a); got != 0 {
		t.Fatalf("a late release by j1 freed %d of j2's nodes", got)
	}
	if got := n.Release("j1", nil); got != 0 {
		t.Fatalf("j1's release of everything freed %d of j2's nodes", got)
	}
	n.SubmitLocal(LocalJob{ID: "l", Nodes: 1})
	if n.Idle() != 0 || len(n.StartLocal()) != 0 {
		t.Fatal("a local job started on a node j2 holds")
	}
	if got := n.Release("j2", b[:1]); got != 1 || len(n.StartLocal()) != 1 {
		t.Fatalf("j2's release freed %d, local job not started", got)
	}
	if _, err := n.Claim("j3", 1); !errors.Is(err, ErrNotEnough) {
		t.Fatalf("claim of a node the local job holds: %v", err)
	}
}
