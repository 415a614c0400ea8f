package apps

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/comm"
)

// NodeProcessors is the number of processors per node the nominal times
// assume: a DAS-3 node has two, and its one rank computes with both
// (comm.Options.Processors = 2).
const NodeProcessors = 2

// Reference link of the nominal times: one Myri-10G cluster of DAS-3 as MPI
// saw it (SPEC §1), 0.03 ms one way and 560 MB/s.
var (
	RefLatency   = 30 * time.Microsecond
	RefBandwidth = 560e6 // bytes/s
)

// Params are the run-time parameters of an application run.
type Params struct {
	// TimeScale divides iteration counts (and the total work of
	// compute-only applications); at least one iteration always runs.
	// Per-iteration work and message sizes never change with it. <= 0 means 1.
	TimeScale float64
	// Args override application parameters by name (see each application's
	// doc comment); unknown names are an error.
	Args map[string]float64
}

// Result is what a rank's run produced.
type Result struct {
	Iterations int
	// Value is a checksum or answer that proves the computation was real
	// (the same on every rank).
	Value float64
	// Released: the rank left a malleable job at a resize (it holds no
	// result; the job goes on without it).
	Released bool
	// Stopped: the rank stopped at a safe point and wrote its checkpoint
	// (a Checkpointable application asked to stop); the job resumes
	// elsewhere from it.
	Stopped bool
}

// App is an SPMD program: every rank of a job runs Run with its Comm.
type App interface {
	Name() string
	// Nominal is the execution time at time scale 1 on one Myri-10G
	// cluster of nodes with speed 1.0 and NodeProcessors processors, with
	// the default arguments: the figure the calibration matches.
	Nominal(nodes int) time.Duration
	// Run executes the rank's part of the program.
	Run(ctx context.Context, c *comm.Comm, p Params) (Result, error)
}

// ArgApp is implemented by the applications of this package: Args lists
// the argument names and defaults, NominalArgs is Nominal with arguments.
type ArgApp interface {
	App
	Args() map[string]float64
	NominalArgs(nodes int, args map[string]float64) (time.Duration, error)
}

// Traffic is an application's communication pattern on a job size, for the
// demand a run puts on the host (`dilation: auto`): per iteration, the
// messages and payload bytes the whole job sends, and the iteration's time
// on one reference cluster at dilation 1.
type Traffic struct {
	Iteration  time.Duration
	Msgs       float64
	Bytes      float64
	Iterations float64 // at time scale 1
	// Burst is the most messages the job's ranks send at one instant (one
	// step of a lock-step exchange): the host must handle them all within a
	// small share of the link's latency.
	Burst float64
	// Once says that Burst is the job's one exchange (after all its
	// computation): its frames' tail is that one burst's, which the
	// dilation must cover with a wider margin (fidelity.BurstOnceMargin).
	Once bool
	// Rounds are the latency-bound message rounds on an iteration's
	// critical path, and CritBytes the bytes that cross its slowest link
	// one after the other: what a slower link adds to an iteration (On).
	Rounds    float64
	CritBytes float64
}

// On is the iteration's time when its slowest link has one-way latency lat
// and bandwidth bw (bytes/s; 0 keeps the reference's): each critical round
// pays lat instead of RefLatency, each critical byte 1/bw instead of
// 1/RefBandwidth. A first-order model, good to the ratios the papers
// report; the emulation measures the rest.
func (t Traffic) On(lat time.Duration, bw float64) time.Duration {
	it := t.Iteration + time.Duration(t.Rounds*float64(lat-RefLatency))
	if bw > 0 && bw < RefBandwidth {
		it += time.Duration(t.CritBytes * (1/bw - 1/RefBandwidth) * 1e9)
	}
	return max(it, t.Iteration)
}

// Rates returns the job's messages and bytes per second of scenario time.
func (t Traffic) Rates() (msgs, bytes float64) {
	if t.Iteration <= 0 {
		return 0, 0
	}
	s := t.Iteration.Seconds()
	return t.Msgs / s, t.Bytes / s
}

// Peered is implemented by applications that name the ranks each rank
// exchanges messages with, point to point and through the collectives it
// calls, in both directions: Peers(n, r) holds p if and only if Peers(n, p)
// holds r. ConnectPeers opens those connections before the rank starts.
type Peered interface {
	Peers(n, r int, args map[string]float64) ([]int, error)
}

