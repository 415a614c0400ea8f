package kernel

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

func TestPayloadFactor(t *testing.T) {
	if f := PayloadFactor(1500); math.Abs(f-0.9564) > 0.0005 {
		t.Errorf("PayloadFactor(1500) = %.4f, want about 0.956 (FACTS)", f)
	}
	if PayloadFactor(9000) <= PayloadFactor(1500) {
		t.Error("jumbo frames should carry a larger payload share")
	}
	if PayloadFactor(0) != PayloadFactor(DefaultMTU) {
		t.Error("unknown MTU should fall back to the default")
	}
}

func TestModelShape(t *testing.T) {
	us := time.Microsecond
	m := Model{Floor: 10 * us, Overhead: netem.Overhead{{Delay: 0, Overhead: 35 * us}, {Delay: 100 * us, Overhead: 60 * us}}}
	cases := []struct {
		name   string
		target netem.Link
		line   bool
		floor  bool
		divert bool
		delay  time.Duration
	}{
		{"below floor", netem.Link{Latency: 8 * us}, true, true, false, 0},
		{"at floor", netem.Link{Latency: 10 * us}, true, true, false, 0},
		{"just above floor", netem.Link{Latency: 13 * us}, true, false, false, 0},
		{"within the tolerance of the floor", netem.Link{Latency: 30 * us}, true, false, false, 0},
		// Short needs: the line's cost at zero delay (35 µs) sets the delay,
		// but the delay is at least what keeps its awake cost (5 µs) within
		// the tolerance (target - 20 µs, plus a 3 µs guard).
		{"line nearer than the floor", netem.Link{Latency: 33 * us}, true, false, true, 0}, // 1 µs: below the line's resolution
		{"awake case sets the delay", netem.Link{Latency: 44 * us}, true, false, true, 12 * us},
		{"line spins", netem.Link{Latency: 60 * us}, true, false, true, 28 * us},
		{"just within the tolerance of the floor", netem.Link{Latency: 29 * us}, true, false, false, 0},
		{"line sleeps", netem.Link{Latency: 400 * us}, true, false, true, 330 * us},
		{"netem gets the full need", netem.Link{Latency: 400 * us}, false, false, false, 390 * us},
		{"unavailable", netem.Link{Unavailable: true}, true, false, false, 0},
	}
	for _, c := range cases {
		s := m.shape("x", c.target, 1500, c.line)
		if s.Floor != c.floor || s.Divert != c.divert || s.Delay != c.delay {
			t.Errorf("%s: floor %v divert %v delay %v; want %v %v %v", c.name, s.Floor, s.Divert, s.Delay, c.floor, c.divert, c.delay)
		}
	}
}

// TestModelOverheadCurve: the delay of every link is cut by the line's
// cost at that delay, not by one figure: with the cost rising from 18 µs
// to 130 µs over the delays (as measured on a small virtual machine), short
// and long links both come out at their targets.
func TestModelOverheadCurve(t *testing.T) {
	us := time.Microsecond
	m := Model{Floor: 4 * us, Overhead: netem.Overhead{{Delay: 0, Overhead: 18 * us}, {Delay: 100 * us, Overhead: 25 * us},
		{Delay: 300 * us, Overhead: 40 * us}, {Delay: 1500 * us, Overhead: 80 * us}, {Delay: 4500 * us, Overhead: 130 * us}}}
	for _, l := range []time.Duration{120 * us, 200 * us, 1600 * us, 4600 * us} {
		s := m.shape("x", netem.Link{Latency: l}, 1500, true)
		if !s.Divert {
			t.Fatalf("%v: not diverted: %+v", l, s)
		}
		if e := m.effective(s); (e.Latency - l).Abs() > us {
			t.Errorf("%v: delay %v gives %v", l, s.Delay, e.Latency)
		}
		if want := l - m.Floor - m.Overhead.At(s.Delay); (s.Delay - want).Abs() > us {
			t.Errorf("%v: delay %v, want %v (the need less the cost at that delay)", l, s.Delay, want)
		}
	}
	// The long link's delay is cut by the cost of long delays.
	if s := m.shape("x", netem.Link{Latency: 4600 * us}, 1500, true); s.Delay > 4600*us-4*us-125*us {
		t.Errorf("4.6 ms link: delay %v, cut by less than the long delays' cost", s.Delay)
	}
}

