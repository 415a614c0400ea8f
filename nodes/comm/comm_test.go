package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/internal/waittest"
	"github.com/koala-emu/koala-emu/netem"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mesh(t *testing.T, n int, mod ...func(i int, o *Options)) []*Comm {
	t.Helper()
	opts := make([]Options, n)
	for i := range opts {
		opts[i] = Options{JobID: "test", Cluster: "c0"}
		for _, m := range mod {
			m(i, &opts[i])
		}
	}
	cs, err := ConnectLocal(testCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Abort(errors.New("test cleanup"))
		}
	})
	return cs
}

// spmd runs f on every rank and fails the test with the errors.
func spmd(t *testing.T, cs []*Comm, f func(c *Comm) error) {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func(i int, c *Comm) {
			defer wg.Done()
			errs[i] = f(c)
		}(i, c)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

func closeAll(t *testing.T, cs []*Comm) {
	t.Helper()
	spmd(t, cs, func(c *Comm) error { return c.Close() })
}

func TestSendRecvOrderAndTags(t *testing.T) {
	cs := mesh(t, 3)
	ctx := testCtx(t)
	const n = 500
	spmd(t, cs, func(c *Comm) error {
		switch c.Rank() {
		case 0:
			for i := 0; i < n; i++ {
				if err := c.Send(ctx, 1, 7, []byte(fmt.Sprint(i))); err != nil {
					return err
				}
			}
			// Unexpected messages: tag 2 sent before tag 1, received after.
			if err := c.Send(ctx, 1, 2, []byte("second")); err != nil {
				return err
			}
			return c.Send(ctx, 1, 1, []byte("first"))
		case 2:
			return c.Send(ctx, 1, 7, []byte("from two"))
		case 1:
			for i := 0; i < n; i++ {
				b, err := c.Recv(ctx, 0, 7)
				if err != nil {
					return err
				}
				if string(b) != fmt.Sprint(i) {
					return fmt.Errorf("message %d: got %q", i, b)
				}
			}
			b, err := c.Recv(ctx, 0, 1)
			if err != nil || string(b) != "first" {
				return fmt.Errorf("tag 1: %q %v", b, err)
			}
			b, err = c.Recv(ctx, 0, 2)
			if err != nil || string(b) != "second" {
				return fmt.Errorf("tag 2: %q %v", b, err)
			}
			b, err = c.Recv(ctx, 2, 7)
			if err != nil || string(b) != "from two" {
				return fmt.Errorf("from 2: %q %v", b, err)
			}
		}
		return nil
	})
	st := cs[0].Stats()
	if st.MsgsSent != n+2 {
		t.Errorf("rank 0 MsgsSent = %d, want %d", st.MsgsSent, n+2)
	}
	if got := cs[1].Stats().MsgsRecv; got != n+3 {
		t.Errorf("rank 1 MsgsRecv = %d, want %d", got, n+3)
	}
	closeAll(t, cs)
}

func TestSelfSendAndLargeMessages(t *testing.T) {
	cs := mesh(t, 2)
	ctx := testCtx(t)
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7)
	}
	spmd(t, cs, func(c *Comm) error {
		msg := []byte("me")
		if err := c.Send(ctx, c.Rank(), 0, msg); err != nil {
			return err
		}
		msg[0] = 'x' // the sent copy must not change
		b, err := c.Recv(ctx, c.Rank(), 0)
		if err != nil || string(b) != "me" {
			return fmt.Errorf("self: %q %v", b, err)
		}
		other := 1 - c.Rank()
		got, err := c.Sendrecv(ctx, other, 3, big, other, 3)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, big) {
			return errors.New("large message corrupted")
		}
		got, err = c.Sendrecv(ctx, other, 4, nil, other, 4)
		if err != nil || len(got) != 0 {
			return fmt.Errorf("empty message: %d bytes, %v", len(got), err)
		}
		return nil
	})
	closeAll(t, cs)
}

