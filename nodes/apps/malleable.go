package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Malleable applications (SPEC §4) change their number of ranks while they
// run. They iterate, an iteration in one step or more (StepsPer: several
// when a time scale makes each iteration stand for many); before every
// step every rank passes a safe point where a pending resize is applied:
// the ranks agree on it (a small allreduce that also carries the previous
// iteration's own reduction), switch to the
// new rank table with comm.Resize, and the job's data, a real byte array
// block-distributed over the ranks, is redistributed over the network. New
// ranks enter with comm.Endpoint.Join. Iterations follow the application's
// profile (profile.go): an iteration on n processors takes
// Exec(n) / iterations (divided by the node's speed) in all, its real
// communication included, the emulated compute filling the rest; so a run
// on a constant n processors of speed 1 takes Exec(n) at time scale 1, plus
// the pauses of its resizes. A rank counts as Processors processors (one
// per node on the malleable platforms).

// Malleable is an application that can be resized at its safe points.
type Malleable interface {
	App
	// Profile is the name of the application's malleability profile.
	Profile() string
	// RunMalleable runs one rank. For a rank that starts with the job, c
	// comes from Endpoint.Connect and joined is nil; for a rank that joins a
	// running job, c and joined come from Endpoint.Join. ctl delivers
	// resize orders and takes the rank's reports; a rank that leaves the
	// job returns Result.Released.
	RunMalleable(ctx context.Context, c *comm.Comm, p Params, ctl *Control, joined *Joined) (Result, error)
}

// Joined is what a new rank brings into RunMalleable.
type Joined struct {
	Order Resize
	Data  []byte
	Stats comm.ResizeStats
}

// Resize is a resize order: at its next safe point the rank switches to
// the table Peers (ranks 0..n-1; the job had OldSize ranks before), as rank
// Self, or leaves the job when Self is -1.
type Resize struct {
	ID        int64
	Peers     []comm.Peer
	OldSize   int
	Self      int
	Mandatory bool
}

// Resized is a rank's report on its part in a resize.
type Resized struct {
	ID       int64
	Rank     int // before the resize (a new rank: its own)
	NewRank  int // -1 when the rank left
	Released bool
	// SafePoints is the number of safe points the rank passed while the
	// order was pending, including the one that applied it (0 for a new
	// rank).
	SafePoints int
	// Duration is the wall time the rank spent resizing (switch, data
	// moves, state hand-over).
	Duration time.Duration
	// Late is the wall time from the order's arrival at the rank to the
	// safe point that applied it (0 for a new rank), and Credit the wall
	// time the job's later computation was shortened (lengthened, when
	// negative) by for it (lateCredit): the job's, as rank 0 reckoned it
	// on a grow.
	Late, Credit time.Duration
	Stats        comm.ResizeStats
}

// Control connects a running malleable rank with what drives it (the node
// actor): Order hands it resize orders at any time; the rank reports each
// resize it took part in and the processors it wants to give back through
// the callbacks, from its own goroutine. A nil *Control never resizes.
type Control struct {
	mu        sync.Mutex
	pending   *Resize
	arrived   time.Time // the pending order's arrival
	waited    int
	onResized func(Resized)
	onRelease func(processors int)
}

// NewControl returns a Control with the given report callbacks (nil ones
// are skipped).
func NewControl(onResized func(Resized), onRelease func(processors int)) *Control {
	return &Control{onResized: onResized, onRelease: onRelease}
}

// Order hands the rank a resize to apply at its next safe point (replacing
// one still pending).
func (ctl *Control) Order(o Resize) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if ctl.pending == nil || ctl.pending.ID != o.ID {
		ctl.waited, ctl.arrived = 0, time.Now()
	}
	ctl.pending = &o
}

// arrive is called at a safe point: it returns the pending order, counting
// the safe point for it.
func (ctl *Control) arrive() *Resize {
	if ctl == nil {
		return nil
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if ctl.pending == nil {
		return nil
	}
	ctl.waited++
	o := *ctl.pending
	return &o
}

// take clears the pending order id once applied and returns the number of
// safe points it waited and when it arrived.
func (ctl *Control) take(id int64) (int, time.Time) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	w, at := ctl.waited, ctl.arrived
	if ctl.pending != nil && ctl.pending.ID == id {
		ctl.pending, ctl.waited = nil, 0
	}
	return w, at
}

