package netem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

func TestSerialise(t *testing.T) {
	const ms = int64(time.Millisecond)
	cases := []struct {
		name                string
		now, free           int64
		n                   int
		rate                float64
		wantStart, wantDone int64
	}{
		{"idle link", 10 * ms, 0, 1000, 1e6, 10 * ms, 11 * ms},
		{"busy link queues", 10 * ms, 15 * ms, 1000, 1e6, 15 * ms, 16 * ms},
		{"free exactly now", 10 * ms, 10 * ms, 500, 1e6, 10 * ms, 10*ms + ms/2},
		{"unlimited ignores backlog", 10 * ms, 50 * ms, 1 << 20, 0, 10 * ms, 10 * ms},
		{"one byte rounds up", 0, 0, 1, 3e9, 0, 1},
		{"64 KiB at 125 MB/s", 0, 0, 65536, 125e6, 0, 524288},
	}
	for _, c := range cases {
		s, f := serialise(c.now, c.free, c.n, c.rate)
		if s != c.wantStart || f != c.wantDone {
			t.Errorf("%s: serialise(%d, %d, %d, %g) = (%d, %d), want (%d, %d)", c.name, c.now, c.free, c.n, c.rate, s, f, c.wantStart, c.wantDone)
		}
	}
	// Back-to-back reservations add up to n/rate in total.
	var free, now int64
	for range 100 {
		_, free = serialise(now, free, 10_000, 1e8)
	}
	if want := int64(100 * 10_000 * 10); free != want {
		t.Errorf("100 segments end at %d, want %d", free, want)
	}
}

func TestWireRate(t *testing.T) {
	cases := []struct {
		l    Link
		want float64
	}{
		{Link{}, 0},
		{Link{Bandwidth: 100e6}, 100e6},
		// 1 MB at 185 MB/s reported = 5.405 ms one way, of which 0.4 ms latency.
		{Link{Bandwidth: 185e6, Latency: 400 * time.Microsecond}, 1e6 / (1e6/185e6 - 400e-6)},
		// Latency longer than the message time: bandwidth unreachable.
		{Link{Bandwidth: 1e9, Latency: 2 * time.Millisecond}, 0},
	}
	for _, c := range cases {
		if got := WireRate(c.l); math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("WireRate(%v) = %g, want %g", c.l, got, c.want)
		}
	}
	// The ping-pong figure is reproduced: msg / (latency + msg/wire).
	l := Link{Bandwidth: 45e6, Latency: 1150 * time.Microsecond}
	got := BandwidthMsgSize / (l.Latency.Seconds() + BandwidthMsgSize/WireRate(l))
	if math.Abs(got-l.Bandwidth) > 1 {
		t.Errorf("round trip of WireRate: %g, want %g", got, l.Bandwidth)
	}
}

func testPlan(l Link) EgressPlan {
	return EgressPlan{Node: "n0", Cluster: "a", To: map[string]Link{"a": l, "b": l}}
}

func newTestEgress(l Link) *UserspaceEgress {
	e := newUserspace(testPlan(l), ptimer.Default(), 1)
	e.Overhead = Overhead{{0, 10 * time.Microsecond}, {400 * time.Microsecond, 30 * time.Microsecond}}
	return e
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) { return tcpPairBuf(t, 0) }

// tcpPairBuf sets the server's receive buffer before the connection is
// made (setting it afterwards can stall loopback TCP when it ends up below
// the MSS).
func tcpPairBuf(t *testing.T, rcvbuf int) (client, server net.Conn) {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-acc:
		return c, s
	case err := <-errc:
		t.Fatal(err)
	}
	return nil, nil
}

// record is writer id, sequence number, payload length, then payload bytes
// derived from all three.
func record(w, seq, n int) []byte {
	b := make([]byte, 12+n)
	binary.BigEndian.PutUint32(b[0:], uint32(w))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	binary.BigEndian.PutUint32(b[8:], uint32(n))
	for i := range n {
		b[12+i] = byte(w*31 + seq*7 + i)
	}
	return b
}

