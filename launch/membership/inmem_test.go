package membership

import (
	"context"
	"testing"
	"time"
)

const inmemWait = 5 * time.Second

func node(name, cluster string) Member {
	return Member{Name: name, Role: RoleNode, Cluster: cluster, Addr: name + ":8090"}
}

func joinAll(t *testing.T, h *Hub, ms ...Member) []*InmemProvider {
	t.Helper()
	ps := make([]*InmemProvider, len(ms))
	for i, m := range ms {
		ps[i] = h.NewProvider(m)
		if err := ps[i].Join(context.Background(), nil); err != nil {
			t.Fatalf("join %s: %v", m.Name, err)
		}
		t.Cleanup(func() { _ = ps[i].Close() })
	}
	return ps
}

// expect reads len(want) events from p and compares kind and member name.
func expect(t *testing.T, p *InmemProvider, want ...string) {
	t.Helper()
	for _, w := range want {
		e := nextEvent(t, p.Events(), inmemWait)
		if got := e.Kind.String() + " " + e.Member.Name; got != w {
			t.Fatalf("%s: event %q, want %q", p.Local().Name, got, w)
		}
	}
}

func TestInmemJoinLeaveFail(t *testing.T) {
	h := NewHub()
	ps := joinAll(t, h, node("a", "x"), node("b", "x"), node("c", "y"))
	a, b, c := ps[0], ps[1], ps[2]

	expect(t, a, "join a", "join b", "join c")
	expect(t, b, "join a", "join b", "join c")
	expect(t, c, "join a", "join b", "join c")
	if got := names(a.Members()); got != "a,b,c" {
		t.Fatalf("a sees %s, want a,b,c", got)
	}
	if m := a.Members()[2]; m.Cluster != "y" || m.Addr != "c:8090" || m.Role != RoleNode {
		t.Fatalf("member data lost: %+v", m)
	}

	if err := c.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "leave c")
	expect(t, b, "leave c")
	waitClosed(t, c.Events(), inmemWait)
	if err := c.Join(context.Background(), nil); err != ErrClosed {
		t.Fatalf("join after leave: %v, want ErrClosed", err)
	}

	if err := h.Fail("b"); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "fail b")
	waitClosed(t, b.Events(), inmemWait)
	if got := names(a.Members()); got != "a" {
		t.Fatalf("a sees %s, want a", got)
	}
	if err := h.Fail("b"); err == nil {
		t.Fatalf("failing a dead member: want an error")
	}

	// Close without Leave is an abrupt failure for the others.
	d := joinAll(t, h, node("d", "y"))[0]
	expect(t, a, "join d")
	expect(t, d, "join a", "join d")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "fail d")
}

func TestInmemDuplicateName(t *testing.T) {
	h := NewHub()
	joinAll(t, h, node("a", "x"))
	if err := h.NewProvider(node("a", "y")).Join(context.Background(), nil); err == nil {
		t.Fatalf("second live member named a: want an error")
	}
	if got := names(h.Members()); got != "a" {
		t.Fatalf("hub members %s, want a", got)
	}
}

func TestInmemPartitionAndHeal(t *testing.T) {
	h := NewHub()
	ps := joinAll(t, h, node("a", "x"), node("b", "x"), node("c", "y"), node("d", "y"))
	for _, p := range ps {
		expect(t, p, "join a", "join b", "join c", "join d")
	}
	if err := h.Partition([]string{"c", "d"}); err != nil {
		t.Fatal(err)
	}
	expect(t, ps[0], "fail c", "fail d")
	expect(t, ps[1], "fail c", "fail d")
	expect(t, ps[2], "fail a", "fail b")
	expect(t, ps[3], "fail a", "fail b")
	if got := names(ps[0].Members()); got != "a,b" {
		t.Fatalf("a sees %s during the partition, want a,b", got)
	}
	if got := names(h.Members()); got != "a,b,c,d" {
		t.Fatalf("hub sees %s during the partition, want everyone", got)
	}

	// A member joining during the partition lands on the unnamed island.
	e := joinAll(t, h, node("e", "x"))[0]
	expect(t, ps[0], "join e")
	expect(t, e, "join a", "join b", "join e")

	h.Heal()
	expect(t, ps[2], "join a", "join b", "join e")
	expect(t, ps[0], "join c", "join d")
	if got := names(ps[3].Members()); got != "a,b,c,d,e" {
		t.Fatalf("d sees %s after healing, want everyone", got)
	}
	if err := h.Partition([]string{"a"}, []string{"a", "b"}); err == nil {
		t.Fatalf("member in two groups: want an error")
	}
}

func TestInmemUpdate(t *testing.T) {
	h := NewHub()
	ps := joinAll(t, h, node("a", "x"), node("b", "x"))
	expect(t, ps[0], "join a", "join b")
	m := node("b", "x")
	m.Meta = map[string]string{"state": "busy"}
	if err := h.Update(m); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, ps[0].Events(), inmemWait)
	if ev.Kind != Update || ev.Member.Meta["state"] != "busy" {
		t.Fatalf("got %v %+v, want an update of b with state=busy", ev, ev.Member.Meta)
	}
	m.Meta["state"] = "mutated by caller"
	if got := ps[0].Members()[1].Meta["state"]; got != "busy" {
		t.Fatalf("hub shares the caller's map: state=%q", got)
	}
	if err := h.Update(node("zz", "x")); err == nil {
		t.Fatalf("updating an unknown member: want an error")
	}
}

// A member made by NewMember is seen join and fail by the others and sees
// nothing itself.
func TestInmemBlindMember(t *testing.T) {
	h := NewHub()
	w := joinAll(t, h, Member{Name: "watcher", Role: RoleCluster, Cluster: "x"})[0]
	expect(t, w, "join watcher")
	n := h.NewMember(node("n1", "x"))
	if err := n.Join(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "join n1")
	waitClosed(t, n.Events(), inmemWait)
	if got := names(n.Members()); got != "" {
		t.Fatalf("the blind member sees %q, want nothing", got)
	}
	joinAll(t, h, node("n2", "x"))
	expect(t, w, "join n2")
	if got := names(n.Members()); got != "" {
		t.Fatalf("after another join the blind member sees %q, want nothing", got)
	}
	if err := h.Fail("n1"); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "fail n1")
	if got := names(w.Members()); got != "n2,watcher" {
		t.Fatalf("the watcher sees %s, want n2,watcher", got)
	}
}
