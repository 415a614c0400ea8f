package malleable

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
)

// Reasons a submission fails, fixed so results can count them.
const (
	ReasonNeverFits    = "larger than any cluster allows"
	ReasonTooManyTries = "placement tries exceeded the threshold"
	ReasonBadRequest   = "malformed request"
	ReasonCoalloc      = "the malleability manager does not co-allocate"
)

// ManagerConfig builds the malleability manager.
type ManagerConfig struct {
	// Approach is the job-management approach: pra or pwa.
	Approach string
	// Policy is the malleability policy: fpsma or egs.
	Policy string
	// Threshold is the fraction of every cluster's processors KOALA may hold
	// (0: no cap); Thresholds overrides it per cluster.
	Threshold  float64
	Thresholds map[string]float64
	// PollPeriod is the scenario time between decision rounds (default 30 s).
	// A round also runs on every submission.
	PollPeriod time.Duration
	// MaxTries fails a waiting job after that many rounds without a start
	// (0: never).
	MaxTries int
	// OpTimeout bounds, in scenario time, how long a grow or shrink may stay
	// unacknowledged before the manager stops waiting for it (default 1 h).
	OpTimeout time.Duration
	// Clusters are the cluster managers; Order fixes the cluster order for
	// ties and for deterministic rounds.
	Clusters map[string]*actor.PID
	Order    []string
	// Stats counts the invariant checks; nil counts nothing.
	Stats *Stats
	Env   actors.Env
}

// waiting is a job in the placement queue (or being claimed).
type waiting struct {
	seq       int64
	spec      *msg.JobSpec
	runner    *actor.PID
	malleable bool
	min, max  int
	pow2      bool   // runs only on power-of-two counts
	profile   string // for the records
	size      int
	fixed     string // cluster of a fixed request, "" otherwise
	at        string // cluster it is being started on (claimed, or waiting for shrinks)
	tries     int
	gone      bool // its runner left while it was being claimed
	// afterShrink: request ids of the shrinks the start waits for
	afterShrink map[int64]bool
}

// mjob is a job KOALA runs on a cluster, as the manager books it.
type mjob struct {
	id        string
	cluster   string
	runner    *actor.PID
	malleable bool
	min, max  int
	pow2      bool
	profile   string
	size      int   // processors, by the runner's last report
	running   bool  // malleable: started, may be resized
	start     int64 // start order (scenario microseconds)
	op        *mop
}

// mop is a grow or shrink request in flight.
type mop struct {
	id        int64
	grow      bool
	mandatory bool
	asked     int
	accepted  int
	replied   bool
	deadline  float64 // scenario seconds
}

// delta is the size change the op will make, as known now.
func (o *mop) delta() int {
	n := o.asked
	if o.replied {
		n = o.accepted
	}
	if o.grow {
		return n
	}
	return -n
}

type manager struct {
	cfg      ManagerConfig
	pol      pm.Policy
	appr     pm.Approach
	status   map[string]*msg.ClusterStatus
	queue    []*waiting            // waiting jobs in submission order
	claiming map[int64]*waiting    // claim id -> job being claimed
	after    map[string][]*waiting // cluster -> starts waiting for shrinks
	jobs     map[string]*mjob
	ops      map[int64]*mjob // request id -> job
	nextSeq  int64
	nextID   int64
	cancel   func()
}

type poll struct{}