func TestInvalidArguments(t *testing.T) {
	cs := mesh(t, 2)
	ctx := testCtx(t)
	if err := cs[0].Send(ctx, 0, -1, nil); err == nil {
		t.Error("negative tag accepted")
	}
	if err := cs[0].Send(ctx, 5, 0, nil); err == nil {
		t.Error("rank out of range accepted")
	}
	if _, err := cs[0].Recv(ctx, -1, 0); err == nil {
		t.Error("recv from rank -1 accepted")
	}
	if _, err := cs[0].AllreduceFloat64(ctx, nil, Op(9)); err == nil {
		t.Error("unknown op accepted")
	}
	closeAll(t, cs)
}

func TestCollectives(t *testing.T) {
	// 1-9, and two larger sizes that are not powers of two, over
	// connections opened on demand.
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 23} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			cs := mesh(t, n)
			ctx := testCtx(t)
			var entered atomic.Int32
			spmd(t, cs, func(c *Comm) error {
				r := c.Rank()
				// Barrier: nobody leaves before everybody entered.
				entered.Add(1)
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if got := entered.Load(); got != int32(n) {
					return fmt.Errorf("left barrier with %d of %d entered", got, n)
				}
				// Bcast from every root.
				for root := 0; root < n; root++ {
					var in []byte
					if r == root {
						in = []byte(fmt.Sprintf("root %d", root))
					}
					b, err := c.Bcast(ctx, root, in)
					if err != nil {
						return err
					}
					if want := fmt.Sprintf("root %d", root); string(b) != want {
						return fmt.Errorf("bcast root %d: %q", root, b)
					}
				}
				// Allreduce with exact integer values.
				v := []float64{float64(r + 1), float64(-r), float64(r * r)}
				sum, err := c.AllreduceFloat64(ctx, v, Sum)
				if err != nil {
					return err
				}
				wantSum := []float64{float64(n * (n + 1) / 2), -float64(n * (n - 1) / 2), float64((n - 1) * n * (2*n - 1) / 6)}
				for i := range sum {
					if sum[i] != wantSum[i] {
						return fmt.Errorf("sum[%d] = %v, want %v", i, sum[i], wantSum[i])
					}
				}
				mx, err := c.AllreduceFloat64(ctx, v, Max)
				if err != nil {
					return err
				}
				mn, err := c.AllreduceFloat64(ctx, v, Min)
				if err != nil {
					return err
				}
				if mx[0] != float64(n) || mx[1] != 0 || mn[0] != 1 || mn[1] != -float64(n-1) {
					return fmt.Errorf("max %v min %v", mx, mn)
				}
				if v[0] != float64(r+1) {
					return errors.New("allreduce changed its input")
				}
				// Allgather: equal sizes (auto), variable sizes (ring, Bruck).
				for _, alg := range []string{"auto", "ring", "bruck"} {
					size := 3 + r
					if alg == "auto" {
						size = 5
					}
					mine := bytes.Repeat([]byte{byte(r + 1)}, size)
					var all [][]byte
					switch alg {
					case "auto":
						all, err = c.Allgather(ctx, mine)
					case "ring":
						all, err = c.AllgatherRing(ctx, mine)
					default:
						all, err = c.AllgatherBruck(ctx, mine)
					}
					if err != nil {
						return err
					}
					if len(all) != n {
						return fmt.Errorf("%s: %d blocks", alg, len(all))
					}
					for j, blk := range all {
						size := 3 + j
						if alg == "auto" {
							size = 5
						}
						if !bytes.Equal(blk, bytes.Repeat([]byte{byte(j + 1)}, size)) {
							return fmt.Errorf("%s: block %d = %v", alg, j, blk)
						}
					}
				}
				// Large allgather takes the ring.
				large := bytes.Repeat([]byte{byte(r)}, RingThreshold/n+1)
				all, err := c.Allgather(ctx, large)
				if err != nil {
					return err
				}
				for j, blk := range all {
					if len(blk) != len(large) || blk[0] != byte(j) {
						return fmt.Errorf("large allgather block %d wrong", j)
					}
				}
				// Gather to the last rank.
				root := n - 1
				g, err := c.Gather(ctx, root, []byte{byte(r)})
				if err != nil {
					return err
				}
				if r == root {
					for j, blk := range g {
						if len(blk) != 1 || blk[0] != byte(j) {
							return fmt.Errorf("gather block %d = %v", j, blk)
						}
					}
				} else if g != nil {
					return errors.New("gather returned data on a non-root rank")
				}
				return nil
			})
			closeAll(t, cs)
		})
	}
}