// ConnectPeers opens, before rank c.Rank() of app starts, the connections
// its run will use (comm.Comm.ConnectPeers), so that their set-up is not
// part of the run's first, measured, exchange: an emulated job's start
// costs what an MPI job's start did on DAS-3, and its first frames travel
// over open connections as its later ones do. Every rank of the job must
// call it. An application that does not name its peers connects lazily,
// at its first sends.
func ConnectPeers(ctx context.Context, app App, c *comm.Comm, p Params) error {
	pa, ok := app.(Peered)
	if !ok {
		return nil
	}
	peers, err := pa.Peers(c.Size(), c.Rank(), p.Args)
	if err != nil {
		return err
	}
	return c.ConnectPeers(ctx, peers...)
}

// TrafficApp is implemented by applications that describe their traffic.
type TrafficApp interface {
	Traffic(nodes int, args map[string]float64) (Traffic, error)
}

// TrafficOf returns app's traffic on nodes, or a zero Traffic for an
// application that sends next to nothing (prime) or does not say.
func TrafficOf(app App, nodes int, args map[string]float64) (Traffic, error) {
	if t, ok := app.(TrafficApp); ok {
		return t.Traffic(nodes, args)
	}
	return Traffic{}, nil
}

// Names lists the registered applications, those a workload may name.
// Lookup also finds Compute (ComputeName), the process of a batch grid's
// trace job, which no workload names.
func Names() []string {
	return []string{"allgather", "ccr", "ft", "nbody", "poisson", "prime", "qr", "wave"}
}