// ManagerProps returns the props of the malleability manager, or an error
// when the approach or the policy is unknown.
//
// The manager stands in for the scheduler in malleable scenarios: runners
// submit to it (SubmitJob from rigid runners, SubmitMalleable from MRunners),
// the information service pushes GridStatus to it (a ClusterStatus sent
// straight from a cluster manager is taken too), and it claims the initial
// processors of every job it starts and answers JobPlaced or JobRejected.
// A malleable job is offered to the policies once its MRunner reports it
// running (MalleableStatus).
//
// Accounting. The manager books every job it started at the size its runner
// last acknowledged. A cluster's projected KOALA usage adds the grows in
// flight (the number asked, then the number accepted), subtracts the shrinks
// in flight, and adds the starts being claimed or waiting for shrinks. The
// idle processors a round works with are capacity - local users' processors
// (from the information service) - projected usage, capped by the
// information service's own idle count. A processor is therefore promised
// once: to a grow, a start or a waiting job, never to two of them. A job with
// a request in flight is not offered to the policies again until its reply
// (accepted 0) or its ResizeAck; a cluster with shrinks in flight takes no
// decision until they are acknowledged, and the start that relies on them is
// claimed only then, and only if the shrinks released enough: every start
// is checked against what KOALA holds at that moment (booked sizes, grows and
// claims in flight) and goes back to the queue when it does not fit. An
// operation that times out is booked at its worst case (a grow as done, a
// shrink as not done) until the runner's late acknowledgement says what
// happened. Jobs that leave (JobFinished) drop their requests.
//
// Shrinks are mandatory (PWA), grows voluntary. Rounds run every PollPeriod
// and on every submission; each round emits nothing by itself but the
// requests ("resize_request"), placements ("placed", "claim_failed",
// "rejected"); each poll also emits one "cluster_util" event per cluster.
func ManagerProps(cfg ManagerConfig) (*actor.Props, error) {
	pol, err := pm.New(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("malleability policy: %w", err)
	}
	appr, err := pm.NewApproach(cfg.Approach)
	if err != nil {
		return nil, fmt.Errorf("malleability approach: %w", err)
	}
	if cfg.PollPeriod <= 0 {
		cfg.PollPeriod = 30 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = time.Hour
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &manager{cfg: cfg, pol: pol, appr: appr, status: map[string]*msg.ClusterStatus{},
			claiming: map[int64]*waiting{}, after: map[string][]*waiting{}, jobs: map[string]*mjob{}, ops: map[int64]*mjob{}}
	}), nil
}

func (m *manager) env() actors.Env { return m.cfg.Env }

func (m *manager) emit(kind, jobID string, fields map[string]string, values map[string]float64) {
	ev := m.env().Event(kind, "mmanager", jobID)
	ev.Fields, ev.Values = fields, values
	m.env().Emit(ev)
}

func (m *manager) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		m.cancel = m.env().Every(m.cfg.PollPeriod, ctx.Self(), func() interface{} { return &poll{} })
	case *actor.Stopping:
		if m.cancel != nil {
			m.cancel()
		}
	case *msg.GridStatus:
		for _, c := range x.Clusters {
			m.status[c.Cluster] = c
		}
	case *msg.ClusterStatus:
		m.status[x.Cluster] = x
	case *poll:
		m.expire(ctx)
		m.round(ctx)
		m.report()
	case *msg.SubmitJob:
		m.submitRigid(ctx, x)
	case *msg.SubmitMalleable:
		m.submitMalleable(ctx, x)
	case *msg.ClaimReply:
		m.claimed(ctx, x)
	case *msg.MalleableStatus:
		if j := m.jobs[x.JobId]; j != nil {
			j.running = x.Running
			j.start = int64(x.StartS * 1e6)
			if j.op == nil {
				j.size = int(x.Size)
			}
			m.checkJob(j)
		}
	case *msg.ResizeReply:
		m.replied(ctx, x)
	case *msg.ResizeAck:
		m.acked(ctx, x)
	case *msg.VoluntaryRelease:
		if j := m.jobs[x.JobId]; j != nil && j.op == nil {
			j.size = int(x.NewSize)
			m.checkJob(j)
		}
	case *msg.JobFinished:
		m.finished(ctx, x)
	}
}

// --- submission ----------------------------------------------------------

func (m *manager) enqueue(ctx actor.Context, w *waiting) {
	m.nextSeq++
	w.seq = m.nextSeq
	m.queue = append(m.queue, w)
	m.round(ctx) // a new job is tried at once
}

func (m *manager) submitRigid(ctx actor.Context, x *msg.SubmitJob) {
	w := &waiting{spec: x.Job, runner: x.Runner.PID(), size: int(x.Job.Size)}
	if reason := m.shape(w); reason != "" {
		m.reject(ctx, w, reason)
		return
	}
	m.enqueue(ctx, w)
}