func TestAllreduceBitwiseIdentical(t *testing.T) {
	const n = 7
	cs := mesh(t, n)
	ctx := testCtx(t)
	res := make([][]float64, n)
	spmd(t, cs, func(c *Comm) error {
		rng := rand.New(rand.NewPCG(uint64(c.Rank()), 1))
		v := make([]float64, 16)
		for i := range v {
			v[i] = rng.NormFloat64() * 1e3
		}
		out, err := c.AllreduceFloat64(ctx, v, Sum)
		res[c.Rank()] = out
		return err
	})
	for r := 1; r < n; r++ {
		for i := range res[0] {
			if math.Float64bits(res[r][i]) != math.Float64bits(res[0][i]) {
				t.Fatalf("rank %d element %d: %v != rank 0's %v", r, i, res[r][i], res[0][i])
			}
		}
	}
	closeAll(t, cs)
}

func TestGracefulCloseKeepsSentData(t *testing.T) {
	cs := mesh(t, 2)
	ctx := testCtx(t)
	if err := cs[1].Send(ctx, 0, 5, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cs[1].Close() }()
	b, err := cs[0].Recv(ctx, 1, 5)
	if err != nil || string(b) != "last words" {
		t.Fatalf("got %q, %v", b, err)
	}
	_, err = cs[0].Recv(ctx, 1, 5)
	if !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("recv after peer's close: %v, want ErrPeerClosed", err)
	}
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := cs[0].Recv(ctx, 1, 5); !errors.Is(err, ErrClosed) {
		t.Fatalf("recv on closed comm: %v", err)
	}
}

func TestPeerCrashFailsPendingRecv(t *testing.T) {
	cs := mesh(t, 3)
	ctx := testCtx(t)
	// Connections are lazy: a barrier over 3 ranks connects every pair, so
	// both other ranks are connected to rank 1.
	spmd(t, cs, func(c *Comm) error { return c.Barrier(ctx) })
	errc := make(chan error, 2)
	go func() { _, err := cs[0].Recv(ctx, 1, 0); errc <- err }()
	go func() { _, err := cs[2].Recv(ctx, 0, 0); errc <- err }() // another peer: the comm breaks as a whole
	// Simulate a crash of rank 1: its connections vanish without goodbye.
	for _, l := range linksOf(cs[1]) {
		_ = l.raw.Close()
	}
	for i := 0; i < 2; i++ {
		err := <-errc
		if !errors.Is(err, ErrPeerLost) {
			t.Fatalf("pending recv: %v, want ErrPeerLost", err)
		}
	}
	if err := cs[0].Send(ctx, 2, 0, []byte("x")); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("send on broken comm: %v", err)
	}
	if err := cs[0].Barrier(ctx); err == nil {
		t.Fatal("barrier on broken comm succeeded")
	}
}

// linksOf returns every connection of c.
func linksOf(c *Comm) []*link {
	c.linkMu.Lock()
	defer c.linkMu.Unlock()
	links, _ := c.t().allLinks()
	return links
}

func TestAbortTellsPeersWhy(t *testing.T) {
	cs := mesh(t, 3)
	ctx := testCtx(t)
	// Connections are lazy and the abort reaches the peers rank 2 has a
	// connection with (the runner aborts the others): connect every pair.
	spmd(t, cs, func(c *Comm) error { return c.Barrier(ctx) })
	errc := make(chan error, 1)
	go func() { errc <- cs[0].Barrier(ctx) }()
	cs[2].Abort(errors.New("node 7 died"))
	err := <-errc
	if !errors.Is(err, ErrPeerAborted) || !bytes.Contains([]byte(err.Error()), []byte("node 7 died")) {
		t.Fatalf("barrier after abort: %v", err)
	}
}