func (ctl *Control) resized(r Resized) {
	if ctl != nil && ctl.onResized != nil {
		ctl.onResized(r)
	}
}

func (ctl *Control) release(n int) {
	if ctl != nil && ctl.onRelease != nil && n > 0 {
		ctl.onRelease(n)
	}
}

// mstate is one malleable rank's state.
type mstate struct {
	c     *comm.Comm
	data  []byte // this rank's block of the job's array
	m     int    // steps per iteration (StepsPer)
	iter  int    // steps done by the job
	total int    // steps of the run
	red   []float64
	acc   float64 // sum of the iterations' reductions (proves the exchanges)
	// begin is when the current iteration started (its first safe point),
	// or when a resize applied within it ended, at step base of it: compute
	// fills what communication has left of the iteration's time since.
	begin time.Time
	base  int
	k     float64 // the time scale
	// credit is the wall time still to come off (negative: to add to) the
	// job's computation for its resizes' lateness, settled evenly over its
	// remaining steps (lateCredit, owe).
	credit spread
}

// kernel is the application-specific part of a malleable application.
type kernel interface {
	// step runs one iteration on s.c and returns the rank's contribution
	// to the iteration's reduction (summed at the next safe point).
	step(ctx context.Context, s *mstate) ([]float64, error)
	// sized is called at the start and after every size change.
	sized(s *mstate, ctl *Control)
	// pace is the profile's time of one iteration (at time scale 1) on n
	// ranks of procs processors each.
	pace(n, procs int) time.Duration
}

// pattern is byte i of a job's array: the data a rank ends with is checked
// against it, so a redistribution that loses or misplaces a byte fails the
// run.
func pattern(i int64) byte { return byte(i*131 + i>>9 + 7) }

// blockOf is the balanced block of rank r of n over total bytes (as comm
// lays data out after a resize).
func blockOf(total int64, r, n int) (off, size int64) {
	q, rem := total/int64(n), total%int64(n)
	size = q
	if int64(r) < rem {
		size++
	}
	off = int64(r)*q + min(int64(r), rem)
	return off, size
}

// ScaledData is the array size of a malleable application at time scale k:
// its size at time scale 1 divided by k, at least 64 bytes.
func ScaledData(bytes int64, k float64) int64 {
	if k <= 1 {
		return bytes
	}
	return max(64, int64(float64(bytes)/k))
}

// SafePointsPerIteration bounds the safe points a malleable job reaches
// within one iteration of a run at time scale k. The time scale divides the
// iterations, so each stands for k of them, and a job that reached a safe
// point only before each would wait k times longer in scenario time for
// one, and grow or shrink that much later, than at time scale 1. So an
// iteration is split into min(round(k), SafePointsPerIteration) steps of
// equal computation, each after a safe point; the iteration's exchanges
// stay in its first step, and every step's computation fills what the
// iteration's communication so far (safe points included) has left of
// its share of the iteration's time, so the iteration takes as long as
// before. A step is never shorter than MinStepWall of wall time in the
// job's fastest iteration: each safe point is an allreduce over the job's
// ranks, and the host must carry them (at dilation 1 every built-in
// iteration is 0.1-0.25 s, so steps need a dilation of 2 or more).
const SafePointsPerIteration = 8

// MinStepWall is the shortest step of a malleable job's fastest iteration.
// On the 2-vCPU VM, steps of 12.5 ms (eight per iteration of FT or n-body
// at dilation 1) quadrupled das3-malleable-pwa's frames at time scale 240
// (0.48 to 1.80 million) and saturated the host (CPU mean 45 to 93 %), and
// the iterations grew longer than their profile (docs/malleability.md).
const MinStepWall = 100 * time.Millisecond

// StepsPer is the most steps of a malleable application's iteration at
// time scale k, each after a safe point.
func StepsPer(k float64) int {
	return int(min(max(math.Round(k), 1), SafePointsPerIteration))
}

// stepsFor is the steps of an iteration at time scale k for a job whose
// fastest iteration takes fastest of wall time (0: unknown).
func stepsFor(k float64, fastest time.Duration) int {
	m := StepsPer(k)
	if fastest > 0 {
		m = min(m, max(1, int(fastest/MinStepWall)))
	}
	return m
}