func (m *manager) submitMalleable(ctx actor.Context, x *msg.SubmitMalleable) {
	w := &waiting{spec: x.Job, runner: x.Runner.PID(), size: int(x.Job.Size), malleable: true,
		min: int(x.Min), max: int(x.Max), pow2: x.PowerOfTwo, profile: x.Profile}
	if reason := m.shape(w); reason != "" {
		m.reject(ctx, w, reason)
		return
	}
	j := pm.Job{Size: w.size, Min: w.min, Max: w.max, PowerOfTwo: w.pow2}
	if !j.Valid(w.size) {
		lo, hi := j.Bounds()
		m.reject(ctx, w, fmt.Sprintf("%s: initial size %d not valid for bounds [%d, %d] of profile %q", ReasonBadRequest, w.size, lo, hi, w.profile))
		return
	}
	m.enqueue(ctx, w)
}

// shape checks that the job asks for one cluster's worth of processors.
func (m *manager) shape(w *waiting) string {
	if w.spec == nil || w.size < 1 {
		return ReasonBadRequest + ": no size"
	}
	switch len(w.spec.Components) {
	case 0:
	case 1:
		w.fixed = w.spec.Components[0].Cluster
		if w.fixed != "" && m.cfg.Clusters[w.fixed] == nil {
			return fmt.Sprintf("%s: unknown cluster %q", ReasonBadRequest, w.fixed)
		}
	default:
		return ReasonCoalloc
	}
	return ""
}

func (m *manager) reject(ctx actor.Context, w *waiting, reason string) {
	id := ""
	if w.spec != nil {
		id = w.spec.Id
	}
	m.emit("rejected", id, map[string]string{"reason": reason}, map[string]float64{"tries": float64(w.tries)})
	if w.runner != nil {
		ctx.Send(w.runner, &msg.JobRejected{JobId: id, Reason: reason, Tries: int32(w.tries)})
	}
}

// --- the decision round ---------------------------------------------------

// clusterState is one cluster as a round sees it.
type clusterState struct {
	name    string
	view    pm.ClusterView
	running []pm.Job // malleable jobs that may be resized now
	blocked bool     // shrinks in flight or starts waiting for them
	avail   int      // processors left for waiting jobs (Worst Fit basis)
	rel     int      // processors the running jobs hold above their minimum
	fight   bool     // PWA: a waiting job already counts on shrinks here
}

// projected returns the processors KOALA will hold in cluster c once every
// operation in flight is done: booked sizes plus grows in flight, minus
// shrinks in flight, plus starts being claimed or waiting for shrinks.
func (m *manager) projected(c string) int {
	u := 0
	for _, j := range m.jobs {
		if j.cluster != c {
			continue
		}
		u += j.size
		if j.op != nil {
			u += j.op.delta()
		}
	}
	for _, w := range m.claiming {
		if w.at == c {
			u += w.size
		}
	}
	for _, w := range m.after[c] {
		u += w.size
	}
	return u
}

// holding returns an upper bound of the processors KOALA holds in cluster c
// now: booked sizes, plus grows in flight, plus starts being claimed.
func (m *manager) holding(c string) int {
	u := 0
	for _, j := range m.jobs {
		if j.cluster != c {
			continue
		}
		u += j.size
		if j.op != nil && j.op.grow {
			u += j.op.delta()
		}
	}
	for _, w := range m.claiming {
		if w.at == c {
			u += w.size
		}
	}
	return u
}

func (m *manager) threshold(c string) float64 {
	if t, ok := m.cfg.Thresholds[c]; ok {
		return t
	}
	return m.cfg.Threshold
}

