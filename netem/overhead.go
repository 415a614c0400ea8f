package netem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// OverheadPoint says: when the shaper adds Delay, a message takes
// Delay + Overhead one way.
type OverheadPoint struct {
	Delay    time.Duration `json:"delay_ns"`
	Overhead time.Duration `json:"overhead_ns"`
}

// Overhead is the one-way latency the shaped transport adds by itself, as
// a function of the delay the shaper adds: points sorted by Delay, linear
// between points, constant beyond the ends; empty means zero.
//
// It is not a constant. Between busy endpoints Go TCP over loopback takes
// about 10 µs one way; a receiver that has waited a few hundred µs has
// gone idle (its thread parked, its virtual CPU halted) and its wake-up
// costs tens of µs more on small virtual machines. So the added delay of a
// 0.4 ms link must be smaller than that of a 30 µs link by more than the
// difference in latency.
type Overhead []OverheadPoint

// At returns the overhead when the shaper adds delay d.
func (o Overhead) At(d time.Duration) time.Duration {
	switch {
	case len(o) == 0:
		return 0
	case d <= o[0].Delay:
		return o[0].Overhead
	case d >= o[len(o)-1].Delay:
		return o[len(o)-1].Overhead
	}
	i := sort.Search(len(o), func(i int) bool { return o[i].Delay >= d })
	a, b := o[i-1], o[i]
	f := float64(d-a.Delay) / float64(b.Delay-a.Delay)
	return a.Overhead + time.Duration(f*float64(b.Overhead-a.Overhead))
}

// DelayFor returns the delay to add so that a message takes target one way:
// the smallest d >= 0 with d + At(d) = target, or 0 when At(0) >= target
// (the transport alone is already as slow as the target: the floor).
func (o Overhead) DelayFor(target time.Duration) time.Duration {
	if len(o) == 0 {
		return max(target, 0)
	}
	if target <= o.At(0) {
		return 0
	}
	// Walk the pieces of the curve in order of delay; on each, d + At(d)
	// is linear, so the crossing is solved exactly.
	lo := time.Duration(0)
	for i := 0; i <= len(o); i++ {
		var hiD time.Duration
		var oLo, oHi float64
		if i == len(o) { // constant beyond the last point
			return max(target-o[len(o)-1].Overhead, lo)
		}
		hiD = o[i].Delay
		if hiD <= lo {
			continue
		}
		oLo, oHi = float64(o.At(lo)), float64(o.At(hiD))
		if float64(hiD)+oHi < float64(target) {
			lo = hiD
			continue
		}
		k := (oHi - oLo) / float64(hiD-lo)
		if 1+k <= 0 {
			lo = hiD
			continue
		}
		d := float64(lo) + (float64(target)-float64(lo)-oLo)/(1+k)
		return min(max(time.Duration(d+0.5), lo), hiD)
	}
	return 0
}

// String renders the curve as "0s:10µs 20µs:18µs ...".
func (o Overhead) String() string {
	if len(o) == 0 {
		return "none"
	}
	parts := make([]string, len(o))
	for i, p := range o {
		parts[i] = fmt.Sprintf("%v:%v", p.Delay, p.Overhead.Round(100*time.Nanosecond))
	}
	return strings.Join(parts, " ")
}

// OverheadProbeDelays are the delays MeasureOverhead probes.
var OverheadProbeDelays = []time.Duration{0, 20 * time.Microsecond, 40 * time.Microsecond, 60 * time.Microsecond,
	100 * time.Microsecond, 150 * time.Microsecond, 400 * time.Microsecond}

// FallbackOverhead is used when the measurement cannot run (figures of the
// 2-core virtual machines this project is developed on).
var FallbackOverhead = Overhead{{0, 10 * time.Microsecond}, {60 * time.Microsecond, 17 * time.Microsecond}, {400 * time.Microsecond, 40 * time.Microsecond}}

var (
	overheadOnce sync.Once
	overheadVal  Overhead
	overheadErr  error
)

// DefaultOverhead is MeasureOverhead on the default line with 200 rounds per
// probe delay, run once per process (about 0.4 s). If it fails, FallbackOverhead
// (see DefaultOverheadErr).
func DefaultOverhead() Overhead {
	overheadOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		overheadVal, overheadErr = MeasureOverhead(ctx, ptimer.Default(), 200)
		if overheadErr != nil {
			overheadVal = FallbackOverhead
		}
	})
	return overheadVal
}

// DefaultOverheadErr reports why DefaultOverhead fell back, or nil.
func DefaultOverheadErr() error {
	DefaultOverhead()
	return overheadErr
}

// MeasureOverhead measures the Overhead curve of the shaped transport over
// loopback TCP in this process: for each of OverheadProbeDelays, an 8-byte
// ping-pong whose both directions go through userspace shapers that add
// exactly that delay; overhead = median round trip / 2 - delay.
//
// The probes run in overheadPasses passes of n/overheadPasses rounds over
// all delays, and each point is the median of its passes' medians, so that
// a burst of load from other processes during one pass does not bend the
// curve.
func MeasureOverhead(ctx context.Context, line *ptimer.Line, n int) (Overhead, error) {
	rounds := max(n/overheadPasses, 10)
	return MeasureCurve(OverheadProbeDelays, overheadPasses, func(d time.Duration) (time.Duration, error) {
		oneWay, err := probeOneWay(ctx, line, d, rounds)
		if err != nil {
			return 0, fmt.Errorf("netem: overhead at %v: %w", d, err)
		}
		return oneWay - d, nil
	})
}

// MeasureCurve builds an Overhead curve from probe, which measures the
// overhead when the shaper adds delay d. It runs passes passes over all
// delays (in the order given, which must be increasing) and each point is
// the median of its passes: load from other processes during one pass
// does not bend the curve, and a pass that sees the machine busy sees it
// at every delay alike. Negative overheads count as zero.
func MeasureCurve(delays []time.Duration, passes int, probe func(d time.Duration) (time.Duration, error)) (Overhead, error) {
	passes = max(passes, 1)
	per := make([][]time.Duration, len(delays))
	for range passes {
		for i, d := range delays {
			o, err := probe(d)
			if err != nil {
				return nil, err
			}
			per[i] = append(per[i], o)
		}
	}
	o := make(Overhead, len(delays))
	for i, d := range delays {
		sortDur(per[i])
		o[i] = OverheadPoint{Delay: d, Overhead: max(median(per[i]), 0)}
	}
	return o, nil
}

const overheadPasses = 5

// probeOneWay runs a shaped 8-byte ping-pong with a fixed added delay and
// returns the median one-way time.
func probeOneWay(ctx context.Context, line *ptimer.Line, delay time.Duration, n int) (time.Duration, error) {
	plan := EgressPlan{Node: "probe", Cluster: "probe", To: map[string]Link{"probe": {Latency: delay}}}
	cli := newUserspace(plan, line, 1)
	srv := newUserspace(plan, line, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serr := make(chan error, 1)
	go func() { serr <- ServePingPong(sctx, WrapListener(ln, srv, "probe")) }()
	var dl net.Dialer
	raw, err := dl.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		cancel()
		return 0, errors.Join(err, <-serr)
	}
	c := cli.Wrap(raw, "probe")
	setNoDelay(c)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	rtts, err := rounds(c, 8, DefaultLatencyWarmup, n)
	stop()
	cerr := c.Close()
	cancel()
	if err := errors.Join(err, cerr, <-serr); err != nil {
		return 0, err
	}
	sortDur(rtts)
	return median(rtts) / 2, nil
}