// MalleableNames lists the registered applications that implement
// Malleable.
func MalleableNames() []string {
	var out []string
	for _, n := range Names() {
		if a, err := Lookup(n); err == nil {
			if _, ok := a.(Malleable); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// Lookup returns the application with the given name.
func Lookup(name string) (App, error) {
	switch name {
	case "prime":
		return Prime{}, nil
	case "poisson":
		return Poisson{}, nil
	case "wave":
		return Wave{}, nil
	case "allgather":
		return Allgather{}, nil
	case "ccr":
		return CCR{}, nil
	case "ft":
		return FT{}, nil
	case "nbody":
		return NBody{}, nil
	case "qr":
		return QR{}, nil
	case ComputeName:
		return Compute{}, nil
	}
	return nil, unknownApp(name)
}

// unknownApp is Lookup's error for a name it does not know, its text made
// only when read: the results look up every job's application, trace jobs'
// ("swf") included, and most callers only test the error.
type unknownApp string

func (u unknownApp) Error() string {
	return fmt.Sprintf("apps: unknown application %q (known: %s)", string(u), strings.Join(Names(), ", "))
}

// NominalArgs is app.Nominal with argument overrides, for applications
// that support them.
func NominalArgs(app App, nodes int, args map[string]float64) (time.Duration, error) {
	if a, ok := app.(ArgApp); ok {
		return a.NominalArgs(nodes, args)
	}
	if len(args) > 0 {
		return 0, fmt.Errorf("apps: %s takes no arguments", app.Name())
	}
	return app.Nominal(nodes), nil
}

// resolve merges args over defaults and rejects unknown names. defaults is
// the caller's own map (an Args call), so without args it is the answer as
// it is: the sim backend's model resolves an application's defaults for
// every rank of every job, and a copy per call was about 7 % of the
// utilisation sweep's CPU.
func resolve(app string, defaults, args map[string]float64) (map[string]float64, error) {
	if len(args) == 0 {
		return defaults, nil
	}
	out := make(map[string]float64, len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	var bad []string
	for k, v := range args {
		if _, ok := defaults[k]; !ok {
			bad = append(bad, k)
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("apps: %s: argument %s = %v is not a number", app, k, v)
		}
		out[k] = v
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		known := make([]string, 0, len(defaults))
		for k := range defaults {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("apps: %s: unknown argument(s) %s (known: %s)", app, strings.Join(bad, ", "), strings.Join(known, ", "))
	}
	return out, nil
}

func positive(app string, a map[string]float64, names ...string) error {
	for _, n := range names {
		if a[n] <= 0 {
			return fmt.Errorf("apps: %s: argument %s must be > 0 (got %v)", app, n, a[n])
		}
	}
	return nil
}

// iterations divides a count at time scale 1 by the time scale (at least 1).
func (p Params) iterations(n float64) int { return IterationsAt(n, p.TimeScale) }

// IterationsAt is how many of n iterations (a count at time scale 1) a run
// at time scale k runs: n / k rounded, at least one (k <= 0 means 1).
func IterationsAt(n, k float64) int {
	if k <= 0 {
		k = 1
	}
	return max(1, int(math.Round(n/k)))
}

// Credit is the computation a rank leaves out so that the phase its job
// does once costs its own time in scenario time, not k times it. A time
// scale k divides the iterations, so each second of a run stands for k
// seconds of the scenario; a phase done once (a final gather, broadcast or
// reduction) would then count k times: oneOff is its ideal cost over the
// job's links at dilation 1 (comm's Ideal* on the scenario's matrix), and
// the rank computes oneOff (1 - 1/k) less, spread evenly over its calls
// of Compute (Credit.Take), so that the job's run is shorter by what the
// phase costs beyond 1/k of itself. Every rank of a job takes the same
// time off, so the job ends that much sooner and its scenario time is its
// iterations' k times plus the phase once. Spread evenly, no call is left
// with a sliver of computation that a timer's lateness would stretch many
// times over (the fidelity monitor judges every call). What the host adds
// to the phase beyond its ideal cost still counts k times, and a job with
// less computation than the credit keeps the rest (Credit.Left). At time
// scale 1, or without the matrix (oneOff 0), nothing is left out.
type Credit struct {
	s spread // reference-processor work still to leave out
}

// Credit is the rank's credit for a one-off phase of ideal cost oneOff,
// over calls calls of Compute.
func (p Params) Credit(c *comm.Comm, oneOff time.Duration, calls int) *Credit {
	cr := &Credit{}
	if k := p.scale(); k > 1 && oneOff > 0 {
		cr.s.add(c.WorkFor(time.Duration(float64(oneOff)*(1-1/k))), calls)
	}
	return cr
}

// Take returns work less its share of the credit (at least 0).
func (cr *Credit) Take(work time.Duration) time.Duration {
	return work - cr.s.take(max(work, 0))
}

// Left is the reference-processor work of the credit the rank's
// computation did not cover.
func (cr *Credit) Left() time.Duration { return cr.s.left }

// spread is an amount settled evenly over a number of calls and never
// beyond itself: a credit (positive) or a debt (negative). It carries the
// one-off phase's Credit and a malleable job's credit for late resizes.
type spread struct {
	left time.Duration // still to settle
	per  time.Duration // to settle at each call
}

// add adds d to what is left and spreads the whole over calls calls.
func (s *spread) add(d time.Duration, calls int) {
	s.left += d
	n := time.Duration(max(calls, 1))
	if s.left >= 0 {
		s.per = (s.left + n - 1) / n
	} else {
		s.per = s.left / n
	}
}

// take settles this call's share, of at most limit in size, and returns it.
func (s *spread) take(limit time.Duration) time.Duration {
	x := s.per
	if (x > 0 && x > s.left) || (x < 0 && x < s.left) {
		x = s.left
	}
	x = max(min(x, limit), -limit)
	s.left -= x
	return x
}

func (p Params) scale() float64 {
	if p.TimeScale <= 0 {
		return 1
	}
	return p.TimeScale
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// xfer is the ideal time to move b bytes over the reference link.
func xfer(b float64) time.Duration {
	return time.Duration(b / RefBandwidth * float64(time.Second))
}

// log2ceil returns the number of rounds of a recursive-doubling collective.
func log2ceil(n int) int {
	r := 0
	for 1<<r < n {
		r++
	}
	return r
}

// allreduceRounds is the number of message rounds of comm's allreduce.
func allreduceRounds(n int) int {
	pof2 := 1
	for pof2*2 <= n {
		pof2 *= 2
	}
	r := log2ceil(pof2)
	if n != pof2 {
		r += 2
	}
	return r
}

// RankSpec describes one rank (node) of a local run.
type RankSpec struct {
	Cluster    string
	Speed      float64 // 0 means 1
	Processors int     // 0 means NodeProcessors
}

// LocalOption tunes RunLocal.
type LocalOption func(*localConfig)

type localConfig struct {
	links    netem.Matrix
	dilation float64
	sleep    func(context.Context, time.Duration) error
	jobID    string
}

// WithDilation sets the compute dilation of every rank (the egress must
// dilate the links by the same factor).
func WithDilation(d float64) LocalOption { return func(c *localConfig) { c.dilation = d } }

// WithLinks gives every rank the scenario's link matrix, the prices of a
// job's one-off phase (Params.Credit).
func WithLinks(m netem.Matrix) LocalOption { return func(c *localConfig) { c.links = m } }

// WithSleep sets the precise wait the ranks' Compute uses.
func WithSleep(f func(context.Context, time.Duration) error) LocalOption {
	return func(c *localConfig) { c.sleep = f }
}

// WithJobID names the job (default "local").
func WithJobID(id string) LocalOption { return func(c *localConfig) { c.jobID = id } }

// Report is the outcome of RunLocalReport.
type Report struct {
	// Elapsed is the wall time from the moment every rank was connected
	// until the last rank returned from Run.
	Elapsed time.Duration
	// Result is rank 0's result.
	Result Result
	// Stats are the counters of every rank, by rank.
	Stats []comm.Stats
}

// Messages returns the messages all ranks sent.
func (r Report) Messages() int64 {
	var n int64
	for _, s := range r.Stats {
		n += s.MsgsSent
	}
	return n
}

// Bytes returns the payload bytes all ranks sent.
func (r Report) Bytes() int64 {
	var n int64
	for _, s := range r.Stats {
		n += s.BytesSent
	}
	return n
}

// RunLocal runs app as one job with a rank per entry of ranks, all in this
// process over loopback TCP; egress(rank) shapes rank's outgoing traffic
// (nil: unshaped). It returns the wall execution time and rank 0's result.
func RunLocal(ctx context.Context, app App, ranks []RankSpec, egress func(rank int) netem.Egress, p Params, opts ...LocalOption) (time.Duration, Result, error) {
	r, err := RunLocalReport(ctx, app, ranks, egress, p, opts...)
	return r.Elapsed, r.Result, err
}

// RunLocalReport is RunLocal with the ranks' counters.
func RunLocalReport(ctx context.Context, app App, ranks []RankSpec, egress func(rank int) netem.Egress, p Params, opts ...LocalOption) (Report, error) {
	cfg := localConfig{dilation: 1, jobID: "local"}
	for _, o := range opts {
		o(&cfg)
	}
	copts := make([]comm.Options, len(ranks))
	for i, rs := range ranks {
		procs := rs.Processors
		if procs <= 0 {
			procs = NodeProcessors
		}
		var eg netem.Egress
		if egress != nil {
			eg = egress(i)
		}
		copts[i] = comm.Options{
			JobID:      cfg.jobID,
			Cluster:    rs.Cluster,
			Speed:      rs.Speed,
			Processors: procs,
			Dilation:   cfg.dilation,
			Links:      cfg.links,
			Egress:     eg,
			Sleep:      cfg.sleep,
		}
	}
	cs, err := comm.ConnectLocal(ctx, copts)
	if err != nil {
		return Report{}, err
	}
	n := len(cs)
	pre := make(chan error, n)
	for _, c := range cs {
		go func(c *comm.Comm) { pre <- ConnectPeers(ctx, app, c, p) }(c)
	}
	for range cs {
		if perr := <-pre; perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		for _, c := range cs {
			c.Abort(err)
		}
		return Report{}, fmt.Errorf("apps: %s on %d ranks: %w", app.Name(), n, err)
	}
	results := make([]Result, n)
	errs := make([]error, n)
	ends := make([]time.Time, n)
	done := make(chan int, n)
	start := time.Now()
	for i, c := range cs {
		go func(i int, c *comm.Comm) {
			results[i], errs[i] = app.Run(ctx, c, p)
			ends[i] = time.Now()
			if errs[i] != nil {
				c.Abort(fmt.Errorf("%s rank %d: %w", app.Name(), i, errs[i]))
			}
			done <- i
		}(i, c)
	}
	var first error
	for range cs {
		i := <-done
		if errs[i] != nil && first == nil {
			first = errs[i]
			// The job fails with its first failed rank, as a runner fails
			// it: a rank waiting for one it never connected to would not
			// hear of the failure from the failed rank's own abort.
			why := fmt.Errorf("%s rank %d failed: %w", app.Name(), i, errs[i])
			for k, c := range cs {
				if k != i {
					c.Abort(why)
				}
			}
		}
	}
	var last time.Time
	for _, t := range ends {
		if t.After(last) {
			last = t
		}
	}
	rep := Report{Elapsed: last.Sub(start), Result: results[0], Stats: make([]comm.Stats, n)}
	closeErrs := make(chan error, n)
	for _, c := range cs {
		go func(c *comm.Comm) { closeErrs <- c.Close() }(c)
	}
	for i := range cs {
		if err := <-closeErrs; err != nil && first == nil {
			first = err
		}
		rep.Stats[i] = cs[i].Stats()
	}
	if first != nil {
		return rep, fmt.Errorf("apps: %s on %d ranks: %w", app.Name(), n, first)
	}
	return rep, nil
}

// UserspaceEgress builds, for RunLocal, one userspace shaper per rank from
// a link matrix (each rank's plan is its cluster's row), dilated by
// dilation, releasing on the default delay line.
func UserspaceEgress(m netem.Matrix, ranks []RankSpec, dilation float64) (func(rank int) netem.Egress, error) {
	egs := make([]netem.Egress, len(ranks))
	for i, r := range ranks {
		plan, err := m.PlanFor(fmt.Sprintf("rank%d", i), r.Cluster)
		if err != nil {
			return nil, fmt.Errorf("apps: egress of rank %d: %w", i, err)
		}
		egs[i] = netem.NewUserspace(plan, nil, dilation)
	}
	return func(rank int) netem.Egress { return egs[rank] }, nil
}