func TestModelLineAtZeroDelay(t *testing.T) {
	us := time.Microsecond
	m := Model{Floor: 10 * us, Overhead: netem.Overhead{{Delay: 0, Overhead: 45 * us}, {Delay: 100 * us, Overhead: 60 * us}}}
	// need 24 µs, below the line's cost at zero delay (45 µs): the line at
	// zero delay (21 µs over) is nearer than the floor (24 µs under); the
	// awake case (15 µs) would ask for 2 µs, but the measured cost leaves
	// no room.
	if s := m.shape("x", netem.Link{Latency: 34 * us}, 1500, true); !s.Divert || s.Delay != 0 {
		t.Errorf("shaped %+v, want the line at zero delay", s)
	}
	if e := m.effective(m.shape("x", netem.Link{Latency: 34 * us}, 1500, true)); e.Latency != 55*us {
		t.Errorf("effective %v, want floor + the cost at zero delay, 55µs", e.Latency)
	}
}

func TestModelNearerWithoutLine(t *testing.T) {
	us := time.Microsecond
	m := Model{Floor: 10 * us, Overhead: netem.Overhead{{Delay: 0, Overhead: 70 * us}, {Delay: 100 * us, Overhead: 90 * us}}}
	// need 25 µs: the line would land 45 µs over, the floor 25 µs under.
	if s := m.shape("x", netem.Link{Latency: 35 * us}, 1500, true); s.Divert || s.Floor || s.Delay != 0 {
		t.Errorf("shaped %+v, want nothing", s)
	}
}

func TestModelRate(t *testing.T) {
	m := Model{}
	msg := float64(netem.BandwidthMsgSize)
	for _, l := range []netem.Link{
		{Bandwidth: 10e6, Latency: 1450 * time.Microsecond},
		{Bandwidth: 0.2e6, Latency: 400 * time.Millisecond},
		{Bandwidth: 185e6, Latency: 400 * time.Microsecond},
		{Bandwidth: 561e6, Latency: 30 * time.Microsecond},
	} {
		for _, line := range []bool{false, true} {
			s := m.shape("x", l, 1500, line)
			if s.Burst < minBurst {
				t.Errorf("%v line %v: burst %d below %d", l, line, s.Burst, minBurst)
			}
			class := float64(s.Rate) * PayloadFactor(1500) // payload bytes/s
			// The model's own prediction of the ping-pong figure must give
			// the target back: one way = L + msg/LineRate where the delay
			// line serialises (the class then only paces, faster), else
			// L + (msg-burst)/class.
			oneWay := l.Latency.Seconds() + (msg-float64(s.Burst))/class
			if s.LineRate > 0 {
				oneWay = l.Latency.Seconds() + msg/s.LineRate
				if class < s.LineRate*1.01 {
					t.Errorf("%v: class %.1f MB/s not above the line's %.1f", l, class/1e6, s.LineRate/1e6)
				}
			}
			if got := msg / oneWay; math.Abs(got/l.Bandwidth-1) > 0.001 {
				t.Errorf("%v line %v: model predicts %.1f MB/s", l, line, got/1e6)
			}
			// Only a line that holds packets serialises them: without the
			// line (netem), or when it spins from arrival to release, or
			// above MaxLineRate, the class alone sets the rate.
			if want := line && s.Delay > DefaultSpin && l.Bandwidth <= MaxLineRate; (s.LineRate > 0) != want {
				t.Errorf("%v line %v delay %v: line rate %.0f", l, line, s.Delay, s.LineRate)
			}
		}
	}
	if s := m.shape("x", netem.Link{Latency: time.Millisecond}, 1500, true); s.Rate != 0 || s.LineRate != 0 {
		t.Errorf("no bandwidth target should leave the rate unlimited, got %d, line %v", s.Rate, s.LineRate)
	}
}

// TestSerialised: a sender's packets are charged their wire time one after
// the other, from when both the packet and the wire are there, and arrive
// the delay later; an idle wire starts afresh.
func TestSerialised(t *testing.T) {
	const nb = 1000.0 // ns per byte: 1 MB/s
	const delay = 5_000_000
	var free int64
	var got []int64
	for _, p := range []struct {
		t       int64
		payload int
	}{
		{0, 16 << 10}, {0, 64 << 10}, {0, 0}, // a burst and an ACK behind it
		{200_000_000, 1000}, // after the wire went idle
	} {
		var at int64
		at, free = serialised(p.t, free, p.payload, nb, delay)
		got = append(got, at)
	}
	want := []int64{16384_000 + delay, 81920_000 + delay, 81920_000 + delay, 201_000_000 + delay}
	if !slices.Equal(got, want) {
		t.Errorf("deadlines %v, want %v", got, want)
	}
	if at, busy := serialised(7, 3, 1500, 0, delay); at != 7+delay || busy != 3 {
		t.Errorf("without a serialiser: deadline %d busy %d", at, busy)
	}
}