// agreeSteps sets s.m, the same on every rank: the fewest steps any rank
// allows (its nodes' speed and load set its fastest iteration).
func (s *mstate) agreeSteps(ctx context.Context, k kernel) error {
	procs := s.c.Processors()
	fastest := time.Duration(math.MaxInt64)
	for n := 1; n <= 64; n++ {
		fastest = min(fastest, k.pace(n, procs))
	}
	m := float64(stepsFor(s.k, s.c.ComputeTime(fastest*time.Duration(procs))))
	if m > 1 && s.c.Size() > 1 {
		v, err := s.c.AllreduceFloat64(ctx, []float64{m}, comm.Min)
		if err != nil {
			return fmt.Errorf("agree on the steps of an iteration: %w", err)
		}
		m = v[0]
	}
	s.m = int(m)
	return nil
}

// runMalleable drives a malleable application: iterations of steps with a
// safe point before each (SafePointsPerIteration), then the data check.
//
// The data a resize moves happens once per resize, not once per iteration:
// at time scale k the iterations shrink by k, so the array shrinks by k too
// (at least a byte per rank of the largest size), and a resize costs the
// same scenario time at every time scale.
func runMalleable(ctx context.Context, name string, k kernel, c *comm.Comm, p Params, ctl *Control, j *Joined, iterations float64, dataBytes int64) (Result, error) {
	s := &mstate{c: c, k: p.TimeScale, m: 1}
	dataBytes = ScaledData(dataBytes, p.TimeScale)
	if j == nil {
		if err := s.agreeSteps(ctx, k); err != nil {
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
		s.total = p.iterations(iterations) * s.m
		off, size := blockOf(dataBytes, c.Rank(), c.Size())
		s.data = make([]byte, size)
		for i := range s.data {
			s.data[i] = pattern(off + int64(i))
		}
	} else {
		start := time.Now()
		s.data = j.Data
		cr, err := s.handOver(ctx, 0)
		if err != nil {
			return Result{}, fmt.Errorf("%s: join: %w", name, err)
		}
		s.owe(cr)
		s.begin, s.base = time.Now(), s.iter%s.m
		ctl.resized(Resized{ID: j.Order.ID, Rank: c.Rank(), NewRank: c.Rank(), Duration: j.Stats.Duration + time.Since(start), Credit: cr, Stats: j.Stats})
	}
	k.sized(s, ctl)
	// A new rank joined at the others' safe point: it goes straight to the
	// iteration they start next.
	skip := j != nil
	for s.iter < s.total {
		if s.iter%s.m == 0 {
			s.begin, s.base = time.Now(), 0
		}
		if !skip {
			left, err := s.safePoint(ctx, k, ctl)
			if err != nil {
				return Result{}, fmt.Errorf("%s: safe point after %d steps: %w", name, s.iter, err)
			}
			if left {
				return Result{Iterations: s.iter / s.m, Released: true}, nil
			}
		}
		skip = false
		var err error
		s.red, err = k.step(ctx, s)
		if err != nil {
			return Result{}, fmt.Errorf("%s: step %d: %w", name, s.iter, err)
		}
		s.iter++
	}
	// The last iteration's reduction, then the data check: every rank must
	// hold exactly its balanced block of the array.
	if err := s.reduce(ctx, nil); err != nil {
		return Result{}, fmt.Errorf("%s: final reduction: %w", name, err)
	}
	off, size := blockOf(dataBytes, s.c.Rank(), s.c.Size())
	if int64(len(s.data)) != size {
		return Result{}, fmt.Errorf("%s: rank %d of %d holds %d bytes of data, want %d", name, s.c.Rank(), s.c.Size(), len(s.data), size)
	}
	var sum float64
	for i, b := range s.data {
		g := off + int64(i)
		if b != pattern(g) {
			return Result{}, fmt.Errorf("%s: rank %d: data byte %d (global %d) is %d, want %d: redistribution lost data", name, s.c.Rank(), i, g, b, pattern(g))
		}
		sum += float64(b) * float64(g%251+1)
	}
	v, err := s.c.AllreduceFloat64(ctx, []float64{sum}, comm.Sum)
	if err != nil {
		return Result{}, fmt.Errorf("%s: checksum: %w", name, err)
	}
	return Result{Iterations: s.iter / s.m, Value: v[0]}, nil
}

// reduce sums the pending reduction (and flags) over the ranks; it returns
// the flag sums.
func (s *mstate) reduce(ctx context.Context, flags []float64) error {
	_, err := s.reduceFlags(ctx, flags)
	return err
}

func (s *mstate) reduceFlags(ctx context.Context, flags []float64) ([]float64, error) {
	v := append(append([]float64(nil), flags...), s.red...)
	if len(v) == 0 {
		return nil, nil
	}
	out, err := s.c.AllreduceFloat64(ctx, v, comm.Sum)
	if err != nil {
		return nil, err
	}
	for _, x := range out[len(flags):] {
		s.acc += x
	}
	s.red = nil
	return out[:len(flags)], nil
}

// safePoint applies a pending resize once every rank has it. It reports
// whether this rank left the job.
func (s *mstate) safePoint(ctx context.Context, k kernel, ctl *Control) (bool, error) {
	o := ctl.arrive()
	var has, id float64
	if o != nil {
		has, id = 1, float64(o.ID)
	}
	if ctl == nil && s.red == nil {
		return false, nil
	}
	n := s.c.Size()
	f, err := s.reduceFlags(ctx, []float64{has, id})
	if err != nil {
		return false, err
	}
	if o == nil || int(f[0]) != n || f[1] != id*float64(n) {
		return false, nil // not every rank has the order yet
	}
	waited, arrived := ctl.take(o.ID)
	start := time.Now()
	late := start.Sub(arrived)
	procs := s.c.Processors()
	before, after := k.pace(n, procs), k.pace(len(o.Peers), procs)
	rank := s.c.Rank()
	data, st, err := s.c.Resize(ctx, o.Peers, o.Self, s.data)
	if err != nil {
		return false, fmt.Errorf("resize %d->%d: %w", n, len(o.Peers), err)
	}
	if o.Self < 0 {
		s.data = nil
		ctl.resized(Resized{ID: o.ID, Rank: rank, NewRank: -1, Released: true, SafePoints: waited, Duration: time.Since(start), Late: late, Stats: st})
		return true, nil
	}
	s.data = data
	cr := lateCredit(late, s.k/float64(s.m), before, after)
	if len(o.Peers) > n {
		// The new ranks take rank 0's reckoning, and so do the others.
		if cr, err = s.handOver(ctx, cr); err != nil {
			return false, fmt.Errorf("grow %d->%d: %w", n, len(o.Peers), err)
		}
	}
	s.owe(cr)
	ctl.resized(Resized{ID: o.ID, Rank: rank, NewRank: o.Self, SafePoints: waited, Duration: time.Since(start), Late: late, Credit: cr, Stats: st})
	k.sized(s, ctl)
	// The resize is a pause of its own, not part of the iteration.
	s.begin, s.base = time.Now(), s.iter%s.m
	return false, nil
}

// handOver gives new ranks the job's progress: rank 0 broadcasts the step
// counters, the steps of an iteration and its credit for the grow's
// lateness over the grown communicator; every rank returns that credit.
func (s *mstate) handOver(ctx context.Context, credit time.Duration) (time.Duration, error) {
	var b [32]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(s.iter))
	binary.BigEndian.PutUint64(b[8:16], uint64(s.total))
	binary.BigEndian.PutUint64(b[16:24], uint64(credit))
	binary.BigEndian.PutUint64(b[24:32], uint64(s.m))
	got, err := s.c.Bcast(ctx, 0, b[:])
	if err != nil {
		return 0, fmt.Errorf("hand over the iteration counters: %w", err)
	}
	if len(got) != 32 {
		return 0, fmt.Errorf("iteration counters of %d bytes", len(got))
	}
	s.iter = int(binary.BigEndian.Uint64(got[0:8]))
	s.total = int(binary.BigEndian.Uint64(got[8:16]))
	s.m = max(1, int(binary.BigEndian.Uint64(got[24:32])))
	return time.Duration(binary.BigEndian.Uint64(got[16:24])), nil
}

