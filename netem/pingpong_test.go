package netem

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

func TestVerdict(t *testing.T) {
	us := time.Microsecond
	target := Link{Bandwidth: 185e6, Latency: 400 * us}
	cases := []struct {
		name     string
		target   Link
		bw       float64
		lat      time.Duration
		baseline time.Duration
		want     string
	}{
		{"exact", target, 185e6, 400 * us, 30 * us, VerdictPass},
		{"bw -4.9%", target, 185e6 * 0.951, 400 * us, 30 * us, VerdictPass},
		{"bw -5.5%", target, 185e6 * 0.945, 400 * us, 30 * us, VerdictFail},
		{"bw +6%", target, 185e6 * 1.06, 400 * us, 30 * us, VerdictFail},
		{"lat +9%", target, 185e6, 436 * us, 30 * us, VerdictPass},
		{"lat +12%", target, 185e6, 448 * us, 30 * us, VerdictFail},
		{"lat -12%", target, 185e6, 352 * us, 30 * us, VerdictFail},
		// 30 µs target: tolerance is the 20 µs floor, not 3 µs.
		{"small lat +19us", Link{Bandwidth: 561e6, Latency: 30 * us}, 561e6, 49 * us, 10 * us, VerdictPass},
		{"small lat +25us", Link{Bandwidth: 561e6, Latency: 30 * us}, 561e6, 55 * us, 10 * us, VerdictFail},
		// Baseline above the target: nothing added, measured at the floor.
		{"floor", Link{Bandwidth: 561e6, Latency: 30 * us}, 561e6, 62 * us, 60 * us, VerdictFloor},
		{"floor but far above baseline", Link{Bandwidth: 561e6, Latency: 30 * us}, 561e6, 120 * us, 60 * us, VerdictFail},
		{"floor needs bandwidth", Link{Bandwidth: 561e6, Latency: 30 * us}, 400e6, 62 * us, 60 * us, VerdictFail},
		{"unlimited bandwidth", Link{Latency: 100 * us}, 3e9, 105 * us, 10 * us, VerdictPass},
	}
	for _, c := range cases {
		v, bwErr, latErr := Verdict(c.target, PingPongResult{Bandwidth: c.bw, Latency: c.lat}, c.baseline)
		if v != c.want {
			t.Errorf("%s: verdict %s (bw %+.3f, lat %+.3f), want %s", c.name, v, bwErr, latErr, c.want)
		}
	}
	_, bwErr, latErr := Verdict(target, PingPongResult{Bandwidth: 185e6 * 0.9, Latency: 500 * us}, 0)
	if d := bwErr + 0.1; d > 1e-9 || d < -1e-9 {
		t.Errorf("bwErr %v, want -0.1", bwErr)
	}
	if d := latErr - 0.25; d > 1e-9 || d < -1e-9 {
		t.Errorf("latErr %v, want 0.25", latErr)
	}
}

func TestSummarizeCalibration(t *testing.T) {
	// A 500 µs target allows 50 µs of p99 release lateness.
	ok := CalibrationRow{Src: "a", Dst: "a", Verdict: VerdictPass, Target: Link{Latency: 500 * time.Microsecond}}
	ok.Lateness.P99 = 10 * time.Microsecond
	floor := CalibrationRow{Src: "a", Dst: "b", Verdict: VerdictFloor, Target: Link{Latency: 500 * time.Microsecond}}
	s := SummarizeCalibration([]CalibrationRow{ok, floor})
	if s.Failed || s.Pass != 1 || s.Floor != 1 {
		t.Fatalf("good run: %+v", s)
	}
	late := ok
	late.Lateness.P99 = 80 * time.Microsecond
	if s := SummarizeCalibration([]CalibrationRow{ok, late}); !s.Failed || !strings.Contains(s.Reason, "lateness") {
		t.Fatalf("late run: %+v", s)
	}
	// The limit is relative: 10 µs is too late for a 30 µs link, 60 µs is
	// fine for a 1 ms one.
	short := ok
	short.Target.Latency = 30 * time.Microsecond
	if s := SummarizeCalibration([]CalibrationRow{short}); !s.Failed || !strings.Contains(s.Reason, "10% of its 30µs") {
		t.Fatalf("short link: %+v", s)
	}
	long := ok
	long.Target.Latency = time.Millisecond
	long.Lateness.P99 = 60 * time.Microsecond
	if s := SummarizeCalibration([]CalibrationRow{long}); s.Failed {
		t.Fatalf("long link: %+v", s)
	}
	dropped := ok
	dropped.Drops = 10
	if s := SummarizeCalibration([]CalibrationRow{dropped}); !s.Failed || !strings.Contains(s.Reason, "dropped") {
		t.Fatalf("dropping run: %+v", s)
	}
	bad := ok
	bad.Verdict = VerdictFail
	if s := SummarizeCalibration([]CalibrationRow{bad, ok}); !s.Failed || s.Fail != 1 {
		t.Fatalf("failing run: %+v", s)
	}
	var sb strings.Builder
	PrintCalibration(&sb, []CalibrationRow{ok, bad}, SummarizeCalibration([]CalibrationRow{bad, ok}))
	if !strings.Contains(sb.String(), "a-a") || !strings.Contains(sb.String(), "FAILED") {
		t.Fatalf("table:\n%s", sb.String())
	}
}

