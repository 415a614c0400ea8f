package kernel_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// benchLine installs a plan on a (rate, delay) towards b and returns a's
// installation. b gets nothing (its ACKs are not delayed).
func benchLine(b *testing.B, topo *netns.Topology, link netem.Link) *kernel.Installed {
	plan := netem.EgressPlan{Node: "a", Cluster: "alpha", To: map[string]netem.Link{"beta": link}}
	// Floor and overheads at zero: the delay asked is the delay held.
	in := install(b, topo, topo.Host("a"), kernel.HTB{}, plan, topo.Destinations())
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
// as one goroutine can, through a 100 µs delay line and no rate limit: one
// iteration is one datagram. It shows the line's packet rate when every
// packet is small (no GSO) and whether its queue overflows (drops).
func BenchmarkDelayLineUDP(b *testing.B) {
	topo := twoHosts(b)
	a, c := topo.Host("a"), topo.Host("b")
	in := benchLine(b, topo, netem.Link{Latency: 100 * time.Microsecond})
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
