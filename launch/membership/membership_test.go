package membership

import (
	"strings"
	"testing"
	"time"
)

// nextEvent reads one event from ch or fails the test at the deadline.
func nextEvent(t *testing.T, ch <-chan Event, within time.Duration) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatalf("event channel closed, want an event")
		}
		return e
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
	}
	return Event{}
}

// waitEvent reads events from ch until one matches, failing at the deadline
// or on an event reject says must not happen.
func waitEvent(t *testing.T, ch <-chan Event, within time.Duration, match, reject func(Event) bool) Event {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("event channel closed before the awaited event")
			}
			if reject != nil && reject(e) {
				t.Fatalf("unexpected event %v", e)
			}
			if match(e) {
				return e
			}
		case <-deadline.C:
			t.Fatalf("awaited event not seen within %v", within)
		}
	}
}

// waitClosed drains ch until it is closed or fails at the deadline.
func waitClosed(t *testing.T, ch <-chan Event, within time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	if !waitFor(closed, within) {
		t.Fatalf("event channel not closed within %v", within)
	}
}

// waitFor reports whether done is closed within d.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func names(ms []Member) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.Name
	}
	return strings.Join(s, ",")
}

func TestMetaRoundTrip(t *testing.T) {
	cases := []Member{
		{Name: "scheduler", Role: RoleScheduler, Addr: "10.200.0.2:8090"},
		{Name: "vrije-n001", Role: RoleNode, Cluster: "vrije", Addr: "10.200.1.1:8090", Meta: map[string]string{"procs": "2", "speed": "0.9375"}},
		{Name: "empty"},
	}
	for _, m := range cases {
		b, err := encodeMeta(m, metaFlagLeaving)
		if err != nil {
			t.Fatalf("encode %v: %v", m, err)
		}
		got, flags, err := decodeMeta(m.Name, b)
		if err != nil {
			t.Fatalf("decode %v: %v", m, err)
		}
		if !got.Equal(m) || flags != metaFlagLeaving {
			t.Fatalf("round trip: got %+v flags %b, want %+v flags %b", got, flags, m, metaFlagLeaving)
		}
	}
}

func TestMetaCompactAndLimited(t *testing.T) {
	m := Member{Name: "vrije-n001", Role: RoleNode, Cluster: "vrije", Addr: "10.200.1.1:8090"}
	b, err := encodeMeta(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 + 1 + 4 + 1 + 5 + 1 + 15 + 1; len(b) != want {
		t.Fatalf("encoded size %d, want %d", len(b), want)
	}
	m.Meta = map[string]string{"big": strings.Repeat("x", MaxMetaSize)}
	if _, err := encodeMeta(m, 0); err == nil {
		t.Fatalf("encoding %d bytes of meta: want an error", MaxMetaSize)
	}
	if _, err := NewMemberlist(DefaultConfig(m)); err == nil {
		t.Fatalf("NewMemberlist with oversized meta: want an error")
	}
}

func TestMetaRejectsGarbage(t *testing.T) {
	good, err := encodeMeta(Member{Name: "a", Role: "node", Meta: map[string]string{"k": "v"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{nil, {1}, {2, 0, 0, 0, 0, 0}, good[:len(good)-1], append(append([]byte{}, good...), 7)}
	for _, b := range bad {
		if _, _, err := decodeMeta("a", b); err == nil {
			t.Errorf("decodeMeta(%v): want an error", b)
		}
	}
}

func TestEventQueueNeverBlocksAndKeepsOrder(t *testing.T) {
	q := newEventQueue()
	const n = 10000 // far more than the channel buffer: push must not block
	for i := 0; i < n; i++ {
		q.push(Event{Kind: Join, Member: Member{Name: "m", Addr: string(rune('a' + i%26))}})
	}
	for i := 0; i < n; i++ {
		e := nextEvent(t, q.out, 5*time.Second)
		if want := string(rune('a' + i%26)); e.Member.Addr != want {
			t.Fatalf("event %d: addr %q, want %q", i, e.Member.Addr, want)
		}
	}
	q.close()
	q.push(Event{Kind: Join}) // dropped, must not panic
	waitClosed(t, q.out, 5*time.Second)
	q.close() // idempotent
}