// state builds the view of cluster c, or nil when its status is unknown.
//
// Idle is what the cluster can give now, counting KOALA's operations in
// flight as done: capacity - local users - projected KOALA usage, and never
// more than the information service's idle count (which may lag behind a
// release). KoalaUsed is the projected usage.
func (m *manager) state(c string) *clusterState {
	st := m.status[c]
	if st == nil {
		return nil
	}
	u := m.projected(c)
	idle := min(int(st.Capacity)-int(st.LocalBusy)-u, int(st.Idle))
	s := &clusterState{name: c, view: pm.ClusterView{Name: c, Idle: max(idle, 0), Capacity: int(st.Capacity),
		KoalaUsed: u, Threshold: m.threshold(c)}}
	s.blocked = len(m.after[c]) > 0
	for _, j := range m.sortedJobs() {
		if j.cluster != c || !j.malleable {
			continue
		}
		if j.op != nil && !j.op.grow {
			s.blocked = true
		}
		if j.running && j.op == nil {
			s.running = append(s.running, pm.Job{ID: j.id, Start: j.start, Size: j.size, Min: j.min, Max: j.max, PowerOfTwo: j.pow2})
		}
	}
	s.rel = pm.Releasable(s.running)
	return s
}

func (m *manager) sortedJobs() []*mjob {
	out := make([]*mjob, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].id < out[b].id })
	return out
}

// round takes one decision per cluster. Waiting jobs are first assigned to
// clusters by Worst Fit (the cluster with the most processors left for
// them; no co-allocation); then the approach decides per cluster with the
// jobs assigned to it, in queue order:
//
//   - PRA: the basis of Worst Fit is what is left after the running jobs'
//     grows, since PRA grows them first; a job that fits nowhere waits.
//   - PWA: the basis is the available processors before any grow. A job that
//     fits nowhere is assigned to the cluster where shrinking the running
//     jobs can make room for it (most available first), one such job per
//     cluster; that cluster's processors are then kept for it. PWA shrinks
//     (mandatory) and starts it once the shrinks are acknowledged.
//
// A cluster with shrinks in flight (or starts waiting for them) takes no
// decision until they are done, so released processors are never promised
// twice. Jobs with a grow or shrink in flight are not offered to the
// policies; their projected sizes count in the cluster's usage.
func (m *manager) round(ctx actor.Context) {
	var states []*clusterState
	byName := map[string]*clusterState{}
	maxCap := 0
	for _, c := range m.cfg.Order {
		s := m.state(c)
		if s == nil {
			continue
		}
		maxCap = max(maxCap, s.view.Cap())
		states = append(states, s)
		byName[c] = s
		if s.blocked {
			continue
		}
		s.avail = s.view.Available()
		if m.cfg.Approach == "pra" {
			d := m.appr(m.pol, s.view, s.running, nil)
			for _, g := range d.Grow {
				s.avail -= g.Delta
			}
		}
	}
	if len(states) == 0 {
		return
	}
	pwa := m.cfg.Approach == "pwa"
	assign := map[string][]pm.Waiting{}
	var keep []*waiting
	for _, w := range m.queue {
		if len(states) == len(m.cfg.Order) && w.size > maxCap || w.fixed != "" && byName[w.fixed] != nil && w.size > byName[w.fixed].view.Cap() {
			m.reject(ctx, w, fmt.Sprintf("%s (%d processors)", ReasonNeverFits, w.size))
			continue
		}
		keep = append(keep, w)
		var best *clusterState
		for _, s := range states {
			if s.blocked || w.fixed != "" && s.name != w.fixed || s.avail < w.size {
				continue
			}
			if best == nil || s.avail > best.avail {
				best = s
			}
		}
		if best != nil {
			assign[best.name] = append(assign[best.name], pm.Waiting{ID: w.spec.Id, Size: w.size})
			best.avail -= w.size
			continue
		}
		if !pwa {
			continue
		}
		for _, s := range states {
			if s.blocked || s.fight || w.fixed != "" && s.name != w.fixed || s.avail+s.rel < w.size {
				continue
			}
			if best == nil || s.avail > best.avail {
				best = s
			}
		}
		if best != nil {
			assign[best.name] = append(assign[best.name], pm.Waiting{ID: w.spec.Id, Size: w.size})
			best.fight = true
			best.avail = 0
		}
	}
	m.queue = keep

	started := map[string]bool{}
	for _, s := range states {
		if s.blocked {
			continue
		}
		d := m.appr(m.pol, s.view, s.running, assign[s.name])
		var shrinks map[int64]bool
		for _, ch := range d.Shrink {
			if shrinks == nil {
				shrinks = map[int64]bool{}
			}
			shrinks[m.request(ctx, ch, s.name)] = true
		}
		for _, ch := range d.Grow {
			m.request(ctx, ch, s.name)
		}
		for _, st := range d.Start {
			started[st.JobID] = true
			w := m.take(st.JobID)
			if w == nil {
				continue
			}
			w.at = s.name
			if st.AfterShrink && len(shrinks) > 0 {
				w.afterShrink = shrinks
				m.after[s.name] = append(m.after[s.name], w)
				continue
			}
			m.start(ctx, w)
		}
		m.checkCluster(s.name)
	}
	// Jobs left waiting count one more try.
	keep = keep[:0]
	for _, w := range m.queue {
		if started[w.spec.Id] {
			continue
		}
		w.tries++
		if m.cfg.MaxTries > 0 && w.tries > m.cfg.MaxTries {
			m.reject(ctx, w, ReasonTooManyTries)
			continue
		}
		keep = append(keep, w)
	}
	m.queue = keep
}