// checkRecords reads records until EOF and checks every writer's records
// arrive complete, uncorrupted and in order.
func checkRecords(r io.Reader, writers, perWriter int) error {
	next := make([]int, writers)
	var h [12]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		w, seq, n := int(binary.BigEndian.Uint32(h[0:])), int(binary.BigEndian.Uint32(h[4:])), int(binary.BigEndian.Uint32(h[8:]))
		if w >= writers || n > 1<<22 {
			return fmt.Errorf("corrupt header: writer %d len %d", w, n)
		}
		if seq != next[w] {
			return fmt.Errorf("writer %d: got record %d, want %d", w, seq, next[w])
		}
		next[w]++
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return err
		}
		if !bytes.Equal(p, record(w, seq, n)[12:]) {
			return fmt.Errorf("writer %d record %d corrupted", w, seq)
		}
	}
	for w, n := range next {
		if n != perWriter {
			return fmt.Errorf("writer %d: %d records arrived, want %d", w, n, perWriter)
		}
	}
	return nil
}

// peerOf wraps the receiving end of a connection whose other end e shapes,
// with an egress of the same links (a shaped connection is wrapped at
// both ends).
func peerOf(e *UserspaceEgress, s net.Conn) net.Conn {
	p := newUserspace(e.plan, e.line, 1)
	p.Overhead = e.Overhead
	return p.Wrap(s, "b")
}

func runConcurrentWriters(t *testing.T, e *UserspaceEgress, c, s net.Conn, writers, perWriter int, sizes []int) {
	t.Helper()
	sc := e.Wrap(c, "b")
	if sc == c {
		t.Fatal("Wrap did not shape a known destination")
	}
	rs := peerOf(e, s)
	got := make(chan error, 1)
	go func() { got <- checkRecords(rs, writers, perWriter) }()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := sc.Write(record(w, i, sizes[(w+i)%len(sizes)])); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("reader did not finish")
	}
	if d := e.Stats().Drops; d != 0 {
		t.Fatalf("%d bytes dropped", d)
	}
	if st := rs.(*shapedConn).e.Stats(); st.Segments == 0 || st.Bytes == 0 {
		t.Fatalf("the receiving end released nothing: %+v", st)
	}
}

func TestShaperIntegrityTCP(t *testing.T) {
	e := newTestEgress(Link{Bandwidth: 200e6, Latency: 300 * time.Microsecond, Jitter: 50 * time.Microsecond})
	c, s := tcpPair(t)
	defer s.Close()
	runConcurrentWriters(t, e, c, s, 4, 40, []int{1, 100, 70_000, 8, 200_000})
}

func TestShaperIntegrityPipe(t *testing.T) {
	// net.Pipe: each write blocks until the reader reads.
	e := newTestEgress(Link{Bandwidth: 500e6, Latency: 100 * time.Microsecond})
	c, s := net.Pipe()
	defer s.Close()
	runConcurrentWriters(t, e, c, s, 3, 30, []int{5, 65536, 3000, 150_000})
}