func TestContextCancelUnblocks(t *testing.T) {
	cs := mesh(t, 2)
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 3)
	go func() { _, err := cs[0].Recv(ctx, 1, 9); errc <- err }()
	go func() { errc <- cs[1].Compute(ctx, time.Hour) }()
	go func() { _, err := cs[0].AllreduceFloat64(ctx, []float64{1}, Sum); errc <- err }()
	cancel()
	for i := 0; i < 3; i++ {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	}
	// The comm still works after a cancelled receive.
	ctx2 := testCtx(t)
	if err := cs[1].Send(ctx2, 0, 9, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if b, err := cs[0].Recv(ctx2, 1, 9); err != nil || string(b) != "late" {
		t.Fatalf("after cancel: %q %v", b, err)
	}
}

// Connect dials nobody, so it succeeds without peers; sending to a rank
// whose address refuses connections fails with ErrPeerClosed, receiving
// from a rank that never shows up waits until the context ends.
func TestConnectFailsWithoutPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e, err := Listen(ctx, Options{JobID: "j", Rank: 1}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Rank 0 never shows up; rank 2's address refuses connections.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	c, err := e.Connect(ctx, []Peer{{Rank: 0, Addr: "127.0.0.1:1"}, {Rank: 1, Addr: e.Addr()}, {Rank: 2, Addr: deadAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort(nil)
	if err := c.Send(ctx, 2, 0, []byte("x")); !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("send to a dead address: %v, want ErrPeerClosed", err)
	}
	if _, err := c.Recv(ctx, 0, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if st := c.Stats(); st.Connections != 0 {
		t.Errorf("%d connections, want 0", st.Connections)
	}
}

func TestHandshakeRefusesOtherJob(t *testing.T) {
	ctx := testCtx(t)
	e1, err := Listen(ctx, Options{JobID: "a", Rank: 1}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Close()
	_, err = dial(ctx, nil, e1.Addr(), "b", 0, 2)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("refused")) {
		t.Fatalf("dial from another job: %v", err)
	}
}

type recordingEgress struct {
	mu  sync.Mutex
	dst map[string]int
}

func (r *recordingEgress) Wrap(c net.Conn, dst string) net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dst[dst]++
	return c
}

func TestEgressWrapsEveryConnectionPerDestinationCluster(t *testing.T) {
	egs := make([]*recordingEgress, 4)
	clusters := []string{"a", "a", "b", "c"}
	cs := mesh(t, 4, func(i int, o *Options) {
		egs[i] = &recordingEgress{dst: map[string]int{}}
		o.Egress = egs[i]
		o.Cluster = clusters[i]
	})
	// Connections are lazy: connect every pair exactly once (the lower rank
	// dials, the higher one answers over the accepted connection).
	ctx := testCtx(t)
	spmd(t, cs, func(c *Comm) error {
		r, n := c.Rank(), c.Size()
		for j := r + 1; j < n; j++ {
			if err := c.Send(ctx, j, 0, nil); err != nil {
				return err
			}
		}
		for j := 0; j < r; j++ {
			if _, err := c.Recv(ctx, j, 0); err != nil {
				return err
			}
			if err := c.Send(ctx, j, 0, nil); err != nil {
				return err
			}
		}
		for j := r + 1; j < n; j++ {
			if _, err := c.Recv(ctx, j, 0); err != nil {
				return err
			}
		}
		return nil
	})
	for i, e := range egs {
		want := map[string]int{}
		for j, cl := range clusters {
			if j != i {
				want[cl]++
			}
		}
		if fmt.Sprint(e.dst) != fmt.Sprint(want) {
			t.Errorf("rank %d wrapped %v, want %v", i, e.dst, want)
		}
	}
	if cs[2].Cluster() != "b" || cs[2].Peers()[3].Cluster != "c" {
		t.Errorf("cluster bookkeeping wrong: %q %v", cs[2].Cluster(), cs[2].Peers())
	}
	closeAll(t, cs)
}