func startPingPong(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServePingPong(ctx, ln) }()
	return ln.Addr().String(), func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("ServePingPong: %v", err)
		}
	}
}

func TestPingPongUnshaped(t *testing.T) {
	addr, stop := startPingPong(t)
	defer stop()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := MeasurePingPong(context.Background(), c, PingPongOptions{LatencyRounds: 20, BandwidthRounds: 3, MsgSize: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Latency <= 0 || r.Bandwidth <= 0 || (r.RTTP50-2*r.Latency).Abs() > 1 || r.RTTP99 < r.RTTP50 {
		t.Fatalf("implausible result %+v", r)
	}
	// The connection stays usable for a second measurement.
	if _, err := MeasurePingPong(context.Background(), c, PingPongOptions{LatencyRounds: 5, BandwidthRounds: 1, MsgSize: 64}); err != nil {
		t.Fatal(err)
	}
	// Negative bandwidth rounds: latency only, and the connection still
	// serves a whole measurement afterwards.
	if r, err := MeasurePingPong(context.Background(), c, PingPongOptions{LatencyRounds: 5, BandwidthRounds: -1}); err != nil || r.Latency <= 0 || r.Bandwidth != 0 {
		t.Fatalf("latency only: %+v %v", r, err)
	}
	if r, err := MeasurePingPong(context.Background(), c, PingPongOptions{LatencyRounds: 5, BandwidthRounds: 1, MsgSize: 64}); err != nil || r.Bandwidth <= 0 {
		t.Fatalf("after latency only: %+v %v", r, err)
	}
}

func TestPingPongShapedBothWays(t *testing.T) {
	cli, srv := shapedPingPong(t, Link{Bandwidth: 100e6, Latency: 300 * time.Microsecond}, PingPongOptions{LatencyRounds: 10, BandwidthRounds: 2})
	// Both directions went through a shaper: 30 8-byte rounds and 4 1 MB
	// rounds (warm-up included) each way.
	want := int64(30*8 + 4*BandwidthMsgSize)
	for name, e := range map[string]*UserspaceEgress{"client": cli, "server": srv} {
		if s := e.Stats(); s.Bytes < want || s.Drops != 0 {
			t.Errorf("%s shaper: %+v", name, s)
		}
	}
}

func TestPingPongContextAndErrors(t *testing.T) {
	// A server that never answers: cancelling the context ends the measurement.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := MeasurePingPong(ctx, c, PingPongOptions{}); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not end MeasurePingPong")
	}
	if _, err := MeasurePingPong(context.Background(), c, PingPongOptions{MsgSize: 4}); err == nil {
		t.Fatal("message size 4 accepted")
	}

	// The server rejects a bad header and closes the connection.
	addr, stop := startPingPong(t)
	defer stop()
	b, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var h [ppHeaderSize]byte
	binary.BigEndian.PutUint32(h[0:], 0xdeadbeef)
	if _, err := b.Write(h[:]); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(h[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("bad header: read %v, want EOF", err)
	}
}

func TestQuietest(t *testing.T) {
	lat := []time.Duration{41 * time.Microsecond, 15 * time.Microsecond, 18 * time.Microsecond}
	i := 0
	r, err := Quietest(3, func() (PingPongResult, error) {
		l := lat[i]
		i++
		return PingPongResult{Latency: l, Bandwidth: float64(i)}, nil
	})
	if err != nil || i != 3 || r.Latency != 15*time.Microsecond || r.Bandwidth != 2 {
		t.Fatalf("Quietest = %+v, %v after %d measurements; want the second (15µs) of 3", r, err, i)
	}
	boom := errors.New("boom")
	if _, err := Quietest(3, func() (PingPongResult, error) { return PingPongResult{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the measurement's", err)
	}
}

// TestBestOf: attempts stop at the first good one; of attempts none of
// which is good, the kept one fails the fewest tests, then has the lowest
// p99 release lateness.
func TestBestOf(t *testing.T) {
	us := time.Microsecond
	row := func(v string, late time.Duration, latErr float64) CalibrationRow {
		return CalibrationRow{Verdict: v, Lateness: ptimer.Stats{P99: late}, LatErr: latErr, Target: Link{Latency: 500 * us}}
	}
	run := func(rows ...CalibrationRow) CalibrationRow {
		got, err := BestOf(len(rows), func(try int) (CalibrationRow, error) { return rows[try-1], nil })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The first fails accuracy and lateness (two tests); 90 µs and 60 µs
	// fail one test each: the lower lateness is kept, not the smaller error.
	got := run(row(VerdictFail, 80*us, 0.5), row(VerdictPass, 90*us, 0.001), row(VerdictPass, 60*us, 0.05))
	if got.Lateness.P99 != 60*us || got.Attempts != 3 {
		t.Errorf("kept %+v, want the 60µs attempt of 3", got)
	}
	got = run(row(VerdictPass, 70*us, 0), row(VerdictPass, 20*us, 0.05), row(VerdictPass, 10*us, 0))
	if got.Lateness.P99 != 20*us || got.Attempts != 2 {
		t.Errorf("kept %+v, want the first good attempt (2 of 3)", got)
	}
	got = run(row(VerdictFail, 10*us, 0.5), row(VerdictFail, 10*us, 0.2))
	if got.LatErr != 0.2 {
		t.Errorf("kept %+v, want the smaller error of two equally failing attempts", got)
	}
}

// Expected counts every round trip, warm-ups included, and the message's
// time on the wire both ways in the bandwidth rounds.
func TestPingPongExpected(t *testing.T) {
	o := PingPongOptions{LatencyRounds: 10, BandwidthRounds: 2, MsgSize: 1000, LatencyWarmup: 2}
	// 12 x 2 ms, then (2 warm-ups + 2) x (2 ms + 2 x 1000 B at 1 MB/s).
	if got, want := o.Expected(time.Millisecond, 1e6), 24*time.Millisecond+4*4*time.Millisecond; got != want {
		t.Fatalf("expected %s, want %s", got, want)
	}
	if got, want := o.Expected(time.Millisecond, 0), 24*time.Millisecond+4*2*time.Millisecond; got != want {
		t.Fatalf("unlimited bandwidth: expected %s, want %s", got, want)
	}
	if (PingPongOptions{}).Expected(time.Millisecond, 0) <= (PingPongOptions{LatencyWarmup: 1}).Expected(time.Millisecond, 0) {
		t.Fatal("the default warm-up is not counted")
	}
	o.BandwidthRounds = -1
	if got, want := o.Expected(time.Millisecond, 1e6), 24*time.Millisecond; got != want {
		t.Fatalf("no bandwidth rounds: expected %s, want %s", got, want)
	}
}

// shapedPingPong runs one MeasurePingPong with opts over link, both ways
// through a userspace shaper, and returns the client's and the server's
// shapers (the client's released the server's echoes to it).
func shapedPingPong(t *testing.T, link Link, opts PingPongOptions) (cli, srv *UserspaceEgress) {
	t.Helper()
	_, cli, srv = shapedMeasure(t, link, opts)
	return cli, srv
}

// shapedMeasure is shapedPingPong with the measurement's result.
func shapedMeasure(t *testing.T, link Link, opts PingPongOptions) (res PingPongResult, cli, srv *UserspaceEgress) {
	t.Helper()
	srv, cli = newTestEgress(link), newTestEgress(link)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServePingPong(ctx, WrapListener(ln, srv, "a")) }()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := cli.Wrap(raw, "b")
	res, err = MeasurePingPong(context.Background(), c, opts)
	if err != nil || res.Latency < link.Latency/2 || res.Bandwidth <= 0 {
		t.Fatalf("shaped ping-pong: %+v %v", res, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return res, cli, srv
}

// Fit on a long link (20 ms one way, a 2 MB/s figure, a 400 ms budget)
// sends less than MsgSize and still reports the link's figure, which the
// full-size rounds alone underestimate (256 KiB is a quarter of the 1 MB
// the figure is defined by, so the latency weighs four times as much); on
// a short fast link it sends MsgSize.
func TestPingPongFit(t *testing.T) {
	const size = 256 << 10
	long := Link{Latency: 20 * time.Millisecond, Bandwidth: 2e6}
	opts := PingPongOptions{LatencyRounds: 10, BandwidthRounds: 2, MsgSize: size, Budget: 400 * time.Millisecond}
	plain, _, _ := shapedMeasure(t, long, opts)
	opts.Fit = true
	fit, _, _ := shapedMeasure(t, long, opts)
	if fit.MsgSize <= FitMinMsg || fit.MsgSize >= size {
		t.Errorf("long link: bandwidth rounds of %d bytes, want between %d and %d", fit.MsgSize, FitMinMsg, size)
	}
	if rel := fit.Bandwidth/long.Bandwidth - 1; math.Abs(rel) > 0.05 {
		t.Errorf("long link with fit: %.0f B/s, %.1f %% off the %.0f figure", fit.Bandwidth, 100*rel, long.Bandwidth)
	}
	if plain.MsgSize != size || plain.Bandwidth > 0.93*long.Bandwidth {
		t.Errorf("long link without fit: %d bytes, %.0f B/s: want %d bytes and the latency's underestimate", plain.MsgSize, plain.Bandwidth, size)
	}
	short, _, _ := shapedMeasure(t, Link{Latency: 100 * time.Microsecond, Bandwidth: 100e6}, opts)
	if short.MsgSize != size {
		t.Errorf("short link: bandwidth rounds of %d bytes, want %d", short.MsgSize, size)
	}
}

// pingPongFigure inverts WireRate: the figure of a link whose wire rate
// WireRate gives is the link's bandwidth, whatever the size measured.
func TestPingPongFigure(t *testing.T) {
	for _, l := range []Link{{Latency: 400 * time.Microsecond, Bandwidth: 185e6}, {Latency: 1450 * time.Microsecond, Bandwidth: 10e6}} {
		rate := WireRate(l)
		for _, size := range []int{FitMinMsg, 256 << 10, BandwidthMsgSize} {
			wire := time.Duration(float64(size) / rate * float64(time.Second))
			if got := pingPongFigure(size, wire, l.Latency); math.Abs(got/l.Bandwidth-1) > 1e-4 { // wire rounded to the ns
				t.Errorf("%+v, %d bytes: figure %.0f, want %.0f", l, size, got, l.Bandwidth)
			}
		}
	}
	if got := pingPongFigure(FitMinMsg, -time.Millisecond, 2*time.Millisecond); got != BandwidthMsgSize/0.002 {
		t.Errorf("no wire time: %.0f, want the latency alone's %.0f", got, BandwidthMsgSize/0.002)
	}
	if got := pingPongFigure(FitMinMsg, 0, 0); got != 0 {
		t.Errorf("nothing measurable: %.0f, want 0", got)
	}
}

// A budget cuts the phases of a link whose round trip is long against it
// (25 ms one way, a 100 ms budget: the latency phase keeps its first
// warm-up and the 3 round trips it never goes below, the bandwidth phase
// one warm-up and one measured), and leaves a short link's counts whole.
func TestPingPongBudget(t *testing.T) {
	const size = 64 << 10
	opts := PingPongOptions{LatencyRounds: 10, BandwidthRounds: 5, MsgSize: size, Budget: 100 * time.Millisecond}
	cli, _ := shapedPingPong(t, Link{Latency: 25 * time.Millisecond, Bandwidth: 10e6}, opts)
	if long, want := cli.Stats().Bytes, int64(4*8+2*size); long != want {
		t.Errorf("long link: client received %d bytes, want %d (4 latency and 2 bandwidth round trips)", long, want)
	}
	opts.Budget = time.Minute
	cli, _ = shapedPingPong(t, Link{Latency: 100 * time.Microsecond, Bandwidth: 100e6}, opts)
	if short, want := cli.Stats().Bytes, int64((DefaultLatencyWarmup+10)*8+(bandwidthWarmup+5)*size); short != want {
		t.Errorf("short link: client received %d bytes, want %d (every round trip)", short, want)
	}
}
