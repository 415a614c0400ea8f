package netem

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// SetLink changes a destination's rate, delay and loss for later writes,
// dilated as the plan's links; an unknown destination is an error.
func TestUserspaceSetLink(t *testing.T) {
	plan := EgressPlan{Node: "n0", Cluster: "a", To: map[string]Link{"b": {Latency: time.Millisecond, Bandwidth: 100e6}}}
	e := newUserspace(plan, nil, 2)
	e.Baseline = 10 * time.Microsecond
	if err := e.SetLink("nowhere", Link{}); err == nil {
		t.Fatal("SetLink of an unknown destination: no error")
	}
	if err := e.SetLink("b", Link{Latency: 3 * time.Millisecond, Bandwidth: 50e6, Loss: 0.5}); err != nil {
		t.Fatal(err)
	}
	if got := e.Effective()["b"]; got.Latency != 6*time.Millisecond || got.Bandwidth != 25e6 || got.Loss != 0.5 {
		t.Errorf("effective link %+v, want 6 ms, 25 MB/s, loss 0.5 (dilated x2)", got)
	}
	p := e.paths["b"]
	if p.delay != 6*time.Millisecond-10*time.Microsecond || p.rate != WireRate(Link{Latency: 6 * time.Millisecond, Bandwidth: 25e6}) ||
		p.loss != 0.5 || p.rtt != 12*time.Millisecond {
		t.Errorf("path: delay %v rate %g loss %g rtt %v", p.delay, p.rate, p.loss, p.rtt)
	}
	if e.Plan().To["b"].Latency != 6*time.Millisecond {
		t.Errorf("plan not updated: %+v", e.Plan().To["b"])
	}
	// An unlimited link's delivery is its delay after the booking.
	if err := e.SetLink("b", Link{Latency: 2 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if at := p.reserve(0, 1000); at != int64(4*time.Millisecond-10*time.Microsecond) {
		t.Errorf("delivery %v, want the new delay", time.Duration(at))
	}
}

// A cut destination holds writes until it heals: a write with a deadline
// ends with it and queues nothing; a blocked write goes on at the heal and
// its bytes arrive; a close ends a blocked write.
func TestUserspaceCut(t *testing.T) {
	e := newTestEgress(Link{Latency: 100 * time.Microsecond, Bandwidth: 100e6})
	if err := e.Cut("nowhere", true); err == nil {
		t.Fatal("Cut of an unknown destination: no error")
	}
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b")
	rs := peerOf(e, s)
	if err := e.Cut("b", true); err != nil {
		t.Fatal(err)
	}
	if err := sc.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Write([]byte("held")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a cut destination: %v, want the deadline", err)
	}
	if sc.(*shapedConn).last != 0 {
		t.Fatal("a cut write booked the link")
	}
	if err := sc.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := sc.Write([]byte("after the heal")); done <- err }()
	if err := e.Cut("b", false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("after the heal"))
	if _, err := io.ReadFull(rs, got); err != nil || string(got) != "after the heal" {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := e.Cut("b", true); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := sc.Write([]byte("never")); done <- err }()
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write blocked by a cut, then closed: %v, want net.ErrClosed", err)
	}
}
