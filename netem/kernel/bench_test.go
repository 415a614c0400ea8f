package kernel_test

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// benchLine shapes the path from a to b: a's egress towards beta gets the
// link's rate, and b's delay line holds what arrives from alpha for the
// link's latency (a line holds packets at the receiving host, see
// installQueueRules). It returns b's installation. Nothing is delayed from
// b to a (ACKs travel unshaped).
func benchLine(b *testing.B, topo *netns.Topology, link netem.Link) *kernel.Installed {
	// Floor and overheads at zero: the delay asked is the delay held.
	if link.Bandwidth > 0 {
		rate := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{"beta": {Bandwidth: link.Bandwidth}}}
		install(b, topo, topo.Host("a"), kernel.HTB{}, rate, topo.Destinations())
	}
	hold := netem.EgressPlan{Node: "b", Cluster: "beta", To: map[string]netem.Link{"alpha": {Latency: link.Latency}}}
	in := install(b, topo, topo.Host("b"), kernel.HTB{}, hold, topo.Destinations())
	return in.(*kernel.Installed)
}

func reportLine(b *testing.B, in *kernel.Installed, elapsed time.Duration, st0 kernel.LineStats) {
	cpu0, rel0 := st0.CPU, st0.Released
	st, err := in.LineStats()
	if err != nil {
		b.Fatal(err)
	}
	pk := st.Released - rel0
	if pk <= 0 {
		b.Fatal("nothing went through the delay line")
	}
	b.ReportMetric(float64(pk)/elapsed.Seconds(), "pkts/s")
	b.ReportMetric(float64(st.CPU-cpu0)/float64(pk), "cpu-ns/pkt")
	b.ReportMetric(100*float64(st.CPU-cpu0)/float64(elapsed), "cpu-%")
	b.ReportMetric(float64(st.Lateness.P50)/1e3, "late-p50-µs")
	b.ReportMetric(float64(st.Lateness.P99)/1e3, "late-p99-µs")
	b.ReportMetric(float64(st.Drops), "drops")
	b.ReportMetric(100*float64(st.SpinTime-st0.SpinTime)/float64(elapsed), "spin-%")
	b.ReportMetric(float64(st.VerdictCost.P50)/1e3, "verdict-p50-µs")
}