// take removes a job from the queue and returns it.
func (m *manager) take(id string) *waiting {
	for i, w := range m.queue {
		if w.spec.Id == id {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			return w
		}
	}
	return nil
}

// requeue puts a job back in the queue at its submission position.
func (m *manager) requeue(w *waiting) {
	i := sort.Search(len(m.queue), func(i int) bool { return m.queue[i].seq > w.seq })
	m.queue = append(m.queue[:i], append([]*waiting{w}, m.queue[i:]...)...)
}

// request sends a grow (voluntary) or shrink (mandatory) request for one
// policy change and returns its id.
func (m *manager) request(ctx actor.Context, ch pm.Change, cluster string) int64 {
	j := m.jobs[ch.JobID]
	if j == nil || ch.Delta == 0 {
		return 0
	}
	m.nextID++
	o := &mop{id: m.nextID, grow: ch.Delta > 0, mandatory: ch.Delta < 0, asked: abs(ch.Delta),
		deadline: m.env().Now() + m.cfg.OpTimeout.Seconds()}
	j.op = o
	m.ops[o.id] = j
	if o.grow {
		ctx.Send(j.runner, &msg.GrowRequest{JobId: j.id, Processors: int32(o.asked), Mandatory: o.mandatory, RequestId: o.id})
	} else {
		ctx.Send(j.runner, &msg.ShrinkRequest{JobId: j.id, Processors: int32(o.asked), Mandatory: o.mandatory, RequestId: o.id})
	}
	m.emit("resize_request", j.id,
		map[string]string{"op": opName(o.grow), "mandatory": strconv.FormatBool(o.mandatory), "cluster": cluster,
			"approach": m.cfg.Approach, "policy": m.cfg.Policy},
		map[string]float64{"processors": float64(o.asked), "size": float64(j.size)})
	return o.id
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// --- starting jobs --------------------------------------------------------

// start claims the processors of a job a round started on cluster w.at, if
// it fits what KOALA may hold there now; otherwise the job goes back to the
// queue for the next round. The check is against holding, which counts every
// claim and grow in flight and no shrink before its acknowledgement, so it
// holds whatever happened since the round decided: a start that waited for
// shrinks is claimed only if they released enough (a shrink may be declined,
// release less than asked, or time out), and never on the word of a round's
// view alone.
func (m *manager) start(ctx actor.Context, w *waiting) {
	if st := m.status[w.at]; st != nil {
		h := m.holding(w.at)
		limit := min(pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(w.at)}.Cap(), int(st.Capacity))
		if h+w.size > limit {
			m.emit("start_deferred", w.spec.Id, map[string]string{"cluster": w.at},
				map[string]float64{"size": float64(w.size), "holding": float64(h), "cap": float64(limit)})
			w.at, w.afterShrink = "", nil
			m.requeue(w)
			return
		}
	}
	m.claim(ctx, w)
}

