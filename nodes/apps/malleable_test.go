package apps

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/nodes/comm"
)

// checksumOf is the Value a malleable application must return for an array
// of total bytes, whatever its resizes.
func checksumOf(total int64) float64 {
	var s float64
	for g := int64(0); g < total; g++ {
		s += float64(pattern(g)) * float64(g%251+1)
	}
	return s
}

// mjob drives a malleable job in this process the way the node actors do:
// one Control per rank, resize orders, new ranks joining on their endpoint.
type mjob struct {
	t       *testing.T
	ctx     context.Context
	app     Malleable
	p       Params
	mu      sync.Mutex
	ctls    []*Control // by rank
	reports chan Resized
	release chan int
	done    chan rankOut
	nextID  int64
	size    int
	tab     []comm.Peer // the current rank table
}

type rankOut struct {
	rank int
	res  Result
	err  error
}

func startJob(t *testing.T, app Malleable, n int, p Params) *mjob {
	t.Helper()
	j := &mjob{t: t, ctx: ctxT(t), app: app, p: p, reports: make(chan Resized, 256), release: make(chan int, 16),
		done: make(chan rankOut, 64), size: n}
	opts := make([]comm.Options, n)
	for i := range opts {
		opts[i] = comm.Options{JobID: "m", Cluster: "a"}
	}
	cs, err := comm.ConnectLocal(j.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	j.tab = cs[0].Peers()
	for i, c := range cs {
		ctl := j.newControl()
		j.ctls = append(j.ctls, ctl)
		go j.run(i, c, ctl, nil)
	}
	return j
}

func (j *mjob) newControl() *Control {
	return NewControl(func(r Resized) { j.reports <- r }, func(n int) { j.release <- n })
}

func (j *mjob) run(rank int, c *comm.Comm, ctl *Control, joined *Joined) {
	res, err := j.app.RunMalleable(j.ctx, c, j.p, ctl, joined)
	if err != nil {
		c.Abort(err)
	} else if !res.Released {
		err = c.Close()
	}
	j.done <- rankOut{rank, res, err}
}

// resize orders the job from its current size to n and waits for every
// rank's report.
func (j *mjob) resize(n int) []Resized {
	j.t.Helper()
	j.nextID++
	old := j.size
	peers := append([]comm.Peer(nil), j.tab...)
	var eps []*comm.Endpoint
	if n > old {
		for r := old; r < n; r++ {
			ep, err := comm.Listen(j.ctx, comm.Options{JobID: "m", Rank: r, Cluster: "a"}, "127.0.0.1:0")
			if err != nil {
				j.t.Fatal(err)
			}
			j.t.Cleanup(func() { _ = ep.Close() })
			eps = append(eps, ep)
			peers = append(peers, comm.Peer{Rank: r, Addr: ep.Addr(), Cluster: "a"})
		}
	} else {
		peers = peers[:n]
	}
	j.tab = peers
	for r := 0; r < old; r++ {
		self := r
		if r >= n {
			self = -1
		}
		j.ctls[r].Order(Resize{ID: j.nextID, Peers: peers, OldSize: old, Self: self})
	}
	for i, ep := range eps {
		r := old + i
		ctl := j.newControl()
		j.ctls = append(j.ctls, ctl)
		o := Resize{ID: j.nextID, Peers: peers, OldSize: old, Self: r}
		go func(ep *comm.Endpoint) {
			c, data, st, err := ep.Join(j.ctx, peers, old)
			if err != nil {
				j.done <- rankOut{r, Result{}, err}
				return
			}
			j.run(r, c, ctl, &Joined{Order: o, Data: data, Stats: st})
		}(ep)
	}
	j.ctls = j.ctls[:max(n, old)]
	var reps []Resized
	var departed []rankOut // collected by wait, handed back below
	deadline := time.After(30 * time.Second)
	for len(reps) < max(n, old) {
		select {
		case r := <-j.reports:
			if r.ID == j.nextID {
				reps = append(reps, r)
			}
		case o := <-j.done:
			if o.err != nil {
				j.t.Fatalf("rank %d failed during resize %d->%d: %v", o.rank, old, n, o.err)
			}
			if !o.res.Released {
				j.t.Fatalf("rank %d finished during resize %d->%d (job too short)", o.rank, old, n)
			}
			departed = append(departed, o)
		case <-deadline:
			j.t.Fatalf("resize %d->%d: %d reports after 30 s", old, n, len(reps))
		}
	}
	for _, o := range departed {
		j.done <- o
	}
	j.ctls = j.ctls[:n]
	j.size = n
	return reps
}

// wait collects every rank's end.
func (j *mjob) wait(ranks int) []rankOut {
	j.t.Helper()
	var outs []rankOut
	deadline := time.After(60 * time.Second)
	for len(outs) < ranks {
		select {
		case o := <-j.done:
			if o.err != nil {
				j.t.Fatalf("rank %d: %v", o.rank, o.err)
			}
			outs = append(outs, o)
		case <-deadline:
			j.t.Fatalf("%d of %d ranks ended", len(outs), ranks)
		}
	}
	return outs
}

// rank0Credit returns rank 0's report among a resize's reports and checks
// that every rank took rank 0's credit.
func rank0Credit(t *testing.T, reps []Resized) Resized {
	t.Helper()
	var r0 Resized
	for _, r := range reps {
		if r.Rank == 0 {
			r0 = r
		}
	}
	for _, r := range reps {
		if r.Credit != r0.Credit {
			t.Errorf("rank %d credited %v, rank 0 %v", r.Rank, r.Credit, r0.Credit)
		}
	}
	return r0
}

// checkFinals checks the ranks of outs that finished the job: n of them,
// each with the checksum want after iters iterations.
func checkFinals(t *testing.T, outs []rankOut, want float64, iters, n int) {
	t.Helper()
	finals := 0
	for _, o := range outs {
		if o.res.Released {
			continue
		}
		finals++
		if o.res.Value != want || o.res.Iterations != iters {
			t.Errorf("rank %d: %+v, want checksum %v after %d iterations", o.rank, o.res, want, iters)
		}
	}
	if finals != n {
		t.Errorf("%d ranks finished, want %d", finals, n)
	}
}

func TestNBodyGrowsAndShrinksWithItsData(t *testing.T) {
	// 20 ms iterations on 2 ranks, 60 of them.
	p := Params{TimeScale: 500, Args: map[string]float64{"iterations": 30000, "data_mb": 1, "halo_kb": 1}}
	j := startJob(t, NBody{}, 2, p)
	reps := j.resize(5)
	// The grow applied at the next safe point after the order: at time
	// scale 500 it is credited, every rank the same (rank 0's), and the
	// old ranks name its lateness.
	if r0 := rank0Credit(t, reps); r0.Late <= 0 || r0.Credit <= 0 || r0.Credit >= r0.Late {
		t.Errorf("rank 0 of a late grow 2->5: late %v, credit %v", r0.Late, r0.Credit)
	}
	for _, r := range reps {
		if r.Rank < 2 && (r.SafePoints < 1 || r.NewRank != r.Rank) {
			t.Errorf("grow report of an old rank: %+v", r)
		}
		if r.Rank >= 2 && (r.SafePoints != 0 || r.Stats.BytesRecv == 0) {
			t.Errorf("new rank report: %+v (a new rank receives data)", r)
		}
	}
	reps = j.resize(3)
	released := 0
	for _, r := range reps {
		if r.Released {
			released++
			if r.NewRank != -1 || r.Stats.BytesSent == 0 {
				t.Errorf("departing rank report %+v", r)
			}
		}
	}
	if released != 2 {
		t.Errorf("%d ranks released, want 2", released)
	}
	checkFinals(t, j.wait(5), checksumOf(ScaledData(1<<20, p.TimeScale)), 60, 3)
}

// TestNBodyResizesBetweenSteps: iterations long enough to split into steps
// (0.2 s at best, so two steps at time scale 400) still grow and shrink
// with their data, every rank ends with the job's iteration count (not its
// steps), and the new ranks take the same steps and credit as rank 0.
func TestNBodyResizesBetweenSteps(t *testing.T) {
	p := Params{TimeScale: 400, Args: map[string]float64{"iterations": 1200, "data_mb": 1, "halo_kb": 1}}
	j := startJob(t, NBody{}, 2, p)
	rank0Credit(t, j.resize(4))
	j.resize(3)
	checkFinals(t, j.wait(4), checksumOf(ScaledData(1<<20, p.TimeScale)), 3, 3)
}

func TestFTReleasesAboveAPowerOfTwo(t *testing.T) {
	p := Params{TimeScale: 100, Args: map[string]float64{"iterations": 6000, "data_mb": 0.5, "exchange_kb": 1}}
	j := startJob(t, FT{}, 2, p)
	j.resize(3)
	select {
	case n := <-j.release:
		if n != 1 {
			t.Errorf("FT on 3 ranks asks to release %d, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FT on 3 ranks did not ask to release one")
	}
	j.resize(2) // what the runner does with the release
	outs := j.wait(3)
	for _, o := range outs {
		if !o.res.Released && o.res.Value != checksumOf(ScaledData(1<<19, p.TimeScale)) {
			t.Errorf("rank %d: checksum %v", o.rank, o.res.Value)
		}
	}
}

func TestMalleableRigidRunAndNominal(t *testing.T) {
	for _, name := range []string{"ft", "nbody"} {
		app, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := app.(Malleable)
		if !ok {
			t.Fatalf("%s is not Malleable", name)
		}
		prof, _ := LookupProfile(m.Profile())
		if app.Nominal(2) != prof.Exec(2) || app.Nominal(64) != prof.Exec(64) {
			t.Errorf("%s: Nominal differs from the profile", name)
		}
		res := run(t, name, 4, Params{TimeScale: 2000, Args: map[string]float64{"iterations": 4000, "data_mb": 0.25}})
		if res.Value != checksumOf(ScaledData(1<<18, 2000)) || res.Iterations != 2 {
			t.Errorf("%s rigid on 4: %+v", name, res)
		}
	}
	if got := MalleableNames(); fmt.Sprint(got) != "[ft nbody]" {
		t.Errorf("MalleableNames = %v", got)
	}
}

// TestIterationTimeFollowsTheProfile checks the per-iteration compute of
// the profile model, without timing anything.
func TestIterationTimeFollowsTheProfile(t *testing.T) {
	prof := mustProfile("nbody")
	w2 := iterWork(prof, 2, 1, 2400)
	w32 := iterWork(prof, 32, 1, 2400)
	if w2 != prof.Exec(2)/2400 || w32 != prof.Exec(32)/2400 || w32 >= w2 {
		t.Errorf("iteration work %v on 2, %v on 32", w2, w32)
	}
	if iterWork(prof, 46, 1, 2400) <= w32 {
		t.Error("no slowdown past the best size")
	}
	if iterWork(prof, 4, 2, 2400) != 2*prof.Exec(4)/2400 {
		t.Error("work not scaled by the rank's processors")
	}
}
