package hostprobe

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Options tune a measurement. The zero value is the default probe (about
// 3 s of wall time).
type Options struct {
	// Ranks of each ring of the message probe, exchanging with both ring
	// neighbours as the communication-intensive applications do (default
	// 8), and Rings, how many such jobs run at once (default 12).
	Ranks, Rings int
	// Latency of the probe's links (default 200 µs): long enough that every
	// message goes through the delay line's thread, as in a run.
	Latency time.Duration
	// Span of each rate measurement (default 1 s).
	Span time.Duration
	// Pairs of streams of the byte-rate probe (default 4).
	Pairs int
	// Tries of each figure; the best is kept (default 3).
	Tries int
	// BurstRanks is the size of the burst probe's job (default 32: wave's
	// 62 boundary messages at one instant) and BurstSteps its lock-step
	// exchanges (default 40).
	BurstRanks, BurstSteps int
}

func (o Options) withDefaults() Options {
	if o.Ranks <= 1 {
		o.Ranks = 8
	}
	if o.Rings <= 0 {
		o.Rings = 12
	}
	if o.Latency <= 0 {
		o.Latency = 200 * time.Microsecond
	}
	if o.Span <= 0 {
		o.Span = 600 * time.Millisecond
	}
	if o.Pairs <= 0 {
		o.Pairs = 4
	}
	if o.Tries <= 0 {
		o.Tries = 3
	}
	if o.BurstRanks < 2 {
		o.BurstRanks = 32
	}
	if o.BurstSteps <= 0 {
		o.BurstSteps = 40
	}
	return o
}

// Fabric connects the probe's jobs through a backend's shaper: Connect
// makes one job of the given ranks (Rank is set by it) in one cluster,
// "probe", over links of one-way latency lat and no rate limit (lat 0: the
// fastest link the shaper has; see each fabric), and returns the job's
// ranks and a function that releases what it made for them, to call after
// the ranks are closed.
type Fabric interface {
	Connect(ctx context.Context, opts []comm.Options, lat time.Duration) ([]*comm.Comm, func(), error)
	// Path says what the messages went through, for `koala-emu host`.
	Path() string
}

// Inproc is the in-process backend's fabric: ranks over loopback TCP
// through the userspace shaper and the process's delay line.
type Inproc struct{}

// Path implements Fabric.
func (Inproc) Path() string { return "loopback TCP through the userspace shaper, one process" }

// Connect implements Fabric.
func (Inproc) Connect(ctx context.Context, opts []comm.Options, lat time.Duration) ([]*comm.Comm, func(), error) {
	free := netem.Link{Latency: lat, Bandwidth: 0}
	egs := make([]*netem.UserspaceEgress, len(opts))
	for i := range opts {
		egs[i] = netem.NewUserspace(netem.EgressPlan{Node: fmt.Sprintf("probe%d", i), Cluster: "probe",
			To: map[string]netem.Link{"probe": free}}, nil, 1)
		opts[i].Egress = egs[i]
	}
	release := func() {
		for _, e := range egs {
			_ = e.Close()
		}
	}
	cs, err := comm.ConnectLocal(ctx, opts)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("host probe: %w", err)
	}
	return cs, release, nil
}

// MeasureInproc measures the in-process backend (Measure over Inproc).
func MeasureInproc(ctx context.Context, opts Options) (fidelity.Capacity, error) {
	c, err := Measure(ctx, Inproc{}, opts)
	c.Backend = "inproc"
	return c, err
}

// Measure measures what fab carries. The message probe offers more than
// the host carries (Rings jobs whose steps wait only for a short latency),
// so what gets through is the host's capacity with every message released
// by the shaper's delay line; the byte probe streams over links with no
// rate limit.
func Measure(ctx context.Context, fab Fabric, opts Options) (fidelity.Capacity, error) {
	opts = opts.withDefaults()
	c := fidelity.Capacity{Machine: MachineID(), Measured: time.Now().UTC(), Path: fab.Path()}
	// Each figure is the best of a few tries: the capacity is the
	// machine's, and a moment of load from elsewhere must not stay in the
	// kept figures for a week (each run's own monitor judges its moment).
	for try := 0; try < opts.Tries; try++ {
		floor, err := lateness(ctx, 1000, 200*time.Microsecond)
		if err != nil {
			return c, err
		}
		if try == 0 || floor < c.Floor {
			c.Floor = floor
		}
		msgs, err := ringRate(ctx, fab, opts.Rings, opts.Ranks, opts.Latency, opts.Span)
		if err != nil {
			return c, err
		}
		bytes, err := streamRate(ctx, fab, opts.Pairs, opts.Span/2)
		if err != nil {
			return c, err
		}
		per, err := burstCost(ctx, fab, opts.BurstRanks, opts.BurstSteps)
		if err != nil {
			return c, err
		}
		c.MsgsPerSec, c.BytesPerSec = max(c.MsgsPerSec, msgs), max(c.BytesPerSec, bytes)
		if try == 0 || per < c.BurstPerMsg {
			c.BurstPerMsg = per
		}
	}
	return c, nil
}