func TestShaperIntegritySmallSocketBuffer(t *testing.T) {
	// A tiny send buffer and a slow reader: writes block in the kernel and
	// the receiving end reads frames in pieces.
	e := newTestEgress(Link{Bandwidth: 0, Latency: 50 * time.Microsecond})
	c, s := tcpPairBuf(t, 65536)
	defer s.Close()
	if err := c.(*net.TCPConn).SetWriteBuffer(16384); err != nil {
		t.Fatal(err)
	}
	rs := peerOf(e, s)
	reads := 0
	slow := readerFunc(func(p []byte) (int, error) {
		if len(p) > 1000 {
			p = p[:1000]
		}
		if reads++; reads%50 == 0 {
			time.Sleep(time.Millisecond) // let the receive window fill
		}
		return rs.Read(p)
	})
	sc := e.Wrap(c, "a")
	got := make(chan error, 1)
	go func() { got <- checkRecords(slow, 2, 20) }()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := sc.Write(record(w, i, 50_000)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := e.Stats().Drops; d != 0 {
		t.Fatalf("%d bytes dropped", d)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestShaperLossIsDelayNotDrop(t *testing.T) {
	e := newTestEgress(Link{Bandwidth: 300e6, Latency: 200 * time.Microsecond, Loss: 0.3})
	c, s := tcpPair(t)
	defer s.Close()
	runConcurrentWriters(t, e, c, s, 2, 10, []int{100_000})
}

func TestShaperBackpressure(t *testing.T) {
	// 4 MB at 20 MB/s: the writer must never book the link further ahead
	// than the bound (delay + 1 MiB at the rate), whoever reads.
	e := newTestEgress(Link{Bandwidth: 20e6, Latency: time.Millisecond})
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b").(*shapedConn)
	rs := peerOf(e, s)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, rs); done <- err }()
	buf := make([]byte, 64<<10)
	p := sc.p
	seg := int64(float64(len(buf)) * 1e9 / p.rate)
	for range 64 {
		if _, err := sc.Write(buf); err != nil {
			t.Fatal(err)
		}
		if ahead := p.backlog(ptimer.Mono()); ahead > p.ahead+seg {
			t.Fatalf("the link is booked %v ahead, bound %v + one segment", time.Duration(ahead), time.Duration(p.ahead))
		}
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := rs.(*shapedConn).e.Stats().Bytes; got != 64*int64(len(buf)) {
		t.Fatalf("released %d bytes, want %d", got, 64*len(buf))
	}
}

func TestShaperWriteDeadline(t *testing.T) {
	// Nobody reads the pipe: the write blocks on it until the deadline.
	e := newTestEgress(Link{Bandwidth: 1e9, Latency: 100 * time.Microsecond})
	c, s := net.Pipe()
	defer s.Close()
	sc := e.Wrap(c, "b")
	defer sc.Close()
	if err := sc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var err error
	for range 1000 {
		if _, err = sc.Write(buf); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the write deadline: %v, want deadline exceeded", err)
	}
}

func TestShaperWriteDeadlineWhilePacing(t *testing.T) {
	// A slow link and a reader that keeps up: Write waits in the pacer,
	// and the deadline ends that wait.
	e := newTestEgress(Link{Bandwidth: 1e6, Latency: time.Millisecond})
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b")
	defer sc.Close()
	rs := peerOf(e, s)
	go func() { _, _ = io.Copy(io.Discard, rs) }()
	if err := sc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := sc.Write(make([]byte, 4<<20)) // 4 s of the link
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("pacing Write past the deadline: %v, want deadline exceeded", err)
	}
}

func TestShaperHoldsUntilDue(t *testing.T) {
	// Every message carries its send time; none may be read before send
	// time + the link's delay.
	e := newTestEgress(Link{Bandwidth: 100e6, Latency: 600 * time.Microsecond})
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b")
	rs := peerOf(e, s)
	delay := sc.(*shapedConn).p.delay
	const n = 200
	errc := make(chan error, 1)
	go func() {
		var b [8]byte
		for i := range n {
			if _, err := io.ReadFull(rs, b[:]); err != nil {
				errc <- err
				return
			}
			sent := int64(binary.BigEndian.Uint64(b[:]))
			if early := sent + int64(delay) - ptimer.Mono(); early > 0 {
				errc <- fmt.Errorf("message %d read %v before its delivery time", i, time.Duration(early))
				return
			}
		}
		errc <- nil
	}()
	var b [8]byte
	for range n {
		binary.BigEndian.PutUint64(b[:], uint64(ptimer.Mono()))
		if _, err := sc.Write(b[:]); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st := rs.(*shapedConn).e.Stats(); st.Segments != n {
		t.Fatalf("released %d segments, want %d", st.Segments, n)
	}
	_ = sc.Close()
}

func TestShaperReadDeadlineKeepsTheFrame(t *testing.T) {
	// A frame due in 300 ms; a read deadline 20 ms away ends the hold, and
	// the frame is still delivered whole by the next Read.
	e := newTestEgress(Link{Latency: 300 * time.Millisecond})
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b")
	defer sc.Close()
	rs := peerOf(e, s)
	if _, err := sc.Write([]byte("koala")); err != nil {
		t.Fatal(err)
	}
	if err := rs.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	if _, err := rs.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read during the hold: %v, want deadline exceeded", err)
	}
	if err := rs.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	n, err := rs.Read(b)
	if err != nil || string(b[:n]) != "koala" {
		t.Fatalf("Read after the deadline was lifted: %q, %v", b[:n], err)
	}
}

func TestShaperCloseDelivers(t *testing.T) {
	// What was written before Close reaches the peer whole, at its time.
	e := newTestEgress(Link{Bandwidth: 50e6, Latency: 2 * time.Millisecond})
	c, s := tcpPair(t)
	defer s.Close()
	sc := e.Wrap(c, "b")
	rs := peerOf(e, s)
	data := bytes.Repeat([]byte("koala"), 200_000) // 1 MB: 20 ms at 50 MB/s
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(rs)
		got <- b
	}()
	if _, err := sc.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("received %d bytes, want %d intact", len(b), len(data))
	}
}