// BenchmarkDelayLineTCP1G streams TCP from a to b through HTB at 1 Gbit/s
// and a 200 µs delay line: one iteration is 1 MB. It reports the packets
// the line released per second (GSO packets: up to 64 KB each), the line
// thread's CPU per packet and in total (its verdicts run the packet's
// kernel path inline, which is counted), and release lateness under this
// load.
func BenchmarkDelayLineTCP1G(b *testing.B) {
	topo := twoHosts(b)
	a, c := topo.Host("a"), topo.Host("b")
	in := benchLine(b, topo, netem.Link{Bandwidth: 125e6 * kernel.PayloadFactor(1500), Latency: 200 * time.Microsecond})
	ln, err := topo.Listen(context.Background(), c, "tcp", net.JoinHostPort(c.Addr.String(), "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		_, _ = io.Copy(io.Discard, s)
	}()
	conn, err := topo.Dial(context.Background(), a, "tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 1<<20)
	if _, err := conn.Write(buf); err != nil { // warm up
		b.Fatal(err)
	}
	st0, _ := in.LineStats()
	in.ResetLateness()
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	reportLine(b, in, elapsed, st0)
}

// BenchmarkDelayLineUDP sends 1400-byte UDP datagrams from a to b as fast
// as one goroutine can, through HTB at 1 Gbit/s and a 100 µs delay line:
// one iteration is one datagram. It shows the line's packet rate and CPU
// per packet when every packet is small (no GSO, about 85,000 a second at
// that rate) and whether its queue overflows (drops).
func BenchmarkDelayLineUDP(b *testing.B) {
	topo := twoHosts(b)
	a, c := topo.Host("a"), topo.Host("b")
	in := benchLine(b, topo, netem.Link{Bandwidth: 125e6 * kernel.PayloadFactor(1500), Latency: 100 * time.Microsecond})
	var pc net.PacketConn
	if err := topo.Run(c, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(c.Addr.String(), "0"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	conn, err := topo.Dial(context.Background(), a, "udp4", pc.LocalAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	msg := make([]byte, 1400)
	st0, _ := in.LineStats()
	in.ResetLateness()
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		if _, err := conn.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	// Let the last datagrams through before counting.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		st, _ := in.LineStats()
		if st.Released+st.Drops-st0.Released >= int64(b.N) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	reportLine(b, in, elapsed, st0)
}

// BenchmarkDelayLineIdle installs a line that holds nothing and reports
// the CPU its thread uses while idle, per second: one iteration is 10 ms
// of idleness. An idle line sleeps in ppoll without a timeout.
func BenchmarkDelayLineIdle(b *testing.B) {
	topo := twoHosts(b)
	in := benchLine(b, topo, netem.Link{Latency: 400 * time.Microsecond})
	st0, _ := in.LineStats()
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	st, _ := in.LineStats()
	b.ReportMetric(float64(st.CPU-st0.CPU)/elapsed.Seconds(), "cpu-ns/s")
	b.ReportMetric(float64(st.Released-st0.Released), "released")
}

// pingPongLines installs a 400 µs delay line on both hosts and runs 8-byte
// round trips from a to b: one iteration is one round trip. It reports
// the round trip, each line's CPU share and spinning share, and the
// release lateness of both lines; load goroutines that compute (and yield
// every 50 µs) run meanwhile.
func pingPongLines(b *testing.B, load int) {
	topo := twoHosts(b)
	a, c := topo.Host("a"), topo.Host("b")
	const delay = 400 * time.Microsecond
	ia, ib := delayBothWays(b, topo, delay)
	inA, inB := ia.(*kernel.Installed), ib.(*kernel.Installed)
	ln, err := topo.Listen(context.Background(), c, "tcp", net.JoinHostPort(c.Addr.String(), "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	conn, err := topo.Dial(context.Background(), a, "tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	defer close(stop)
	for range load {
		go func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for t := time.Now(); time.Since(t) < 50*time.Microsecond; {
					x++
				}
				runtime.Gosched()
			}
		}()
	}
	buf := make([]byte, 8)
	for range 20 { // warm up
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
	stA0, _ := inA.LineStats()
	stB0, _ := inB.LineStats()
	inA.ResetLateness()
	inB.ResetLateness()
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	stA, _ := inA.LineStats()
	stB, _ := inB.LineStats()
	var h ptimer.Histogram
	h.Merge(inA.LatenessHistogram())
	h.Merge(inB.LatenessHistogram())
	lat := h.Stats()
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "rtt-µs")
	b.ReportMetric(100*float64((stA.CPU-stA0.CPU)+(stB.CPU-stB0.CPU))/2/float64(elapsed), "cpu-%/line")
	b.ReportMetric(100*float64((stA.SpinTime-stA0.SpinTime)+(stB.SpinTime-stB0.SpinTime))/2/float64(elapsed), "spin-%/line")
	b.ReportMetric(float64(lat.P50)/1e3, "late-p50-µs")
	b.ReportMetric(float64(lat.P99)/1e3, "late-p99-µs")
	b.ReportMetric(float64(lat.Max)/1e3, "late-max-µs")
}

// BenchmarkDelayLinePingPong400us: two busy lines, an otherwise idle
// process.
func BenchmarkDelayLinePingPong400us(b *testing.B) { pingPongLines(b, 0) }

// BenchmarkDelayLinePingPong400usLoaded: the same with GOMAXPROCS
// goroutines computing in the process (release lateness under load).
func BenchmarkDelayLinePingPong400usLoaded(b *testing.B) { pingPongLines(b, runtime.GOMAXPROCS(0)) }
