package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// Malleable applications (SPEC §4) change their number of ranks while they
// run. They iterate; between two iterations every rank passes a safe point
// where a pending resize is applied: the ranks agree on it (a small
// allreduce that also carries the iteration's own reduction), switch to the
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
	Stats    comm.ResizeStats
}

// Control connects a running malleable rank with what drives it (the node
// actor): Order hands it resize orders at any time; the rank reports each
// resize it took part in and the processors it wants to give back through
// the callbacks, from its own goroutine. A nil *Control never resizes.
type Control struct {
	mu        sync.Mutex
	pending   *Resize
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
		ctl.waited = 0
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
// safe points it waited.
func (ctl *Control) take(id int64) int {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	w := ctl.waited
	if ctl.pending != nil && ctl.pending.ID == id {
		ctl.pending, ctl.waited = nil, 0
	}
	return w
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
	iter  int    // iterations done by the job
	total int    // iterations of the run
	red   []float64
	acc   float64 // sum of the iterations' reductions (proves the exchanges)
	// begin is when the current iteration started (its safe point, or the
	// end of the resize applied there): compute fills what communication
	// left of the iteration's time.
	begin time.Time
}

// kernel is the application-specific part of a malleable application.
type kernel interface {
	// step runs one iteration on s.c and returns the rank's contribution
	// to the iteration's reduction (summed at the next safe point).
	step(ctx context.Context, s *mstate) ([]float64, error)
	// sized is called at the start and after every size change.
	sized(s *mstate, ctl *Control)
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

// runMalleable drives a malleable application: iterations with a safe point
// before each, then the data check.
//
// The data a resize moves happens once per resize, not once per iteration:
// at time scale k the iterations shrink by k, so the array shrinks by k too
// (at least a byte per rank of the largest size), and a resize costs the
// same scenario time at every time scale.
func runMalleable(ctx context.Context, name string, k kernel, c *comm.Comm, p Params, ctl *Control, j *Joined, iterations float64, dataBytes int64) (Result, error) {
	s := &mstate{c: c}
	dataBytes = ScaledData(dataBytes, p.TimeScale)
	if j == nil {
		s.total = p.iterations(iterations)
		off, size := blockOf(dataBytes, c.Rank(), c.Size())
		s.data = make([]byte, size)
		for i := range s.data {
			s.data[i] = pattern(off + int64(i))
		}
	} else {
		start := time.Now()
		s.data = j.Data
		if err := s.handOver(ctx); err != nil {
			return Result{}, fmt.Errorf("%s: join: %w", name, err)
		}
		ctl.resized(Resized{ID: j.Order.ID, Rank: c.Rank(), NewRank: c.Rank(), Duration: j.Stats.Duration + time.Since(start), Stats: j.Stats})
	}
	k.sized(s, ctl)
	// A new rank joined at the others' safe point: it goes straight to the
	// iteration they start next.
	skip := j != nil
	for s.iter < s.total {
		s.begin = time.Now()
		if !skip {
			left, err := s.safePoint(ctx, k, ctl)
			if err != nil {
				return Result{}, fmt.Errorf("%s: safe point after %d iterations: %w", name, s.iter, err)
			}
			if left {
				return Result{Iterations: s.iter, Released: true}, nil
			}
		}
		skip = false
		var err error
		s.red, err = k.step(ctx, s)
		if err != nil {
			return Result{}, fmt.Errorf("%s: iteration %d: %w", name, s.iter, err)
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
	return Result{Iterations: s.iter, Value: v[0]}, nil
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
	waited := ctl.take(o.ID)
	start := time.Now()
	rank := s.c.Rank()
	data, st, err := s.c.Resize(ctx, o.Peers, o.Self, s.data)
	if err != nil {
		return false, fmt.Errorf("resize %d->%d: %w", n, len(o.Peers), err)
	}
	if o.Self < 0 {
		s.data = nil
		ctl.resized(Resized{ID: o.ID, Rank: rank, NewRank: -1, Released: true, SafePoints: waited, Duration: time.Since(start), Stats: st})
		return true, nil
	}
	s.data = data
	if len(o.Peers) > n {
		if err := s.handOver(ctx); err != nil {
			return false, fmt.Errorf("grow %d->%d: %w", n, len(o.Peers), err)
		}
	}
	ctl.resized(Resized{ID: o.ID, Rank: rank, NewRank: o.Self, SafePoints: waited, Duration: time.Since(start), Stats: st})
	k.sized(s, ctl)
	s.begin = time.Now() // the resize is a pause of its own, not part of the iteration
	return false, nil
}

// handOver gives new ranks the job's progress: rank 0 broadcasts the
// iteration counters over the grown communicator.
func (s *mstate) handOver(ctx context.Context) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(s.iter))
	binary.BigEndian.PutUint64(b[8:16], uint64(s.total))
	got, err := s.c.Bcast(ctx, 0, b[:])
	if err != nil {
		return fmt.Errorf("hand over the iteration counters: %w", err)
	}
	if len(got) != 16 {
		return fmt.Errorf("iteration counters of %d bytes", len(got))
	}
	s.iter = int(binary.BigEndian.Uint64(got[0:8]))
	s.total = int(binary.BigEndian.Uint64(got[8:16]))
	return nil
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

// compute emulates the iteration's work: an iteration takes the time the
// profile gives (at the node's speed) in all, communication included, so
// the wait is what the iteration's communication since s.begin (exchanges
// and the safe point's reduction, not a resize) has left of it. Iterations
// whose communication alone takes longer are that much longer.
func (s *mstate) compute(ctx context.Context, work time.Duration) error {
	full := s.c.ComputeTime(work)
	spent := time.Since(s.begin)
	if full <= 0 || spent >= full {
		return ctx.Err()
	}
	return s.c.Compute(ctx, time.Duration(float64(work)*float64(full-spent)/float64(full)))
}

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