// TestDelayQueueSenders: each sender of a queue has its own serialiser,
// so one sender's long burst does not hold another's packet; next is the
// earliest deadline over the senders.
func TestDelayQueueSenders(t *testing.T) {
	q := &delayQueue{srcs: map[[4]byte]*srcLine{}}
	q.setRate(1e6)
	q.delay.Store(1_000_000)
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	q.hold(qpacket{id: 1, src: a, payload: 64 << 10, len: 64<<10 + 52}, 0)
	q.hold(qpacket{id: 2, src: a, payload: 64 << 10, len: 64<<10 + 52}, 0)
	q.hold(qpacket{id: 3, src: b, payload: 1000, len: 1052}, 10_000_000)
	// b's packet: its own wire time (1 ms) and the delay, not behind a's
	// 131 ms burst.
	if got, want := q.next(), int64(10_000_000+1_000_000+1_000_000); got != want {
		t.Errorf("next %d, want %d", got, want)
	}
	sa := q.srcs[a]
	if got, want := sa.fifo[1].at, int64(2*65536_000+1_000_000); got != want {
		t.Errorf("a's second packet due %d, want %d", got, want)
	}
	if q.lastID != 3 || len(q.lines) != 2 {
		t.Errorf("lastID %d, %d senders", q.lastID, len(q.lines))
	}
}

func TestModelEffective(t *testing.T) {
	us := time.Microsecond
	m := Model{Floor: 10 * us, Overhead: netem.Overhead{{Delay: 0, Overhead: 35 * us}, {Delay: 100 * us, Overhead: 60 * us}}}
	for _, l := range []time.Duration{8 * us, 50 * us, 400 * us} {
		target := netem.Link{Latency: l, Bandwidth: 100e6}
		e := m.effective(m.shape("x", target, 1500, true))
		if l <= m.Floor {
			if e.Latency != m.Floor {
				t.Errorf("%v: effective %v, want the floor", l, e.Latency)
			}
			continue
		}
		// Short delays aim at the awake case too (see TestModelShape):
		// the expectation (the sleeping case) is then within tolerance.
		if tol := max(l/10, netem.LatencyToleranceAbs); (e.Latency - l).Abs() > tol {
			t.Errorf("%v: effective %v, more than %v off", l, e.Latency, tol)
		}
		if e.Bandwidth != target.Bandwidth {
			t.Errorf("%v: effective bandwidth %v", l, e.Bandwidth)
		}
	}
}

func attr(typ uint16, data []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParsePacket(t *testing.T) {
	body := []byte{0, 0, 0x03, 0xe9} // nfgenmsg, queue 1001
	hdr := binary.BigEndian.AppendUint32(nil, 77)
	hdr = append(hdr, 0x08, 0x00, 4)
	body = append(body, attr(nfqaPacketHdr, hdr)...)
	ts := binary.BigEndian.AppendUint64(nil, 12)
	ts = binary.BigEndian.AppendUint64(ts, 345)
	body = append(body, attr(nfqaTimestamp, ts)...)
	ip := make([]byte, 40)
	ip[0] = 0x45
	ip[9] = 6 // TCP
	copy(ip[12:], []byte{10, 77, 2, 1})
	ip[32] = 8 << 4 // data offset: 32 bytes
	body = append(body, attr(nfqaPayload, ip)...)
	body = append(body, attr(nfqaCapLen, binary.BigEndian.AppendUint32(nil, 65226))...)
	p, err := parsePacket(body)
	if err != nil {
		t.Fatal(err)
	}
	if p.queue != 1001 || p.id != 77 || p.len != 65226 || p.payload != 65226-52 || !p.hdr || p.src != [4]byte{10, 77, 2, 1} || p.stamp != 12e9+345e3 {
		t.Errorf("parsed %+v", p)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = parsePacket(body) }); allocs != 0 {
		t.Errorf("parsePacket allocates %v times per packet", allocs)
	}
	if _, err := parsePacket(body[:4]); err == nil {
		t.Error("packet without header accepted")
	}
	bad := append([]byte(nil), body...)
	binary.NativeEndian.PutUint16(bad[4:], 200) // attribute longer than the message
	if _, err := parsePacket(bad); err == nil {
		t.Error("malformed attribute accepted")
	}
}

