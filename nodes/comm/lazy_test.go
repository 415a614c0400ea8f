package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
)

// TestLazyRingOpensOnlyNeighbourConnections runs a 64-rank ring: each rank
// dials its right neighbour and accepts its left one, so it holds exactly
// two connections (the full mesh held 63).
func TestLazyRingOpensOnlyNeighbourConnections(t *testing.T) {
	const n, rounds = 64, 5
	cs := mesh(t, n)
	ctx := testCtx(t)
	spmd(t, cs, func(c *Comm) error {
		r := c.Rank()
		for round := 0; round < rounds; round++ {
			msg := []byte(fmt.Sprintf("%d/%d", r, round))
			got, err := c.Sendrecv(ctx, (r+1)%n, 3, msg, (r+n-1)%n, 3)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("%d/%d", (r+n-1)%n, round); string(got) != want {
				return fmt.Errorf("round %d: got %q, want %q", round, got, want)
			}
		}
		return nil
	})
	for r, c := range cs {
		if got := c.Stats().Connections; got != 2 {
			t.Errorf("rank %d: %d connections, want 2", r, got)
		}
	}
	// Both directions: a pair may connect twice (both dial at once), never
	// more; results stay right.
	spmd(t, cs, func(c *Comm) error {
		r := c.Rank()
		for round := 0; round < rounds; round++ {
			got, err := c.Sendrecv(ctx, (r+n-1)%n, 4, []byte{byte(r)}, (r+1)%n, 4)
			if err != nil {
				return err
			}
			if int(got[0]) != (r+1)%n {
				return fmt.Errorf("left shift: got %d", got[0])
			}
		}
		return nil
	})
	for r, c := range cs {
		if got := c.Stats().Connections; got < 2 || got > 4 {
			t.Errorf("rank %d: %d connections after both directions, want 2..4", r, got)
		}
	}
	closeAll(t, cs)
}