// lateCredit is the wall time a job's computation is shortened by when a
// resize applies late wall time after the order reached the rank, at time
// scale k, the job's iteration taking before on its old size and after on
// its new one (lengthened, when the new size is slower). A time scale k
// divides the iterations, so each one stands for k: the order waits for
// the next safe point as long in wall time as at time scale 1, but k times
// as long in scenario time, and the job runs (k-1)/k of that wait at its
// old size where it would have run at its new one. What it would have done
// faster (or slower) meanwhile comes off (or onto) its later computation,
// so that a resize's effect on the job does not change with the time scale
// (docs/malleability.md, "Time scale and safe points"). 0 at time scale 1.
func lateCredit(late time.Duration, k float64, before, after time.Duration) time.Duration {
	if k <= 1 || late <= 0 || before <= 0 {
		return 0
	}
	return time.Duration(float64(late) * (1 - 1/k) * (1 - float64(after)/float64(before)))
}

// owe adds credit (wall time; negative: a debt) to what the job's
// remaining steps' computation gives back, spread evenly over them.
func (s *mstate) owe(credit time.Duration) {
	s.credit.add(credit, s.total-s.iter)
}

// iterWork is the reference-processor work of one iteration on a rank of
// a job of procs processors in all: the profile's time per iteration times
// the rank's processors (Compute divides by them).
func iterWork(prof Profile, procs, rankProcs int, iterations float64) time.Duration {
	return time.Duration(float64(prof.Exec(procs))/iterations) * time.Duration(rankProcs)
}

