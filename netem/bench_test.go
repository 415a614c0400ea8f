package netem

import (
	"io"
	"net"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchConn returns a loopback connection (shaped towards "b" by e unless
// e is nil) and starts a reader that discards everything.
func benchConn(b *testing.B, e *UserspaceEgress) (net.Conn, func()) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, s)
		s.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	ln.Close()
	if e != nil {
		c = e.Wrap(c, "b")
	}
	return c, func() { c.Close(); <-done }
}

func benchEgress(l Link) *UserspaceEgress {
	e := newUserspace(EgressPlan{Node: "n", Cluster: "a", To: map[string]Link{"b": l}}, ptimer.Default(), 1)
	e.Overhead = DefaultOverhead()
	return e
}

func benchThroughput(b *testing.B, e *UserspaceEgress) {
	c, stop := benchConn(b, e)
	buf := make([]byte, DefaultSegmentSize)
	b.SetBytes(int64(len(buf)))
	cpu0, t0 := cpuTime(), time.Now()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	stop() // Close flushes the shaper
	b.StopTimer()
	el, cpu := time.Since(t0), cpuTime()-cpu0
	b.ReportMetric(float64(b.N)/el.Seconds(), "seg/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/seg")
	if e != nil {
		s := e.Stats()
		b.ReportMetric(float64(s.Lateness.P99.Microseconds()), "late-p99-us")
	}
}

// BenchmarkThroughputUnshaped: 64 KiB writes over loopback TCP, no shaper.
func BenchmarkThroughputUnshaped(b *testing.B) { benchThroughput(b, nil) }

// BenchmarkThroughputShapedUnlimited: the same through the shaper with an
// unlimited rate and no delay (the delay line's overhead).
func BenchmarkThroughputShapedUnlimited(b *testing.B) { benchThroughput(b, benchEgress(Link{})) }

// BenchmarkDelayLine125MBps: the shaper at 1 Gbit/s (125 MB/s wire rate,
// no latency): achieved rate, segments per second, CPU per segment.
func BenchmarkDelayLine125MBps(b *testing.B) { benchThroughput(b, benchEgress(Link{Bandwidth: 125e6})) }

// BenchmarkDelayLine125MBps1ms: the same with 1 ms one-way latency (the
// link's ping-pong bandwidth 111 MB/s is a 125 MB/s wire rate).
func BenchmarkDelayLine125MBps1ms(b *testing.B) {
	benchThroughput(b, benchEgress(Link{Bandwidth: 1e6 / (1e6/125e6 + 1e-3), Latency: time.Millisecond}))
}

func benchLatency(b *testing.B, e *UserspaceEgress, target time.Duration) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		if e != nil {
			s = e.Wrap(s, "b")
		}
		var m [8]byte
		for {
			if _, err := io.ReadFull(s, m[:]); err != nil {
				break
			}
			if _, err := s.Write(m[:]); err != nil {
				break
			}
		}
		s.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	ln.Close()
	if e != nil {
		c = e.Wrap(c, "b")
	}
	defer c.Close()
	var m [8]byte
	rtts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := c.Write(m[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, m[:]); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	p50 := rtts[len(rtts)/2] / 2
	p99 := rtts[len(rtts)*99/100] / 2
	b.ReportMetric(float64(p50)/1e3, "oneway-p50-us")
	b.ReportMetric(float64(p99)/1e3, "oneway-p99-us")
	if target > 0 {
		b.ReportMetric(float64(p50-target)/1e3, "err-p50-us")
	}
}

// BenchmarkLatencyUnshaped: 8-byte ping-pong over loopback TCP.
func BenchmarkLatencyUnshaped(b *testing.B) { benchLatency(b, nil, 0) }

// BenchmarkLatencyShapedZero: through shapers with no delay (overhead).
func BenchmarkLatencyShapedZero(b *testing.B) { benchLatency(b, benchEgress(Link{}), 0) }

// BenchmarkLatencyShaped30us: the DAS-3 intra-cluster target.
func BenchmarkLatencyShaped30us(b *testing.B) {
	benchLatency(b, benchEgress(Link{Latency: 30 * time.Microsecond}), 30*time.Microsecond)
}

// BenchmarkLatencyShaped400us: a DAS-3 inter-cluster target.
func BenchmarkLatencyShaped400us(b *testing.B) {
	benchLatency(b, benchEgress(Link{Latency: 400 * time.Microsecond}), 400*time.Microsecond)
}
