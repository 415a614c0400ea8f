package mmanager

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
	pm "github.com/koala-emu/koala-emu/actors/policy/malleability"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
)

// Reasons a submission fails, fixed so results can count them.
const (
	ReasonNeverFits    = "larger than any cluster allows"
	ReasonTooManyTries = "placement tries exceeded the threshold"
	ReasonBadRequest   = "malformed request"
	ReasonCoalloc      = "the malleability manager does not co-allocate"
)

// Config builds the malleability manager.
type Config struct {
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
	// Placement places each waiting job on one cluster (nil: Worst Fit, from
	// the placement registry).
	Placement placement.Policy
	// Clusters are the cluster managers; Order fixes the cluster order for
	// ties and for deterministic rounds.
	Clusters map[string]*actor.PID
	Order    []string
	// Stats counts the invariant checks; nil counts nothing.
	Stats *invariant.Stats
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
	cfg      Config
	pol      pm.Policy
	appr     pm.Approach
	placer   placement.Policy
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

// Props returns the props of the malleability manager, or an error
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
func Props(cfg Config) (*actor.Props, error) {
	pol, err := pm.New(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("malleability policy: %w", err)
	}
	appr, err := pm.NewApproach(cfg.Approach)
	if err != nil {
		return nil, fmt.Errorf("malleability approach: %w", err)
	}
	placer := cfg.Placement
	if placer == nil {
		if placer, err = placement.New("wf"); err != nil {
			return nil, err
		}
	}
	if cfg.PollPeriod <= 0 {
		cfg.PollPeriod = 30 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = time.Hour
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &manager{cfg: cfg, pol: pol, appr: appr, placer: placer, status: map[string]*msg.ClusterStatus{},
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