func (m *manager) claim(ctx actor.Context, w *waiting) {
	m.nextID++
	m.claiming[m.nextID] = w
	ctx.Send(m.cfg.Clusters[w.at], &msg.Claim{JobId: w.spec.Id, Nodes: int32(w.size), ClaimId: m.nextID, ReplyTo: msg.FromPID(ctx.Self())})
}

func (m *manager) claimed(ctx actor.Context, r *msg.ClaimReply) {
	w := m.claiming[r.ClaimId]
	if w == nil || w.spec.Id != r.JobId || w.gone {
		if w != nil {
			delete(m.claiming, r.ClaimId)
		}
		if r.Ok { // nobody waits for these processors
			ctx.Send(m.cfg.Clusters[r.Cluster], &msg.ReleaseNodes{JobId: r.JobId, Nodes: nodeNames(r.Nodes)})
		}
		return
	}
	delete(m.claiming, r.ClaimId)
	if !r.Ok {
		w.tries++
		m.emit("claim_failed", w.spec.Id, map[string]string{"reason": r.Cluster + ": " + r.Reason}, nil)
		w.at = ""
		if m.cfg.MaxTries > 0 && w.tries > m.cfg.MaxTries {
			m.reject(ctx, w, ReasonTooManyTries+" (claim failed)")
			return
		}
		m.requeue(w)
		return
	}
	j := &mjob{id: w.spec.Id, cluster: r.Cluster, runner: w.runner, malleable: w.malleable,
		min: w.min, max: w.max, pow2: w.pow2, profile: w.profile, size: len(r.Nodes)}
	m.jobs[j.id] = j
	m.emit("placed", j.id, map[string]string{"components": fmt.Sprintf("%s:%d", r.Cluster, len(r.Nodes))},
		map[string]float64{"tries": float64(w.tries + 1), "clusters": 1})
	ctx.Send(w.runner, &msg.JobPlaced{JobId: j.id, PlacedS: m.env().Now(), Tries: int32(w.tries + 1),
		Allocations: []*msg.Allocation{{Cluster: r.Cluster, Nodes: r.Nodes}}})
	m.checkCluster(r.Cluster)
}

// --- replies from the runners ----------------------------------------------

func (m *manager) replied(ctx actor.Context, x *msg.ResizeReply) {
	j := m.ops[x.RequestId]
	if j == nil || j.op == nil || j.op.id != x.RequestId {
		return
	}
	j.op.replied = true
	j.op.accepted = int(x.Accepted)
	if x.Accepted == 0 {
		m.clearOp(ctx, j)
	}
}

func (m *manager) acked(ctx actor.Context, x *msg.ResizeAck) {
	j := m.jobs[x.JobId]
	if j == nil {
		return
	}
	j.size = int(x.NewSize)
	if j.op != nil && j.op.id == x.RequestId {
		m.clearOp(ctx, j)
	}
	m.checkJob(j)
	m.checkCluster(j.cluster)
}

// clearOp ends the job's operation in flight and starts the jobs that were
// waiting only for it.
func (m *manager) clearOp(ctx actor.Context, j *mjob) {
	if j.op == nil {
		return
	}
	id := j.op.id
	delete(m.ops, id)
	j.op = nil
	var rest, ready []*waiting
	for _, w := range m.after[j.cluster] {
		delete(w.afterShrink, id)
		if len(w.afterShrink) == 0 {
			ready = append(ready, w)
			continue
		}
		rest = append(rest, w)
	}
	if len(rest) == 0 {
		delete(m.after, j.cluster)
	} else {
		m.after[j.cluster] = rest
	}
	for _, w := range ready {
		m.start(ctx, w)
	}
}