// burstLatencies are the one-way latencies the burst probe tries, in order.
var burstLatencies = []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
	16 * time.Millisecond, 32 * time.Millisecond}

// burstCost returns the host's time per message of a lock-step burst: a
// job of n ranks that, at the same instant (the end of a computation, a Go
// timer as Compute's), each send an 8-byte value to both ring neighbours
// and wait for theirs, as wave does every step. The frames' lateness at
// their receivers grows with the burst, not with the latency, so the probe
// tries longer and longer links until the burst's p99 lateness is within
// fidelity.BurstShare of the latency, and returns that lateness (the
// smallest latency's share) over the burst's 2n messages: Choose then asks
// of a burst of B messages a latency of about B x BurstPerMsg / BurstShare.
func burstCost(ctx context.Context, fab Fabric, n, steps int) (time.Duration, error) {
	var late time.Duration
	for _, lat := range burstLatencies {
		p99, err := burstLate(ctx, fab, n, steps, lat)
		if err != nil {
			return 0, err
		}
		late = p99
		if float64(p99) <= fidelity.BurstShare*float64(lat) {
			late = time.Duration(fidelity.BurstShare * float64(lat))
			break
		}
	}
	return late / time.Duration(2*n), nil
}

// burstLate runs steps lock-step bursts of n ranks over links of latency
// lat and returns the p99 lateness of their frames.
func burstLate(ctx context.Context, fab Fabric, n, steps int, lat time.Duration) (time.Duration, error) {
	opts := ranks(n, "host-probe-burst")
	probes := make([]*fidelity.Probe, n)
	for i := range opts {
		probes[i] = fidelity.NewProbe()
		opts[i].Probe = probes[i]
		opts[i].Targets = map[string]netem.Link{"probe": {Latency: lat}}
	}
	cs, release, err := fab.Connect(ctx, opts, lat)
	if err != nil {
		return 0, err
	}
	defer release()
	defer closeAll(cs)
	errs0 := make(chan error, n)
	// Connections are lazy: open the ring's before the first step, so that
	// no frame pays their set-up (each rank dials its right neighbour and
	// sends to its left one over the connection it accepted).
	for i, c := range cs {
		go func(i int, c *comm.Comm) { errs0 <- c.Preconnect(ctx, (i+1)%n) }(i, c)
	}
	for range cs {
		if err := <-errs0; err != nil {
			return 0, fmt.Errorf("host probe: connect: %w", err)
		}
	}
	start := time.Now().Add(10 * time.Millisecond)
	period := 4 * lat
	errs := make(chan error, n)
	for i, c := range cs {
		go func(i int, c *comm.Comm) {
			errs <- burstSteps(ctx, c, i, n, steps, start, period)
		}(i, c)
	}
	for range cs {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("host probe: burst: %w", err)
		}
	}
	var all fidelity.Stats
	for _, p := range probes {
		s := p.Snapshot()
		all.Merge(&s)
	}
	return time.Duration(max(all.LinkLate().Quantile(0.99), 0) * float64(lat)), nil
}

