package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/netem"
)

// Prober is a cluster's probe endpoint (a cluster.Prober that also
// closes): a ping-pong server whose replies leave through the cluster's
// egress towards the asking cluster, and a client (Measure) that measures
// links from this cluster through the same egress. A probe connection opens
// with one line naming the asking cluster, then speaks the netem ping-pong
// protocol. Every cluster manager has one, and on the grid backends every
// node host too.
type Prober struct {
	cluster string
	egress  netem.Egress
	ln      net.Listener
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// NewProber starts the probe endpoint of a host of cluster, listening on
// host (any free port).
func NewProber(ctx context.Context, cluster string, egress netem.Egress, host string) (*Prober, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("probe endpoint of %s: %w", cluster, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Prober{cluster: cluster, egress: egress, ln: ln, cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// ServePingPong returns when the listener closes.
		_ = netem.ServePingPong(ctx, &helloListener{Listener: ln, egress: egress})
	}()
	return p, nil
}

// Addr is the endpoint's address (host:port).
func (p *Prober) Addr() string { return p.ln.Addr().String() }

// Measure measures the link to cluster dst through the endpoint at addr.
func (p *Prober) Measure(ctx context.Context, dst, addr string, bwBytes int) (time.Duration, float64, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, fmt.Errorf("dial probe endpoint of %s: %w", dst, err)
	}
	defer raw.Close()
	if tc, ok := raw.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			return 0, 0, fmt.Errorf("probe %s: %w", dst, err)
		}
	}
	if _, err := fmt.Fprintf(raw, "%s\n", p.cluster); err != nil {
		return 0, 0, fmt.Errorf("probe %s: %w", dst, err)
	}
	conn := p.egress.Wrap(raw, dst)
	if dl, ok := ctx.Deadline(); ok {
		if err := raw.SetDeadline(dl); err != nil {
			return 0, 0, fmt.Errorf("probe %s: %w", dst, err)
		}
	}
	res, err := netem.MeasurePingPong(ctx, conn, probeOptions(bwBytes))
	if err != nil {
		return 0, 0, fmt.Errorf("probe %s: %w", dst, err)
	}
	return res.Latency, res.Bandwidth, nil
}

// Close stops the endpoint and waits for its server.
func (p *Prober) Close() error {
	p.cancel()
	err := p.ln.Close()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// helloListener reads the asking cluster's name from every accepted
// connection and wraps it so replies are shaped towards that cluster.
type helloListener struct {
	net.Listener
	egress netem.Egress
}

func (l *helloListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true) // best effort: a probe without it only measures worse
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		name, err := readLine(c, 256)
		_ = c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close() // a peer that does not speak the probe protocol
			continue
		}
		return l.egress.Wrap(c, name), nil
	}
}

var (
	_ io.Closer      = (*Prober)(nil)
	_ cluster.Prober = (*Prober)(nil)
)

// readLine reads up to '\n' one byte at a time, so nothing after the line is
// consumed.
func readLine(r io.Reader, max int) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) < max {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("probe hello too long")
}

// probeOptions is the information service's ping-pong of one link: ten
// 8-byte round trips after two warm-ups and two of up to bwBytes, each
// phase cut to what fits in probeBudget once its first warm-up shows a long
// link. A dilated wide-area link (1 ms x 500) makes each 8-byte round trip
// 1 s of wall time and each round trip of 256 KiB at 77 MB/s / 500 4.4 s:
// the first probe round of four Myri-10G clusters at dilation 500 took
// 28.5 s with the full counts, 12.3 s with the cut ones (Spec.ProbeTimeouts
// bounds the full counts). The bandwidth messages are sized to the link
// (netem.PingPongOptions.Fit), and the figure reported is the links'
// 1 MB ping-pong figure whatever size was sent: at dilation 1000 the
// Delft-MultimediaN link (10 MB/s, 1.45 ms) carried 256 KiB in 26 s each
// way, and the first probe round of the five DAS-3 clusters took 121 s;
// sized, 30 s. The 256 KiB figure was also below the link's by the
// latency's share (Myri-10G wide area, 185 MB/s: 153 MB/s).
func probeOptions(bwBytes int) netem.PingPongOptions {
	o := netem.PingPongOptions{LatencyRounds: 10, BandwidthRounds: 2, MsgSize: bwBytes, LatencyWarmup: 2, Budget: probeBudget, Fit: true}
	if bwBytes <= 0 {
		o.BandwidthRounds = -1 // latency only
	}
	return o
}

// probeBudget is the wall time each phase of a link's probe aims at
// (netem.PingPongOptions.Budget).
const probeBudget = 2 * time.Second

// minProbeWait is the least time a probe, or the first probe round, is
// given, however short the links.
const minProbeWait = 2 * time.Minute

// ProbeTimeouts is how long one link's probe may take (perLink: three
// times the slowest link's expected probe, at least minProbeWait) and how
// long the launcher waits for the first probe round (round: twice the
// slowest link's probe, since a cluster manager probes its links at once,
// plus perLink, at least minProbeWait), on the spec's links at its
// dilation. At dilation 1000 the probe of the Vrije-Leiden link alone (1 s
// one way, 77 KB/s) takes about a minute.
func (s *Spec) ProbeTimeouts() (perLink, round time.Duration) {
	d := max(s.Dilation, 1)
	opts := probeOptions(s.ProbeBytes)
	var slowest time.Duration
	for _, a := range s.Clusters {
		for _, b := range s.Clusters {
			l, err := s.Links.Link(a.Name, b.Name)
			if err != nil || l.Unavailable {
				continue
			}
			slowest = max(slowest, opts.Expected(time.Duration(float64(l.Latency)*d), l.Bandwidth/d))
		}
	}
	perLink = max(minProbeWait, 3*slowest)
	return perLink, max(minProbeWait, 2*slowest+perLink)
}

// AwaitProbes waits up to wait (Spec.ProbeTimeouts) for the information
// service's first probe round, whose end closes ready.
func AwaitProbes(ctx context.Context, ready <-chan struct{}, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interrupted while probing links: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("information service: first probe round did not complete within %s", wait.Round(time.Second))
	}
}