// expire gives up on operations unacknowledged past their deadline. The
// runner may still carry one out (a late ResizeAck sets the size), so the
// books keep the worst case: an expired grow counts as done (the job is
// booked at its size plus the grow), an expired shrink as not done (the
// size stays, and a start waiting for it is claimed only if it fits).
func (m *manager) expire(ctx actor.Context) {
	now := m.env().Now()
	for _, j := range m.sortedJobs() {
		if j.op != nil && now > j.op.deadline {
			m.emit("resize_timeout", j.id, map[string]string{"op": opName(j.op.grow), "cluster": j.cluster},
				map[string]float64{"processors": float64(j.op.asked)})
			if j.op.grow {
				j.size += j.op.delta()
			}
			m.clearOp(ctx, j)
		}
	}
}

func (m *manager) finished(ctx actor.Context, x *msg.JobFinished) {
	if j := m.jobs[x.JobId]; j != nil {
		// Off the books first: its processors are free (the runner released
		// them before it said so), which a start waiting for its op may use.
		delete(m.jobs, x.JobId)
		m.clearOp(ctx, j)
		return
	}
	if w := m.take(x.JobId); w != nil {
		return
	}
	for _, w := range m.claiming {
		if w.spec.Id == x.JobId {
			w.gone = true
		}
	}
	for c, ws := range m.after {
		for i, w := range ws {
			if w.spec.Id == x.JobId {
				m.after[c] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(m.after[c]) == 0 {
			delete(m.after, c)
		}
	}
}

// --- invariants and reports ------------------------------------------------

func (m *manager) checkJob(j *mjob) {
	if !j.malleable || !j.running || j.op != nil {
		return
	}
	pj := pm.Job{Size: j.size, Min: j.min, Max: j.max, PowerOfTwo: j.pow2}
	lo, hi := pj.Bounds()
	check(m.env(), m.cfg.Stats, "mmanager", j.id, InvBounds, j.size >= lo && j.size <= hi,
		func() string {
			return fmt.Sprintf("job %s booked at %d processors, bounds [%d, %d]", j.id, j.size, lo, hi)
		})
	if j.pow2 {
		check(m.env(), m.cfg.Stats, "mmanager", j.id, InvPow2, j.size&(j.size-1) == 0,
			func() string { return fmt.Sprintf("job %s (%s) booked at %d processors", j.id, j.profile, j.size) })
	}
}

// checkCluster checks that what KOALA may hold in the cluster (booked sizes,
// grows in flight, starts being claimed) fits its capacity and its cap.
func (m *manager) checkCluster(c string) {
	st := m.status[c]
	if st == nil {
		return
	}
	h := m.holding(c)
	check(m.env(), m.cfg.Stats, "mmanager", "", InvCapacity, h <= int(st.Capacity),
		func() string { return fmt.Sprintf("cluster %s: KOALA may hold %d of %d processors", c, h, st.Capacity) })
	v := pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(c)}
	check(m.env(), m.cfg.Stats, "mmanager", "", InvThreshold, h <= v.Cap(),
		func() string { return fmt.Sprintf("cluster %s: KOALA may hold %d processors, cap %d", c, h, v.Cap()) })
}

// report emits one "cluster_util" event per cluster: the time series of
// utilisation.
func (m *manager) report() {
	waiting := len(m.queue)
	for _, c := range m.cfg.Order {
		st := m.status[c]
		if st == nil {
			continue
		}
		var mall, rigid, running, busy int
		for _, j := range m.jobs {
			if j.cluster != c {
				continue
			}
			if j.malleable {
				mall += j.size
				running++
			} else {
				rigid += j.size
			}
			if j.op != nil {
				busy++
			}
		}
		v := pm.ClusterView{Capacity: int(st.Capacity), Threshold: m.threshold(c)}
		m.emit("cluster_util", "", map[string]string{"cluster": c}, map[string]float64{
			"capacity": float64(st.Capacity), "cap": float64(v.Cap()), "idle": float64(st.Idle),
			"local": float64(st.LocalBusy), "koala": float64(st.KoalaBusy),
			"malleable": float64(mall), "rigid": float64(rigid), "malleable_jobs": float64(running),
			"ops_in_flight": float64(busy), "waiting": float64(waiting),
		})
	}
}