func TestShaperCloseEndsAHold(t *testing.T) {
	e := newTestEgress(Link{Latency: 10 * time.Second})
	c, s := tcpPair(t)
	defer c.Close()
	sc := e.Wrap(c, "b")
	rs := peerOf(e, s)
	if _, err := sc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := rs.Read(make([]byte, 1)); errc <- err }()
	waittest.Until(t, 10*time.Second, "the frame to be read", func() bool {
		r := rs.(*shapedConn)
		if !r.rmu.TryLock() {
			return true // the reader holds it: waiting
		}
		r.rmu.Unlock()
		return false
	})
	_ = rs.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read held when closed: %v, want net.ErrClosed", err)
	}
}

func TestShaperPeerNotShaped(t *testing.T) {
	e := newTestEgress(Link{Latency: time.Millisecond})
	c, s := tcpPair(t)
	defer c.Close()
	rs := peerOf(e, s)
	defer rs.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Read(make([]byte, 8)); !errors.Is(err, ErrNotShaped) {
		t.Fatalf("unframed bytes: %v, want ErrNotShaped", err)
	}
}

func TestShaperNoGoroutineLeak(t *testing.T) {
	_ = ptimer.Default() // started once, stays
	before := runtime.NumGoroutine()
	for range 5 {
		e := newTestEgress(Link{Bandwidth: 100e6, Latency: 200 * time.Microsecond})
		c, s := net.Pipe()
		sc := e.Wrap(c, "b")
		rs := peerOf(e, s)
		done := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, rs); close(done) }()
		for range 10 {
			if _, err := sc.Write(make([]byte, 100_000)); err != nil {
				t.Fatal(err)
			}
		}
		if err := sc.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		rs.Close()
	}
	waittest.Until(t, 10*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestWrapUnknownAndClosed(t *testing.T) {
	e := newTestEgress(Link{Bandwidth: 100e6, Latency: time.Millisecond})
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	if got := e.Wrap(c, "nowhere"); got != c {
		t.Fatal("unknown destination was shaped")
	}
	e.Wrap(c, "nowhere")
	if u := e.Unknown(); u["nowhere"] != 2 || len(u) != 1 {
		t.Fatalf("Unknown() = %v", u)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := e.Wrap(c, "b"); got != c {
		t.Fatal("Wrap after Close shaped")
	}
}

func TestEffectiveAndDilation(t *testing.T) {
	plan := EgressPlan{Node: "n", Cluster: "a", To: map[string]Link{
		"a":   {Bandwidth: 500e6, Latency: 5 * time.Microsecond},
		"b":   {Bandwidth: 100e6, Latency: 400 * time.Microsecond},
		"n/a": {Unavailable: true},
	}}
	e := newUserspace(plan, nil, 2)
	e.Overhead = Overhead{{0, 12 * time.Microsecond}, {400 * time.Microsecond, 30 * time.Microsecond}}
	eff := e.Effective()
	if got := eff["a"]; got.Latency != 12*time.Microsecond || got.Bandwidth != 250e6 {
		t.Errorf("a: %+v, want latency raised to the 12 µs floor and bandwidth halved", got)
	}
	if got := eff["b"]; got.Latency != 800*time.Microsecond || got.Bandwidth != 50e6 {
		t.Errorf("b: %+v, want dilated x2", got)
	}
	if !eff["n/a"].Unavailable {
		t.Errorf("n/a lost its unavailability")
	}
	if p := e.paths["b"]; p.delay != 800*time.Microsecond-30*time.Microsecond {
		t.Errorf("b delay %v, want latency minus the overhead beyond the curve", p.delay)
	}
	if p := e.paths["a"]; p.delay != 0 {
		t.Errorf("a delay %v, want 0 below the floor", p.delay)
	}
}