// burstSteps is one rank of the burst probe.
func burstSteps(ctx context.Context, c *comm.Comm, i, n, steps int, start time.Time, period time.Duration) error {
	left, right := (i+n-1)%n, (i+1)%n
	var b [8]byte
	for s := 0; s < steps; s++ {
		t := time.NewTimer(time.Until(start.Add(time.Duration(s) * period)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if err := c.Send(ctx, left, 0, b[:]); err != nil {
			return err
		}
		if err := c.Send(ctx, right, 1, b[:]); err != nil {
			return err
		}
		if _, err := c.Recv(ctx, right, 0); err != nil {
			return err
		}
		if _, err := c.Recv(ctx, left, 1); err != nil {
			return err
		}
	}
	return nil
}

// lateness returns the p99 lateness of n waits of d on the default delay
// line: the wake-up floor every shaped release and precise compute pays.
func lateness(ctx context.Context, n int, d time.Duration) (time.Duration, error) {
	line := ptimer.Default()
	late := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := line.Sleep(ctx, d); err != nil {
			return 0, fmt.Errorf("host probe: lateness: %w", err)
		}
		late = append(late, time.Since(start)-d)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	return max(0, late[int(math.Ceil(0.99*float64(n)))-1]), nil
}

// ranks returns the options of n ranks of job in the probe's cluster.
func ranks(n int, job string) []comm.Options {
	opts := make([]comm.Options, n)
	for i := range opts {
		opts[i] = comm.Options{JobID: job, Cluster: "probe", Processors: 1}
	}
	return opts
}

// ringRate runs rings jobs of n ranks that exchange 8-byte messages with
// both ring neighbours, step after step, for about span, and returns the
// messages per second of all of them.
func ringRate(ctx context.Context, fab Fabric, rings, n int, lat, span time.Duration) (float64, error) {
	jobs := make([][]*comm.Comm, rings)
	for r := range jobs {
		cs, release, err := fab.Connect(ctx, ranks(n, fmt.Sprintf("host-probe-%d", r)), lat)
		if err != nil {
			return 0, err
		}
		defer release()
		defer closeAll(cs)
		jobs[r] = cs
	}
	run := func(steps int) (time.Duration, error) {
		start := time.Now()
		errs := make(chan error, rings)
		for _, cs := range jobs {
			go func(cs []*comm.Comm) {
				_, err := ringSteps(ctx, cs, steps)
				errs <- err
			}(cs)
		}
		var first error
		for range jobs {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return time.Since(start), first
	}
	const warm = 50
	wall, err := run(warm)
	if err != nil {
		return 0, err
	}
	steps := max(warm, int(float64(warm)*span.Seconds()/max(wall.Seconds(), 1e-6)))
	if wall, err = run(steps); err != nil {
		return 0, err
	}
	return float64(2*n*rings*steps) / wall.Seconds(), nil
}

// ringSteps runs steps neighbour exchanges on every rank and returns the
// wall time they took.
func ringSteps(ctx context.Context, cs []*comm.Comm, steps int) (time.Duration, error) {
	n := len(cs)
	errs := make(chan error, n)
	start := time.Now()
	for i, c := range cs {
		go func(i int, c *comm.Comm) {
			left, right := (i+n-1)%n, (i+1)%n
			var b [8]byte
			for s := 0; s < steps; s++ {
				if err := c.Send(ctx, left, 0, b[:]); err != nil {
					errs <- err
					return
				}
				if err := c.Send(ctx, right, 1, b[:]); err != nil {
					errs <- err
					return
				}
				if _, err := c.Recv(ctx, right, 0); err != nil {
					errs <- err
					return
				}
				if _, err := c.Recv(ctx, left, 1); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(i, c)
	}
	var first error
	for range cs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return 0, fmt.Errorf("host probe: message rate: %w", first)
	}
	return time.Since(start), nil
}

// streamRate runs pairs of ranks, each first rank streaming 1 MB messages to
// its partner for span, and returns payload bytes per second in all.
func streamRate(ctx context.Context, fab Fabric, pairs int, span time.Duration) (float64, error) {
	cs, release, err := fab.Connect(ctx, ranks(2*pairs, "host-probe-stream"), 0)
	if err != nil {
		return 0, err
	}
	defer release()
	defer closeAll(cs)
	const size = 1 << 20
	stop := time.Now().Add(span)
	errs := make(chan error, 2*pairs)
	total := make([]int64, pairs)
	for p := 0; p < pairs; p++ {
		src, dst := cs[2*p], cs[2*p+1]
		go func() {
			b := make([]byte, size)
			for time.Now().Before(stop) {
				if err := src.Send(ctx, dst.Rank(), 0, b); err != nil {
					errs <- err
					return
				}
			}
			errs <- src.Send(ctx, dst.Rank(), 0, nil) // the end marker
		}()
		go func(p int) {
			for {
				b, err := dst.Recv(ctx, src.Rank(), 0)
				if err != nil {
					errs <- err
					return
				}
				if len(b) == 0 {
					errs <- nil
					return
				}
				total[p] += int64(len(b))
			}
		}(p)
	}
	start := time.Now()
	var first error
	for i := 0; i < 2*pairs; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	wall := time.Since(start)
	if first != nil {
		return 0, fmt.Errorf("host probe: byte rate: %w", first)
	}
	var bytes int64
	for _, b := range total {
		bytes += b
	}
	return float64(bytes) / wall.Seconds(), nil
}

func closeAll(cs []*comm.Comm) {
	done := make(chan struct{}, len(cs))
	for _, c := range cs {
		go func(c *comm.Comm) { _ = c.Close(); done <- struct{}{} }(c)
	}
	for range cs {
		<-done
	}
}