// malleableTraffic is the Traffic of a malleable application on n ranks
// that does not resize: exec in iterations steps, each sending msgs
// messages of bytes in all (burst of them at once, over rounds latency-bound
// rounds carrying critBytes on the critical path) before the safe point's
// allreduce of three float64 values (the resize flags and the pending
// reduction) over all n ranks.
func malleableTraffic(exec time.Duration, iterations float64, n int, msgs, bytes, burst, rounds, critBytes float64) Traffic {
	red := float64(n * allreduceRounds(n)) // none on one rank
	return Traffic{Iteration: time.Duration(float64(exec) / iterations), Msgs: msgs + red, Bytes: bytes + 24*red,
		Iterations: iterations, Burst: burst, Rounds: rounds + float64(allreduceRounds(n)), CritBytes: critBytes}
}

// compute emulates a step's share of the iteration's work (the iteration's
// work, the profile's, is given): an iteration takes the time the profile
// gives (at the node's speed) in all, communication included, so a step's
// wait is what the iteration's communication since s.begin (exchanges and
// the safe points' reductions, not a resize) has left of its steps so far.
// Iterations whose communication alone takes longer are that much longer.
// The credit for late resizes (take) comes off the wait.
func (s *mstate) compute(ctx context.Context, work time.Duration) error {
	full := s.c.ComputeTime(work)
	target := time.Duration(float64(full) * float64(s.iter%s.m+1-s.base) / float64(s.m))
	spent := time.Since(s.begin) + s.credit.take(math.MaxInt64)
	if full <= 0 || spent >= target {
		return ctx.Err()
	}
	return s.c.Compute(ctx, time.Duration(float64(work)*float64(target-spent)/float64(full)))
}

// exchanges says whether the current step is its iteration's first, the
// one that carries the iteration's messages.
func (s *mstate) exchanges() bool { return s.iter%s.m == 0 }

// profileNominal is Nominal of a malleable application: the profile's
// time on nodes single-processor nodes.
func profileNominal(prof Profile, nodes int) time.Duration {
	return prof.Exec(max(nodes, 1))
}

func mustProfile(name string) Profile {
	p, ok := LookupProfile(name)
	if !ok {
		panic(fmt.Sprintf("apps: no malleability profile %q", name))
	}
	return p
}

// chunk returns size bytes of data starting at a position that moves with
// the iteration (wrapping), for exchanges that carry real data.
func chunk(data []byte, iter, size int) []byte {
	if len(data) == 0 || size <= 0 {
		return nil
	}
	size = min(size, len(data))
	start := (iter * size) % len(data)
	if start+size > len(data) {
		start = len(data) - size
	}
	return data[start : start+size]
}

func byteSum(b []byte) float64 {
	var s uint64
	for _, x := range b {
		s += uint64(x)
	}
	return float64(s)
}
