package membership

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// fastTestConfig gossips on 127.0.0.1 with a free port and detects failures
// quickly; the waits below are deadlines, not expectations.
func fastTestConfig(m Member) Config {
	c := DefaultConfig(m)
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.JoinRetryInterval = 50 * time.Millisecond
	if os.Getenv("KOALA_MEMBERLIST_LOG") != "" {
		c.LogOutput = os.Stderr
	}
	return c
}

const gossipWait = 20 * time.Second

// newTestProviders makes n providers m0, m1, ... with fastTestConfig, each
// changed by tweak when it is not nil, and closes them when the test ends.
func newTestProviders(t *testing.T, n int, tweak func(*Config)) []*Memberlist {
	t.Helper()
	ps := make([]*Memberlist, n)
	for i := range ps {
		c := fastTestConfig(Member{Name: fmt.Sprintf("m%d", i), Role: RoleNode, Cluster: []string{"vrije", "leiden"}[i%2],
			Addr: fmt.Sprintf("127.0.0.1:%d", 9000+i), Meta: map[string]string{"i": fmt.Sprint(i)}})
		if tweak != nil {
			tweak(&c)
		}
		p, err := NewMemberlist(c)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
		t.Cleanup(func() { _ = p.Close() })
	}
	return ps
}

func TestMemberlistJoinLeaveFail(t *testing.T) {
	const n = 4
	ps := newTestProviders(t, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gossipWait)
	defer cancel()

	// m0 starts alone; its own address as a seed is skipped.
	if err := ps[0].Join(ctx, nil); err != nil {
		t.Fatal(err)
	}
	seed := ps[0].GossipAddr()
	if seed == "" {
		t.Fatal("no gossip address after Join")
	}
	if err := ps[0].Join(ctx, []string{seed}); err != nil {
		t.Fatalf("joining through itself: %v", err)
	}
	for _, p := range ps[1:] {
		if err := p.Join(ctx, []string{seed}); err != nil {
			t.Fatal(err)
		}
	}

	// Everyone sees everyone, with metadata.
	for _, p := range ps {
		waitMembers(t, p, "m0,m1,m2,m3")
	}
	for _, m := range ps[1].Members() {
		want := ps[m.Name[1]-'0'].Local()
		if !m.Equal(want) {
			t.Fatalf("m1 sees %+v, want %+v", m, want)
		}
	}
	seen := map[string]bool{}
	for len(seen) < n {
		e := nextEvent(t, ps[0].Events(), gossipWait)
		if e.Kind != Join {
			t.Fatalf("m0: %v before all joins", e)
		}
		seen[e.Member.Name] = true
	}

	// Graceful leave: a Leave event, never a Fail.
	if err := ps[3].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ps[0].Events(), gossipWait,
		func(e Event) bool { return e.Kind == Leave && e.Member.Name == "m3" },
		func(e Event) bool { return e.Member.Name == "m3" && e.Kind == Fail })
	waitClosed(t, ps[3].Events(), gossipWait)

	// Abrupt stop: detected as a failure.
	if err := ps[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ps[1].Events(), gossipWait,
		func(e Event) bool { return e.Kind == Fail && e.Member.Name == "m2" },
		func(e Event) bool { return e.Member.Name == "m2" && e.Kind == Leave })
	waitMembers(t, ps[0], "m0,m1")

	if err := ps[2].Join(ctx, []string{seed}); err != ErrClosed {
		t.Fatalf("join after close: %v, want ErrClosed", err)
	}
	if err := ps[2].Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestMemberlistJoinGivesUpWithContext(t *testing.T) {
	p, err := NewMemberlist(fastTestConfig(Member{Name: "lonely"}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Port 1 on loopback: nothing listens, joins are refused quickly.
	if err := p.Join(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("join through a dead seed: want an error")
	}
	if got := names(p.Members()); got != "lonely" {
		t.Fatalf("members %s, want lonely", got)
	}
}

func waitMembers(t *testing.T, p *Memberlist, want string) {
	t.Helper()
	deadline := time.Now().Add(gossipWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := names(p.Members())
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sees %s, want %s", p.Local().Name, got, want)
		}
		<-tick.C
	}
}

// A member that gossip never told about a later member learns it by joining
// again: Join on a joined provider exchanges the whole membership with the
// seeds.
func TestMemberlistJoinAgainRepairs(t *testing.T) {
	// No gossip, probes or periodic exchanges: what a member knows comes
	// from its own joins only.
	ps := newTestProviders(t, 3, func(c *Config) {
		c.GossipInterval, c.ProbeInterval, c.PushPullInterval = time.Hour, time.Hour, time.Hour
	})
	ctx, cancel := context.WithTimeout(context.Background(), gossipWait)
	defer cancel()
	if err := ps[0].Join(ctx, nil); err != nil {
		t.Fatal(err)
	}
	seed := []string{ps[0].GossipAddr()}
	for _, p := range ps[1:] {
		if err := p.Join(ctx, seed); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(ps[1].Members()); got != "m0,m1" {
		t.Fatalf("m1 sees %s before joining again, want m0,m1 (nothing else tells it of m2)", got)
	}
	// The seed merges m2's join in its own time after m2's Join returns.
	deadline := time.Now().Add(gossipWait)
	for names(ps[0].Members()) != "m0,m1,m2" {
		if time.Now().After(deadline) {
			t.Fatalf("the seed sees %s, want m0,m1,m2", names(ps[0].Members()))
		}
		<-time.After(10 * time.Millisecond)
	}
	if err := ps[1].Join(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if got := names(ps[1].Members()); got != "m0,m1,m2" {
		t.Fatalf("m1 sees %s after joining again, want m0,m1,m2", got)
	}
}
