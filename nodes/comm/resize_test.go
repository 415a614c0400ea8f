package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
)

// pattern is the content of byte i of the test's distributed array.
func pattern(i int64) byte { return byte(i*131 + i>>9 + 7) }

// fill returns block [off, off+n) of the array.
func fill(off, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = pattern(off + int64(i))
	}
	return b
}

// checkBlock verifies that b is the balanced block of rank r of n over total.
func checkBlock(t *testing.T, what string, b []byte, total int64, r, n int) {
	t.Helper()
	lens, offs := balanced(total, n)
	if int64(len(b)) != lens[r] {
		t.Fatalf("%s: rank %d of %d holds %d bytes, want %d", what, r, n, len(b), lens[r])
	}
	for i, x := range b {
		if x != pattern(offs[r]+int64(i)) {
			t.Fatalf("%s: rank %d byte %d (global %d) = %d, want %d", what, r, i, offs[r]+int64(i), x, pattern(offs[r]+int64(i)))
		}
	}
}

// countingEgress counts the bytes written on every connection it wraps:
// what really went onto the sockets.
type countingEgress struct {
	wrapped atomic.Int64
	written atomic.Int64
}

func (e *countingEgress) Wrap(c net.Conn, dst string) net.Conn {
	e.wrapped.Add(1)
	return &countingConn{Conn: c, n: &e.written}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// joiner is a new rank waiting to join.
type joiner struct {
	ep  *Endpoint
	eg  *countingEgress
	res chan joinResult
}

type joinResult struct {
	c    *Comm
	data []byte
	st   ResizeStats
	err  error
}

func newJoiner(t *testing.T, rank int) *joiner {
	t.Helper()
	eg := &countingEgress{}
	ep, err := Listen(testCtx(t), Options{JobID: "test", Rank: rank, Cluster: "c0", Egress: eg}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return &joiner{ep: ep, eg: eg, res: make(chan joinResult, 1)}
}

func (j *joiner) join(ctx context.Context, peers []Peer, oldSize int) {
	go func() {
		c, d, st, err := j.ep.Join(ctx, peers, oldSize)
		j.res <- joinResult{c, d, st, err}
	}()
}

// awaitJoins returns the joiners' results (ranks first, first+1, ...),
// failing the test on a join's error.
func awaitJoins(t *testing.T, js []*joiner, first int) []joinResult {
	t.Helper()
	out := make([]joinResult, len(js))
	for i, j := range js {
		out[i] = <-j.res
		if out[i].err != nil {
			t.Fatalf("join of rank %d: %v", first+i, out[i].err)
		}
	}
	return out
}

// TestResizeGrowThenShrink grows a job 2 -> 4 and shrinks it 4 -> 3 with
// its data, checking that every rank ends with exactly its balanced block,
// that the moved bytes were counted and went onto the sockets, and that
// the resized communicator works for point-to-point and collectives.
func TestResizeGrowThenShrink(t *testing.T) {
	ctx := testCtx(t)
	egs := make([]*countingEgress, 4)
	cs := mesh(t, 2, func(i int, o *Options) { egs[i] = &countingEgress{}; o.Egress = egs[i] })
	const total = 1<<20 + 3
	// Uneven start: rank 0 holds 100 bytes, rank 1 the rest.
	data := [][]byte{fill(0, 100), fill(100, total-100)}

	// Grow 2 -> 4.
	js := []*joiner{newJoiner(t, 2), newJoiner(t, 3)}
	egs[2], egs[3] = js[0].eg, js[1].eg
	peers := cs[0].Peers()
	for i, j := range js {
		peers = append(peers, Peer{Rank: 2 + i, Addr: j.ep.Addr(), Cluster: "c0"})
	}
	for _, j := range js {
		j.join(ctx, peers, 2)
	}
	sts := make([]ResizeStats, 4)
	spmd(t, cs, func(c *Comm) error {
		d, st, err := c.Resize(ctx, peers, c.Rank(), data[c.Rank()])
		data[c.Rank()], sts[c.Rank()] = d, st
		return err
	})
	for i, r := range awaitJoins(t, js, 2) {
		cs = append(cs, r.c)
		data = append(data, r.data)
		sts[2+i] = r.st
	}
	if t.Failed() {
		t.FailNow()
	}
	var sent, recv, kept int64
	for r, c := range cs {
		if c.Size() != 4 || c.Rank() != r {
			t.Fatalf("rank %d: size %d rank %d after grow", r, c.Size(), c.Rank())
		}
		checkBlock(t, "after grow", data[r], total, r, 4)
		sent += sts[r].BytesSent
		recv += sts[r].BytesRecv
		kept += sts[r].Kept
		if sts[r].OldSize != 2 || sts[r].NewSize != 4 || sts[r].Duration <= 0 {
			t.Errorf("rank %d stats %+v", r, sts[r])
		}
	}
	// Old blocks [0,100) and [100,total); new ones of total/4: rank 0 keeps
	// its 100 bytes, rank 1 keeps the part of its old block inside [q, 2q).
	q := int64(total/4 + 1) // total%4 == 3: the first three blocks get one more
	if wantKept := 100 + q; kept != wantKept {
		t.Errorf("kept %d bytes, want %d", kept, wantKept)
	}
	if sent != total-kept || recv != sent {
		t.Errorf("moved: sent %d recv %d, want %d", sent, recv, total-kept)
	}
	// The moved bytes went through the shaped connections.
	var written int64
	for _, e := range egs {
		written += e.written.Load()
	}
	if written < sent {
		t.Errorf("sockets carried %d bytes, resize sent %d", written, sent)
	}
	// Connections are lazy: each rank wrapped those it opened or accepted
	// (at most one per peer and direction).
	for r, c := range cs {
		if w, n := egs[r].wrapped.Load(), c.Stats().Connections; w != n || n < 1 || n > 6 {
			t.Errorf("rank %d: %d connections wrapped, %d counted", r, w, n)
		}
	}
	// The grown job communicates.
	spmd(t, cs, func(c *Comm) error {
		n := c.Size()
		got, err := c.Sendrecv(ctx, (c.Rank()+1)%n, 5, []byte{byte(c.Rank())}, (c.Rank()+n-1)%n, 5)
		if err != nil {
			return err
		}
		if int(got[0]) != (c.Rank()+n-1)%n {
			return fmt.Errorf("ring got %d", got[0])
		}
		s, err := c.AllreduceFloat64(ctx, []float64{float64(c.Rank())}, Sum)
		if err != nil {
			return err
		}
		if s[0] != 6 {
			return fmt.Errorf("allreduce %v", s)
		}
		return nil
	})

	// Shrink 4 -> 3: rank 3 leaves.
	peers = cs[0].Peers()[:3]
	spmd(t, cs, func(c *Comm) error {
		self := c.Rank()
		if self == 3 {
			self = -1
		}
		d, st, err := c.Resize(ctx, peers, self, data[c.Rank()])
		data[c.Rank()], sts[c.Rank()] = d, st
		return err
	})
	if t.Failed() {
		t.FailNow()
	}
	if data[3] != nil || !errors.Is(cs[3].Err(), ErrClosed) {
		t.Errorf("departed rank: data %d bytes, err %v", len(data[3]), cs[3].Err())
	}
	if sts[3].BytesSent != int64(total/4) || sts[3].BytesRecv != 0 {
		t.Errorf("departed rank moved %+v, want all of its %d bytes sent", sts[3], total/4)
	}
	cs = cs[:3]
	for r, c := range cs {
		if c.Size() != 3 {
			t.Fatalf("rank %d: size %d after shrink", r, c.Size())
		}
		checkBlock(t, "after shrink", data[r], total, r, 3)
		if st := c.Stats(); st.Resizes != 2 || st.ResizeBytesSent+st.ResizeBytesRecv == 0 || st.ResizeTime <= 0 {
			t.Errorf("rank %d counters %+v", r, st)
		}
	}
	spmd(t, cs, func(c *Comm) error {
		got, err := c.Allgather(ctx, []byte{byte(10 + c.Rank())})
		if err != nil {
			return err
		}
		for i, b := range got {
			if len(b) != 1 || int(b[0]) != 10+i {
				return fmt.Errorf("allgather %v", got)
			}
		}
		if err := c.Send(ctx, 3, 0, nil); err == nil || !strings.Contains(err.Error(), "out of range") {
			return fmt.Errorf("send to the departed rank: %v", err)
		}
		return nil
	})
	closeAll(t, cs)
}

// TestResizeShrinkToMinimum shrinks 5 -> 2 with concurrent departures and
// checks the data and that no goroutine is left.
func TestResizeShrinkToMinimum(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := testCtx(t)
	cs, err := ConnectLocal(ctx, make([]Options, 5))
	if err != nil {
		t.Fatal(err)
	}
	const total = 300001
	lens, offs := balanced(total, 5)
	data := make([][]byte, 5)
	for r := range data {
		data[r] = fill(offs[r], lens[r])
	}
	peers := cs[0].Peers()[:2]
	var moved atomic.Int64
	spmd(t, cs, func(c *Comm) error {
		self := c.Rank()
		if self >= 2 {
			self = -1
		}
		d, st, err := c.Resize(ctx, peers, self, data[c.Rank()])
		data[c.Rank()] = d
		moved.Add(st.BytesRecv)
		return err
	})
	if t.Failed() {
		t.FailNow()
	}
	for r := 0; r < 2; r++ {
		checkBlock(t, "after shrink", data[r], total, r, 2)
	}
	// Rank 0 keeps its old block (inside its new one), rank 1's old block
	// lies wholly in rank 0's new one: everything else moved.
	if want := int64(total) - lens[0]; moved.Load() != want {
		t.Errorf("received %d bytes, want %d", moved.Load(), want)
	}
	closeAll(t, cs[:2])
	waittest.Until(t, 10*time.Second, fmt.Sprintf("the goroutines to return to %d", before), func() bool { return runtime.NumGoroutine() <= before })
}

func TestResizeRejectsBadTables(t *testing.T) {
	ctx := testCtx(t)
	cs := mesh(t, 3)
	peers := cs[0].Peers()
	swapped := []Peer{peers[1], peers[0]}
	swapped[0].Rank, swapped[1].Rank = 0, 1
	cases := []struct {
		name  string
		rank  int
		peers []Peer
		self  int
		want  string
	}{
		{"renumber", 1, peers[:2], 0, "keep their numbers"},
		{"moved address", 0, swapped, 0, "ranks keep their numbers"},
		{"low rank leaves", 0, peers[:2], -1, "cannot leave"},
		{"self outside", 2, peers[:2], 2, "not in the new table"},
		{"gap", 0, []Peer{peers[0], peers[2]}, 0, "exactly once"},
	}
	for _, tc := range cases {
		_, _, err := cs[tc.rank].Resize(ctx, tc.peers, tc.self, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	j := newJoiner(t, 1)
	if _, _, _, err := j.ep.Join(ctx, peers, 2); err == nil || !strings.Contains(err.Error(), "not a new rank") {
		t.Errorf("join as an old rank: %v", err)
	}
	// The communicator still works after rejected resizes.
	spmd(t, cs, func(c *Comm) error { return c.Barrier(ctx) })
	closeAll(t, cs)
}

// TestResizeRepeatedUnderTraffic grows and shrinks a job many times while
// user messages with the same tags flow between safe points.
func TestResizeRepeatedUnderTraffic(t *testing.T) {
	ctx := testCtx(t)
	cs := mesh(t, 2)
	const total = 64<<10 + 5
	data := [][]byte{fill(0, total/2), fill(total/2, total-total/2)}
	sizes := []int{2, 3, 5, 4, 2, 6, 3}
	var mu sync.Mutex
	for step, n := range sizes[1:] {
		old := len(cs)
		peers := cs[0].Peers()
		var js []*joiner
		if n > old {
			for r := old; r < n; r++ {
				j := newJoiner(t, r)
				js = append(js, j)
				peers = append(peers, Peer{Rank: r, Addr: j.ep.Addr(), Cluster: "c0"})
			}
			for _, j := range js {
				j.join(ctx, peers, old)
			}
		} else {
			peers = peers[:n]
		}
		spmd(t, cs, func(c *Comm) error {
			r := c.Rank()
			// Traffic before the safe point.
			if _, err := c.Sendrecv(ctx, (r+1)%old, 1, []byte{byte(step)}, (r+old-1)%old, 1); err != nil {
				return err
			}
			self := r
			if r >= n {
				self = -1
			}
			d, _, err := c.Resize(ctx, peers, self, data[r])
			mu.Lock()
			data[r] = d
			mu.Unlock()
			return err
		})
		for _, j := range js {
			res := <-j.res
			if res.err != nil {
				t.Fatalf("step %d: join: %v", step, res.err)
			}
			cs = append(cs, res.c)
			data = append(data, res.data)
		}
		if t.Failed() {
			t.FailNow()
		}
		cs, data = cs[:n], data[:n]
		for r := range cs {
			checkBlock(t, fmt.Sprintf("step %d (%d->%d)", step, old, n), data[r], total, r, n)
		}
		spmd(t, cs, func(c *Comm) error {
			s, err := c.AllreduceFloat64(ctx, []float64{1}, Sum)
			if err == nil && int(s[0]) != n {
				err = fmt.Errorf("allreduce counted %v ranks", s[0])
			}
			return err
		})
	}
	closeAll(t, cs)
}

// A survivor of a shrink that sends to another survivor for the first time
// may get there before that survivor has finished its shrink (it still
// waits for a departing rank's goodbye): the connection, dialed with the
// smaller table, is kept for the shrink and installed by it, and the
// message arrives. 8 ranks shrink to 6; departing rank 7 is alone in
// cluster y, and rank 0 reads nothing from y (only rank 7's goodbye comes
// that way) until it has parked rank 5's connection. Rank 5's new block
// comes from ranks 5-7, rank 0's from 0-1: the two have no connection
// before rank 5 sends.
func TestResizeShrinkSurvivorSendsFirst(t *testing.T) {
	ctx := testCtx(t)
	gate := make(chan struct{})
	cs := mesh(t, 8, func(i int, o *Options) {
		if i == 7 {
			o.Cluster = "y"
		}
		if i == 0 {
			o.Egress = gatedEgress{gate: gate, dst: "y"}
		}
	})
	go func() {
		defer close(gate)
		c := cs[0]
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			c.linkMu.Lock()
			n := len(c.parked)
			c.linkMu.Unlock()
			if n > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const total = 8000
	lens, offs := balanced(total, 8)
	data := make([][]byte, 8)
	for r := range data {
		data[r] = fill(offs[r], lens[r])
	}
	peers := cs[0].Peers()[:6]
	spmd(t, cs, func(c *Comm) error {
		self := c.Rank()
		if self >= 6 {
			self = -1
		}
		d, _, err := c.Resize(ctx, peers, self, data[c.Rank()])
		if err != nil || self == -1 {
			return err
		}
		data[c.Rank()] = d
		switch c.Rank() {
		case 5:
			return c.Send(ctx, 0, 9, []byte("after the shrink"))
		case 0:
			b, err := c.Recv(ctx, 5, 9)
			if err == nil && string(b) != "after the shrink" {
				err = fmt.Errorf("rank 0 got %q", b)
			}
			return err
		}
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	for r := 0; r < 6; r++ {
		checkBlock(t, "after shrink", data[r], total, r, 6)
	}
	closeAll(t, cs[:6])
}

// gatedEgress holds every read from cluster dst until gate is closed.
type gatedEgress struct {
	gate <-chan struct{}
	dst  string
}

func (e gatedEgress) Wrap(c net.Conn, dst string) net.Conn {
	if dst != e.dst {
		return c
	}
	return &gatedConn{Conn: c, gate: e.gate}
}

type gatedConn struct {
	net.Conn
	gate <-chan struct{}
}

func (c *gatedConn) Read(b []byte) (int, error) {
	<-c.gate
	return c.Conn.Read(b)
}