func TestAppendVerdict(t *testing.T) {
	b := appendVerdict(nil, 1002, 99, nfAccept)
	if len(b) != 32 || int(binary.NativeEndian.Uint32(b)) != len(b) {
		t.Fatalf("verdict message %x", b)
	}
	if typ := binary.NativeEndian.Uint16(b[4:]); typ != 3<<8|nfqnlMsgVerdictBatch {
		t.Errorf("type %#x", typ)
	}
	if q := binary.BigEndian.Uint16(b[18:]); q != 1002 {
		t.Errorf("queue %d", q)
	}
	if v, id := binary.BigEndian.Uint32(b[24:]), binary.BigEndian.Uint32(b[28:]); v != nfAccept || id != 99 {
		t.Errorf("verdict %d id %d", v, id)
	}
}

func TestParseQueueDrops(t *testing.T) {
	in := "" +
		" 1000  12345     1 2    20     3     4       99  1\n" +
		" 1001  12345     1 2    20     0     1       10  1\n" +
		"   77  55555     1 2 65535     9     9      100  1\n"
	got, err := parseQueueDrops(strings.NewReader(in), func(q uint16) bool { return q >= 1000 })
	if err != nil {
		t.Fatal(err)
	}
	if got != 8 {
		t.Errorf("drops %d, want 8 (queue 77 is not ours)", got)
	}
}

func TestPrefixMask(t *testing.T) {
	if m := prefixMask(24); m != [4]byte{255, 255, 255, 0} {
		t.Errorf("/24 %v", m)
	}
	if m := prefixMask(0); m != [4]byte{} {
		t.Errorf("/0 %v", m)
	}
}

func TestOverheadProbes(t *testing.T) {
	ms := time.Millisecond
	p := OverheadProbes(4600 * time.Microsecond)
	if p[0] != 0 || p[len(p)-1] != 4600*time.Microsecond || p[len(p)-2] != 2*ms {
		t.Errorf("probes %v: want the steps from 0 below 4.6ms, then 4.6ms", p)
	}
	for i := 1; i < len(p); i++ {
		if p[i] <= p[i-1] {
			t.Errorf("probes %v not increasing", p)
		}
	}
	if p := OverheadProbes(0); len(p) != 1 || p[0] != 0 {
		t.Errorf("probes for no delay %v, want [0]", p)
	}
	if p := OverheadProbes(5 * ms); len(p) != 8 || p[len(p)-1] != 5*ms || p[len(p)-2] != 2*ms {
		t.Errorf("probes up to a step %v, want it once, last", p)
	}
	if p := OverheadProbes(time.Hour); p[len(p)-1] != overheadProbeSteps[len(overheadProbeSteps)-1] {
		t.Errorf("probes %v, want every step", p)
	}
	// Long probes measure fewer round trips, short ones all, never fewer
	// than 50 below 5 ms and 12 from there on (unless asked for fewer); none
	// measures bandwidth.
	if o := OverheadProbeOptions(netem.PingPongOptions{}, 0); o.LatencyRounds != netem.DefaultLatencyRounds || o.BandwidthRounds >= 0 {
		t.Errorf("at zero delay %+v", o)
	}
	if o := OverheadProbeOptions(netem.PingPongOptions{}, 2*ms); o.LatencyRounds >= netem.DefaultLatencyRounds || o.LatencyRounds < 50 {
		t.Errorf("at 2ms %+v", o)
	}
	if o := OverheadProbeOptions(netem.PingPongOptions{}, 5*ms); o.LatencyRounds != 30 {
		t.Errorf("at 5ms %+v, want 30 rounds (300 ms of probe)", o)
	}
	if o := OverheadProbeOptions(netem.PingPongOptions{}, 50*ms); o.LatencyRounds != 12 || o.LatencyWarmup != 3 {
		t.Errorf("at 50ms %+v, want the least, 12 rounds after 3 warm-ups", o)
	}
	// Warm-ups: the default up to 2.5 ms, about 100 ms of them beyond.
	for d, want := range map[time.Duration]int{0: netem.DefaultLatencyWarmup, 2 * ms: netem.DefaultLatencyWarmup, 5 * ms: 10, 10 * ms: 5, 20 * ms: 3} {
		if o := OverheadProbeOptions(netem.PingPongOptions{}, d); o.LatencyWarmup != want {
			t.Errorf("at %v %d warm-ups, want %d", d, o.LatencyWarmup, want)
		}
	}
	if o := OverheadProbeOptions(netem.PingPongOptions{LatencyWarmup: 4}, 5*ms); o.LatencyWarmup != 4 {
		t.Errorf("asked for 4 warm-ups, got %+v", o)
	}
	if o := OverheadProbeOptions(netem.PingPongOptions{LatencyRounds: 20}, 5*ms); o.LatencyRounds != 20 {
		t.Errorf("asked for 20 rounds, got %+v", o)
	}
}