var _ netem.Egress = (*recordingEgress)(nil)

func TestComputeScalesAndPaysBackLateness(t *testing.T) {
	var mu sync.Mutex
	var asked []time.Duration
	late := 3 * time.Millisecond
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		asked = append(asked, d)
		mu.Unlock()
		return timerSleep(ctx, d+late) // a timer that is always late
	}
	cs := mesh(t, 1, func(_ int, o *Options) {
		o.Speed = 0.5
		o.Processors = 2
		o.Dilation = 3
		o.Sleep = sleep
	})
	ctx := testCtx(t)
	c := cs[0]
	if got, want := c.ComputeTime(10*time.Millisecond), 30*time.Millisecond; got != want {
		t.Fatalf("ComputeTime = %v, want %v", got, want)
	}
	for i := 0; i < 3; i++ {
		if err := c.Compute(ctx, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if asked[0] != 30*time.Millisecond {
		t.Errorf("first wait %v, want 30ms", asked[0])
	}
	for i := 1; i < len(asked); i++ {
		if asked[i] > 30*time.Millisecond-late {
			t.Errorf("wait %d = %v: lateness of the previous wait not paid back", i, asked[i])
		}
	}
	if st := c.Stats(); st.ComputeTime != 90*time.Millisecond {
		t.Errorf("ComputeTime stat %v, want 90ms", st.ComputeTime)
	}
	closeAll(t, cs)
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := testCtx(t)
	for round := 0; round < 3; round++ {
		opts := make([]Options, 5)
		cs, err := ConnectLocal(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		spmd(t, cs, func(c *Comm) error {
			_, err := c.Allgather(ctx, []byte{byte(c.Rank())})
			return err
		})
		pending := make(chan error, 1)
		go func() { _, err := cs[0].Recv(ctx, 1, 99); pending <- err }() // nobody sends
		closeAll(t, cs)
		if err := <-pending; err == nil {
			t.Fatal("pending recv succeeded after close")
		}
	}
	// A broken job leaks nothing either.
	cs, err := ConnectLocal(ctx, make([]Options, 3))
	if err != nil {
		t.Fatal(err)
	}
	cs[0].Abort(errors.New("boom"))
	cs[1].Abort(nil)
	if err := cs[2].Close(); err != nil {
		t.Logf("close after peers aborted: %v", err)
	}
	waittest.Until(t, 10*time.Second, fmt.Sprintf("the goroutines to return to %d", before), func() bool { return runtime.NumGoroutine() <= before })
}

func TestThroughUserspaceShaper(t *testing.T) {
	m := netem.Matrix{Clusters: []string{"a", "b"}, Links: [][]netem.Link{
		{{Latency: 30 * time.Microsecond, Bandwidth: 560e6}, {Latency: 2 * time.Millisecond, Bandwidth: 50e6}},
		{{Latency: 2 * time.Millisecond, Bandwidth: 50e6}, {Latency: 30 * time.Microsecond, Bandwidth: 560e6}},
	}}
	clusters := []string{"a", "a", "b", "b", "b"}
	shapers := make([]*netem.UserspaceEgress, len(clusters))
	cs := mesh(t, len(clusters), func(i int, o *Options) {
		plan, err := m.PlanFor(fmt.Sprint(i), clusters[i])
		if err != nil {
			t.Fatal(err)
		}
		shapers[i] = netem.NewUserspace(plan, nil, 1)
		o.Egress = shapers[i]
		o.Cluster = clusters[i]
	})
	ctx := testCtx(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: several segments
	spmd(t, cs, func(c *Comm) error {
		all, err := c.AllgatherRing(ctx, big[:1000*(c.Rank()+1)])
		if err != nil {
			return err
		}
		for j, b := range all {
			if !bytes.Equal(b, big[:1000*(j+1)]) {
				return fmt.Errorf("block %d corrupted", j)
			}
		}
		got, err := c.Bcast(ctx, 4, big)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, big) {
			return errors.New("bcast corrupted")
		}
		// A last message right before closing must still arrive.
		if c.Rank() == 2 {
			return c.Send(ctx, 0, 1, []byte("bye"))
		}
		if c.Rank() == 0 {
			b, err := c.Recv(ctx, 2, 1)
			if err != nil || string(b) != "bye" {
				return fmt.Errorf("last message: %q %v", b, err)
			}
		}
		return nil
	})
	closeAll(t, cs)
	for i, s := range shapers {
		st := s.Stats()
		if st.Bytes == 0 || st.Drops != 0 {
			t.Errorf("shaper of rank %d: %+v", i, st)
		}
	}
}

func TestConnectRetriesUntilPeerListens(t *testing.T) {
	ctx := testCtx(t)
	// Reserve an address for rank 1, which starts listening late.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr1 := l.Addr().String()
	_ = l.Close()
	e0, err := Listen(ctx, Options{JobID: "late", Rank: 0}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Close()
	peers := []Peer{{Rank: 0, Addr: e0.Addr()}, {Rank: 1, Addr: addr1}}
	type res struct {
		c   *Comm
		err error
	}
	r0 := make(chan res, 1)
	go func() { c, err := e0.Connect(ctx, peers); r0 <- res{c, err} }()
	// Rank 0 connects (lazily: it dials nobody yet); rank 1 shows up
	// afterwards.
	e1, err := Listen(ctx, Options{JobID: "late", Rank: 1}, addr1)
	if err != nil {
		t.Skipf("reserved port was taken meanwhile: %v", err)
	}
	defer e1.Close()
	c1, err := e1.Connect(ctx, peers)
	if err != nil {
		t.Fatal(err)
	}
	got := <-r0
	if got.err != nil {
		t.Fatal(got.err)
	}
	cs := []*Comm{got.c, c1}
	spmd(t, cs, func(c *Comm) error { return c.Barrier(ctx) })
	closeAll(t, cs)
}

// A node's load stretches its computation by its factor, from the next
// Compute on, and no longer once it is lifted; no CPU is spun.
func TestComputeStretchedByLoad(t *testing.T) {
	var mu sync.Mutex
	var asked []time.Duration
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		asked = append(asked, d)
		mu.Unlock()
		return nil
	}
	load := NewLoad()
	cs := mesh(t, 1, func(_ int, o *Options) {
		o.Processors = 2
		o.Sleep = sleep
		o.Load = load
	})
	ctx := testCtx(t)
	c := cs[0]
	work := 20 * time.Millisecond
	if err := c.Compute(ctx, work); err != nil {
		t.Fatal(err)
	}
	load.Set(ShareFactor(2, 10)) // 10 loading programs on a dual-processor node: 6x
	if got, want := c.ComputeTime(work), 60*time.Millisecond; got != want {
		t.Fatalf("loaded ComputeTime = %v, want %v", got, want)
	}
	if err := c.Compute(ctx, work); err != nil {
		t.Fatal(err)
	}
	load.Set(1)
	if err := c.Compute(ctx, work); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Millisecond, 60 * time.Millisecond, 10 * time.Millisecond}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", asked, want)
	}
	closeAll(t, cs)
}

func TestLoadFactor(t *testing.T) {
	var nilLoad *Load
	if nilLoad.Factor() != 1 || (&Load{}).Factor() != 1 {
		t.Error("a nil or zero load must be a factor of 1")
	}
	l := NewLoad()
	for _, tc := range []struct{ set, want float64 }{{3, 3}, {0.5, 1}, {math.NaN(), 1}, {11, 11}} {
		l.Set(tc.set)
		if got := l.Factor(); got != tc.want {
			t.Errorf("Set(%v): factor %v, want %v", tc.set, got, tc.want)
		}
	}
	for _, tc := range []struct {
		procs, programs int
		want            float64
	}{{1, 10, 11}, {2, 10, 6}, {2, 0, 1}, {0, 1, 2}, {2, -3, 1}} {
		if got := ShareFactor(tc.procs, tc.programs); got != tc.want {
			t.Errorf("ShareFactor(%d, %d) = %v, want %v", tc.procs, tc.programs, got, tc.want)
		}
	}
}