// TestLazySimultaneousFirstSends has two ranks start sending to each other
// at once from several goroutines each: whether the pair ends up with one
// connection or two, every message arrives, in order per tag.
func TestLazySimultaneousFirstSends(t *testing.T) {
	const senders, msgs = 4, 200
	for round := 0; round < 5; round++ {
		cs := mesh(t, 2)
		ctx := testCtx(t)
		start := make(chan struct{})
		spmd(t, cs, func(c *Comm) error {
			peer := 1 - c.Rank()
			var wg sync.WaitGroup
			errs := make(chan error, 2*senders)
			for g := 0; g < senders; g++ {
				wg.Add(2)
				go func(tag int) {
					defer wg.Done()
					<-start
					for i := 0; i < msgs; i++ {
						var err error
						if i%3 == 0 {
							err = c.Isend(ctx, peer, tag, []byte(fmt.Sprint(i)))()
						} else {
							err = c.Send(ctx, peer, tag, []byte(fmt.Sprint(i)))
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}(g)
				go func(tag int) {
					defer wg.Done()
					for i := 0; i < msgs; i++ {
						b, err := c.Recv(ctx, peer, tag)
						if err != nil {
							errs <- err
							return
						}
						if string(b) != fmt.Sprint(i) {
							errs <- fmt.Errorf("tag %d: message %d is %q", tag, i, b)
							return
						}
					}
				}(g)
			}
			if c.Rank() == 0 {
				close(start)
			}
			wg.Wait()
			close(errs)
			return <-errs
		})
		for r, c := range cs {
			if got := c.Stats().Connections; got < 1 || got > 2 {
				t.Errorf("round %d rank %d: %d connections, want 1 or 2", round, r, got)
			}
		}
		closeAll(t, cs)
		if t.Failed() {
			return
		}
	}
}

// TestLazySendToClosedPeer: a rank that never talked to a peer that has
// closed fails its send with ErrPeerClosed, both while the peer is still
// waiting for goodbyes (its endpoint refuses the handshake) and once it has
// gone (nothing listens).
func TestLazySendToClosedPeer(t *testing.T) {
	cs := mesh(t, 3, func(_ int, o *Options) { o.CloseTimeout = 5 * time.Second })
	ctx := testCtx(t)
	// Ranks 0 and 1 are connected; rank 1's Close waits for rank 0's goodbye.
	if err := cs[0].Send(ctx, 1, 0, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cs[1].Close() }()
	// Wait until rank 1 refuses new connections.
	waittest.Until(t, 10*time.Second, "rank 1 to refuse new connections", func() bool {
		cs[1].linkMu.Lock()
		defer cs[1].linkMu.Unlock()
		return !cs[1].accepting
	})
	err := cs[2].Send(ctx, 1, 0, []byte("late"))
	if !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("send to a closing peer: %v, want ErrPeerClosed", err)
	}
	// The failure sticks: no second dial.
	if err2 := cs[2].Send(ctx, 1, 0, nil); !errors.Is(err2, ErrPeerClosed) {
		t.Fatalf("second send: %v", err2)
	}
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// Rank 0 is gone altogether now: its listener too.
	if err := cs[2].Send(ctx, 0, 0, []byte("later")); !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("send to a closed peer: %v, want ErrPeerClosed", err)
	}
	if cs[2].Err() != nil {
		t.Fatalf("sending to closed peers broke the communicator: %v", cs[2].Err())
	}
	if err := cs[2].Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLazyPeerCrashWithAcceptedConnection: a crash of a peer that dialed
// this rank (raw connection closed without goodbye) is reported as
// ErrPeerLost, and a fast peer's message sent before this rank's Connect
// is not lost.
func TestLazyPeerCrashWithAcceptedConnection(t *testing.T) {
	ctx := testCtx(t)
	e0, err := Listen(ctx, Options{JobID: "crash", Rank: 0}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Close()
	e1, err := Listen(ctx, Options{JobID: "crash", Rank: 1}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Close()
	peers := []Peer{{Rank: 0, Addr: e0.Addr()}, {Rank: 1, Addr: e1.Addr()}}
	c1, err := e1.Connect(ctx, peers)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Abort(nil)
	// Rank 1 sends before rank 0 called Connect.
	if err := c1.Send(ctx, 0, 7, []byte("early")); err != nil {
		t.Fatal(err)
	}
	c0, err := e0.Connect(ctx, peers)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Abort(nil)
	if b, err := c0.Recv(ctx, 1, 7); err != nil || string(b) != "early" {
		t.Fatalf("early message: %q %v", b, err)
	}
	if st := c0.Stats(); st.Connections != 1 {
		t.Errorf("rank 0: %d connections, want 1 (the accepted one)", st.Connections)
	}
	// Rank 0 answers over the accepted connection: no second one.
	if err := c0.Send(ctx, 1, 7, []byte("reply")); err != nil {
		t.Fatal(err)
	}
	if b, err := c1.Recv(ctx, 0, 7); err != nil || string(b) != "reply" {
		t.Fatalf("reply: %q %v", b, err)
	}
	if a, b := c0.Stats().Connections, c1.Stats().Connections; a != 1 || b != 1 {
		t.Errorf("connections %d and %d, want 1 each", a, b)
	}
	pending := make(chan error, 1)
	go func() { _, err := c0.Recv(ctx, 1, 8); pending <- err }()
	for _, l := range linksOf(c1) {
		_ = l.raw.Close()
	}
	if err := <-pending; !errors.Is(err, ErrPeerLost) {
		t.Fatalf("recv from a crashed peer: %v, want ErrPeerLost", err)
	}
}

// TestLazyRefusals: the handshake keeps refusing other jobs and ranks that
// must not dial after Connect; a rank that runs with another size (it has
// resized already) is kept for this rank's resize, and closed with the Comm
// if none comes.
func TestLazyRefusals(t *testing.T) {
	ctx := testCtx(t)
	e, err := Listen(ctx, Options{JobID: "r", Rank: 1}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Connect(ctx, []Peer{{Rank: 0, Addr: "127.0.0.1:1"}, {Rank: 1, Addr: e.Addr()}, {Rank: 2, Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job        string
		rank, size int
		want       string
	}{
		{"other", 0, 3, "job"},
		{"r", 1, 3, "must not dial"},
		{"r", 5, 3, "must not dial"},
	} {
		_, err := dial(ctx, nil, e.Addr(), tc.job, tc.rank, tc.size)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("dial as %s rank %d of %d: %v, want %q", tc.job, tc.rank, tc.size, err, tc.want)
		}
	}
	resized, err := dial(ctx, nil, e.Addr(), "r", 0, 2)
	if err != nil {
		t.Fatalf("dial as a rank of a resized job: %v", err)
	}
	defer resized.Close()
	waittest.Until(t, 10*time.Second, "the connection parked", func() bool {
		c.linkMu.Lock()
		defer c.linkMu.Unlock()
		return len(c.parked) == 1
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = resized.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := resized.Read(make([]byte, 1)); err == nil {
		t.Error("the parked connection is still open after the Comm closed")
	}
	// The endpoint closed with the Comm.
	if conn, err := net.Dial("tcp", e.Addr()); err == nil {
		_ = conn.Close()
		t.Error("endpoint still listens after its Comm closed")
	}
}

// TestLazyTwoConnectionsPerPair forces the outcome of a race of first
// sends: both ranks dialed, each sends over its own connection and reads
// both. Messages keep their order, goodbyes on both let Close finish
// without waiting for its timeout, and a crash is still seen.
func TestLazyTwoConnectionsPerPair(t *testing.T) {
	for _, crash := range []bool{false, true} {
		cs := mesh(t, 2, func(_ int, o *Options) { o.CloseTimeout = 20 * time.Second })
		ctx := testCtx(t)
		for _, c := range cs {
			s := c.t().slots[1-c.Rank()]
			raw, err := dial(ctx, nil, s.peer.Addr, c.opts.JobID, c.rank, 2)
			if err != nil {
				t.Fatal(err)
			}
			c.linkMu.Lock()
			s.out.Store(c.install(s, raw))
			c.linkMu.Unlock()
		}
		waitConns := func(c *Comm) {
			waittest.Until(t, 10*time.Second, "two connections", func() bool { return c.Stats().Connections == 2 })
		}
		waitConns(cs[0])
		waitConns(cs[1])
		spmd(t, cs, func(c *Comm) error {
			for i := 0; i < 100; i++ {
				got, err := c.Sendrecv(ctx, 1-c.Rank(), 1, []byte{byte(i)}, 1-c.Rank(), 1)
				if err != nil {
					return err
				}
				if got[0] != byte(i) {
					return fmt.Errorf("message %d came as %d", i, got[0])
				}
			}
			return nil
		})
		if crash {
			pending := make(chan error, 1)
			go func() { _, err := cs[0].Recv(ctx, 1, 9); pending <- err }()
			for _, l := range linksOf(cs[1]) {
				_ = l.raw.Close()
			}
			if err := <-pending; !errors.Is(err, ErrPeerLost) {
				t.Fatalf("recv from a crashed peer: %v, want ErrPeerLost", err)
			}
			continue
		}
		start := time.Now()
		closeAll(t, cs)
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("close took %v: goodbyes lost", el)
		}
	}
}

// TestLazyGrowNewRanksFirst: new ranks that join well before the current
// ranks resize wait for the old layout from rank 0's tree; the data
// arrives complete, nothing is left parked, and the grown communicator
// works.
func TestLazyGrowNewRanksFirst(t *testing.T) {
	ctx := testCtx(t)
	cs := mesh(t, 2)
	const total = 100003
	data := [][]byte{fill(0, total/2), fill(total/2, total-total/2)}
	js := []*joiner{newJoiner(t, 2), newJoiner(t, 3), newJoiner(t, 4)}
	peers := cs[0].Peers()
	for i, j := range js {
		peers = append(peers, Peer{Rank: 2 + i, Addr: j.ep.Addr(), Cluster: "c0"})
	}
	for _, j := range js {
		j.join(ctx, peers, 2)
	}
	parked := func() int {
		n := 0
		for _, c := range cs {
			c.linkMu.Lock()
			n += len(c.parked)
			c.linkMu.Unlock()
		}
		return n
	}
	// Every new rank has connected and waits for the grow.
	for _, j := range js {
		waittest.Until(t, 10*time.Second, "a new rank connected", func() bool {
			j.ep.mu.Lock()
			defer j.ep.mu.Unlock()
			return j.ep.comm != nil
		})
	}
	resized := time.Now()
	spmd(t, cs, func(c *Comm) error {
		d, _, err := c.Resize(ctx, peers, c.Rank(), data[c.Rank()])
		data[c.Rank()] = d
		return err
	})
	for i, r := range awaitJoins(t, js, 2) {
		cs = append(cs, r.c)
		data = append(data, r.data)
		// A new rank's part starts with the grow's first message to it,
		// not with its Join: its wait for the current ranks is not the
		// resize's.
		if el := time.Since(resized); r.st.Duration <= 0 || r.st.Duration > el {
			t.Errorf("new rank %d: resize duration %v, want within the %v since the current ranks began", 2+i, r.st.Duration, el)
		}
	}
	for r := range cs {
		checkBlock(t, "after grow", data[r], total, r, 5)
	}
	if n := parked(); n != 0 {
		t.Errorf("%d connections left parked after the grow", n)
	}
	spmd(t, cs, func(c *Comm) error {
		s, err := c.AllreduceFloat64(ctx, []float64{1}, Sum)
		if err == nil && s[0] != 5 {
			err = fmt.Errorf("allreduce %v", s)
		}
		return err
	})
	closeAll(t, cs)
}

// TestPreconnect opens connections without sending: once each way around
// a ring, so every rank holds two, and the ring then opens no more.
func TestPreconnect(t *testing.T) {
	const n = 7
	cs := mesh(t, n)
	ctx := testCtx(t)
	spmd(t, cs, func(c *Comm) error { return c.Preconnect(ctx, (c.Rank()+1)%n, c.Rank()) })
	// Every rank dialed its right neighbour and accepted its left one: wait
	// until the accepted ones are installed too.
	for _, c := range cs {
		waittest.Until(t, 10*time.Second, "the accepted connection installed", func() bool { return c.Stats().Connections >= 2 })
	}
	spmd(t, cs, func(c *Comm) error {
		r := c.Rank()
		got, err := c.Sendrecv(ctx, (r+n-1)%n, 1, []byte{byte(r)}, (r+1)%n, 1)
		if err == nil && int(got[0]) != (r+1)%n {
			err = fmt.Errorf("got %d", got[0])
		}
		return err
	})
	for r, c := range cs {
		if got := c.Stats().Connections; got != 2 {
			t.Errorf("rank %d: %d connections, want 2", r, got)
		}
		if got := c.Stats().MsgsSent; got != 1 {
			t.Errorf("rank %d: %d messages sent, want 1", r, got)
		}
	}
	if err := cs[0].Preconnect(ctx, n); err == nil {
		t.Error("preconnect to a rank out of range succeeded")
	}
	closeAll(t, cs)
}

// Each collective's peer set is symmetric and complete: after
// ConnectPeers with it, the collective opens no further connection, and
// each pair of peers holds exactly one connection (the lower rank dialed).
func TestCollectivePeers(t *testing.T) {
	big := make([]byte, RingThreshold) // one block large enough for the ring
	for _, n := range []int{1, 2, 3, 5, 6, 8, 13} {
		for _, tc := range []struct {
			name  string
			peers func(n, r int) []int
			run   func(ctx context.Context, c *Comm) error
		}{
			{"barrier", BarrierPeers, func(ctx context.Context, c *Comm) error { return c.Barrier(ctx) }},
			{"bcast from 2", func(n, r int) []int { return BcastPeers(n, r, 2%n) },
				func(ctx context.Context, c *Comm) error { _, err := c.Bcast(ctx, 2%c.Size(), []byte("x")); return err }},
			{"allreduce", AllreducePeers,
				func(ctx context.Context, c *Comm) error {
					_, err := c.AllreduceFloat64(ctx, []float64{1}, Sum)
					return err
				}},
			{"allgather bruck", func(n, r int) []int { return AllgatherPeers(n, r, 8) },
				func(ctx context.Context, c *Comm) error { _, err := c.Allgather(ctx, make([]byte, 8)); return err }},
			{"allgather ring", func(n, r int) []int { return AllgatherPeers(n, r, len(big)) },
				func(ctx context.Context, c *Comm) error { _, err := c.Allgather(ctx, big); return err }},
			{"gather to 1", func(n, r int) []int { return GatherPeers(n, r, 1%n) },
				func(ctx context.Context, c *Comm) error { _, err := c.Gather(ctx, 1%c.Size(), []byte("x")); return err }},
		} {
			t.Run(fmt.Sprintf("%s n=%d", tc.name, n), func(t *testing.T) {
				for r := range n {
					for _, p := range tc.peers(n, r) {
						if !slices.Contains(tc.peers(n, p), r) {
							t.Fatalf("rank %d names %d, which does not name it", r, p)
						}
					}
				}
				cs := mesh(t, n)
				ctx := testCtx(t)
				spmd(t, cs, func(c *Comm) error {
					peers := tc.peers(n, c.Rank())
					if err := c.ConnectPeers(ctx, peers...); err != nil {
						return err
					}
					if got := c.Stats().Connections; got != int64(len(peers)) {
						return fmt.Errorf("rank %d: %d connections after ConnectPeers(%v)", c.Rank(), got, peers)
					}
					if err := tc.run(ctx, c); err != nil {
						return err
					}
					if got := c.Stats().Connections; got != int64(len(peers)) {
						return fmt.Errorf("rank %d: the collective opened %d connections beyond its peers %v", c.Rank(), got-int64(len(peers)), peers)
					}
					return nil
				})
			})
		}
	}
}
