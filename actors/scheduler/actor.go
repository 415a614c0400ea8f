package scheduler

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/actors/policy/placement"
)

// Reasons a submission fails, fixed so results can count them.
const (
	ReasonTooManyTries = "placement tries exceeded the threshold"
	ReasonBadRequest   = "malformed request"
)

// Config builds the scheduler.
type Config struct {
	Policy     placement.Policy
	Options    placement.Options
	ScanPeriod time.Duration // scenario time between queue scans
	MaxTries   int           // placement-try threshold
	Clusters   map[string]*actor.PID
	Order      []string // cluster order, for deterministic snapshots
	Env        actors.Env
}

type entry struct {
	job    *msg.JobSpec
	runner *actor.PID
	req    placement.Request
	// key is shapeKey(req), made once (cacheable false: requests with files)
	key       string
	cacheable bool
	tries     int
	claimID   int64
	claiming  []placement.Assignment
	replies   []*msg.ClaimReply
}

type scheduler struct {
	cfg    Config
	queue  []*entry
	view   map[string]*msg.ClusterStatus
	links  map[[2]string]*msg.LinkEstimate
	nextID int64
	cancel func()
	// A scan's buffers, kept from one scan to the next: the no-fit answers
	// by request shape, and the queue's two parts.
	noFit         map[string]placement.Outcome
	spare, failed []*entry
}

type scan struct{}

// Props returns the scheduler's props.
func Props(cfg Config) *actor.Props {
	if cfg.MaxTries < 1 {
		cfg.MaxTries = 1
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &scheduler{cfg: cfg, view: map[string]*msg.ClusterStatus{}, links: map[[2]string]*msg.LinkEstimate{},
			noFit: map[string]placement.Outcome{}}
	})
}

func (s *scheduler) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		if s.cfg.ScanPeriod > 0 {
			s.cancel = s.cfg.Env.Every(s.cfg.ScanPeriod, ctx.Self(), func() interface{} { return &scan{} })
		}
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	case *msg.GridStatus:
		for _, c := range x.Clusters {
			s.view[c.Cluster] = c
		}
		for _, l := range x.Links {
			s.links[[2]string{l.Src, l.Dst}] = l
		}
	case *msg.SubmitJob:
		s.submit(ctx, x)
	case *scan:
		s.scan(ctx)
	case *msg.ClaimReply:
		s.claimed(ctx, x)
	case *msg.JobFinished:
		// Nodes go back through the cluster managers; the next scan sees them.
	}
}

func (s *scheduler) submit(ctx actor.Context, x *msg.SubmitJob) {
	e := &entry{job: x.Job, runner: x.Runner.PID()}
	req, err := toRequest(x.Job)
	if err != nil {
		s.reject(ctx, e, ReasonBadRequest+": "+err.Error())
		return
	}
	e.req = req
	e.key, e.cacheable = shapeKey(req)
	// A new job is tried at once. It joins the tail, where a job that does
	// not fit would go, so the queue changes only if it is rejected.
	snap := s.snapshot()
	if s.try(ctx, e, s.cfg.Policy.Place(e.req, snap, s.cfg.Options), snap) != rejected {
		s.queue = append(s.queue, e)
	}
}

func toRequest(j *msg.JobSpec) (placement.Request, error) {
	t, err := placement.ParseRequestType(j.Request)
	if err != nil {
		return placement.Request{}, err
	}
	req := placement.Request{JobID: j.Id, Type: t, Total: int(j.Size)}
	for _, c := range j.Components {
		req.Components = append(req.Components, placement.Component{Cluster: c.Cluster, Size: int(c.Size)})
	}
	for _, f := range j.Files {
		req.Files = append(req.Files, placement.File{Name: f.Name, Size: f.Size, Replicas: f.Replicas})
	}
	return req, nil
}

// snapshot is the information service's view as the policies see it. An
// unreachable cluster (partitioned) shows no idle node, so nothing is placed
// there until it heals, while its capacity still says what could fit.
func (s *scheduler) snapshot() placement.Snapshot {
	snap := placement.Snapshot{Net: netView(s.links)}
	for _, name := range s.cfg.Order {
		st := s.view[name]
		if st == nil {
			continue
		}
		idle := int(st.Idle)
		if st.Unreachable {
			idle = 0
		}
		snap.Clusters = append(snap.Clusters, placement.ClusterState{Name: name, Idle: idle, Capacity: int(st.Capacity)})
	}
	return snap
}

// scan tries to place every waiting job, head to tail.
func (s *scheduler) scan(ctx actor.Context) {
	snap := s.snapshot()
	// The queue is rebuilt in s.spare, the buffer of the scan before: a scan
	// runs every period, over every waiting job.
	keep, failed := s.spare[:0], s.failed[:0]
	// A policy is a pure function of the request and the snapshot: within
	// one scan, until a placement changes the snapshot, a request of the
	// same shape gets the same no-fit answer.
	clear(s.noFit)
	for _, e := range s.queue {
		if e.claiming != nil {
			keep = append(keep, e)
			continue
		}
		out, hit := s.noFit[e.key]
		if !e.cacheable || !hit {
			out = s.cfg.Policy.Place(e.req, snap, s.cfg.Options)
			if e.cacheable && out.Code == placement.NoFitNow {
				s.noFit[e.key] = out
			}
		}
		if out.Code == placement.Placed {
			clear(s.noFit)
		}
		switch s.try(ctx, e, out, snap) {
		case placed:
			keep = append(keep, e)
		case requeued:
			failed = append(failed, e)
		}
	}
	// Jobs whose placement failed go to the tail, in their order.
	old := s.queue
	s.queue = append(keep, failed...)
	clear(old) // no job is held alive by the spare buffer
	s.spare, s.failed = old[:0], clear0(failed)
}

func clear0(es []*entry) []*entry {
	clear(es)
	return es[:0]
}

// What try did with a job.
type tried int

const (
	placed   tried = iota // claims sent; the job stays where it is
	requeued              // no fit now: the job goes to the tail
	rejected              // out of the queue
)

// try acts on the policy's outcome for e: claims for a placement (their
// nodes taken off snap, the scan's view), a try counted for no fit, a
// rejection past the threshold or for a job that never fits.
func (s *scheduler) try(ctx actor.Context, e *entry, out placement.Outcome, snap placement.Snapshot) tried {
	switch out.Code {
	case placement.Placed:
		s.claim(ctx, e, out.Assignments)
		for _, a := range out.Assignments {
			for i := range snap.Clusters {
				if snap.Clusters[i].Name == a.Cluster {
					snap.Clusters[i].Idle -= a.Size
				}
			}
		}
		return placed
	case placement.NoFitNow:
		e.tries++
		if e.tries > s.cfg.MaxTries {
			s.reject(ctx, e, ReasonTooManyTries+" ("+out.Reason+")")
			return rejected
		}
		return requeued
	default:
		s.reject(ctx, e, out.Reason)
		return rejected
	}
}

func (s *scheduler) claim(ctx actor.Context, e *entry, as []placement.Assignment) {
	s.nextID++
	e.claimID = s.nextID
	e.claiming = as
	e.replies = nil
	for _, a := range as {
		ctx.Send(s.cfg.Clusters[a.Cluster], &msg.Claim{JobId: e.job.Id, Nodes: int32(a.Size), ClaimId: e.claimID, ReplyTo: msg.FromPID(ctx.Self())})
	}
}

func (s *scheduler) claimed(ctx actor.Context, r *msg.ClaimReply) {
	var e *entry
	idx := -1
	for i, q := range s.queue {
		if q.job.Id == r.JobId && q.claimID == r.ClaimId {
			e, idx = q, i
		}
	}
	if e == nil {
		if r.Ok { // a claim nobody waits for: give the nodes back
			ctx.Send(s.cfg.Clusters[r.Cluster], &msg.ReleaseNodes{JobId: r.JobId, Nodes: msg.NodeNames(r.Nodes)})
		}
		return
	}
	e.replies = append(e.replies, r)
	if len(e.replies) < len(e.claiming) {
		return
	}
	ok := true
	var reasons []string
	for _, rep := range e.replies {
		if !rep.Ok {
			ok = false
			reasons = append(reasons, rep.Cluster+": "+rep.Reason)
		}
	}
	if !ok {
		for _, rep := range e.replies {
			if rep.Ok {
				ctx.Send(s.cfg.Clusters[rep.Cluster], &msg.ReleaseNodes{JobId: rep.JobId, Nodes: msg.NodeNames(rep.Nodes)})
			}
		}
		e.tries++
		e.claiming, e.replies = nil, nil
		ev := s.cfg.Env.Event(msg.EventClaimFailed, "scheduler", e.job.Id)
		ev.Fields = map[string]string{"reason": strings.Join(reasons, "; ")}
		s.cfg.Env.Emit(ev)
		s.queue = append(append(s.queue[:idx:idx], s.queue[idx+1:]...), e)
		if e.tries > s.cfg.MaxTries {
			s.queue = s.queue[:len(s.queue)-1]
			s.reject(ctx, e, ReasonTooManyTries+" (claim failed)")
		}
		return
	}
	// Every component claimed: the job is placed, in the order the policy chose.
	placed := &msg.JobPlaced{JobId: e.job.Id, PlacedS: s.cfg.Env.Now(), Tries: int32(e.tries + 1)}
	var clusters []string
	for _, a := range e.claiming {
		for _, rep := range e.replies {
			if rep.Cluster == a.Cluster {
				placed.Allocations = append(placed.Allocations, &msg.Allocation{Cluster: rep.Cluster, Nodes: rep.Nodes})
				clusters = append(clusters, fmt.Sprintf("%s:%d", rep.Cluster, len(rep.Nodes)))
			}
		}
	}
	s.queue = append(s.queue[:idx:idx], s.queue[idx+1:]...)
	ev := s.cfg.Env.Event(msg.EventPlaced, "scheduler", e.job.Id)
	sort.Strings(clusters)
	ev.Fields = map[string]string{"components": strings.Join(clusters, "+")}
	ev.Values = map[string]float64{"tries": float64(e.tries + 1), "clusters": float64(len(e.claiming))}
	s.cfg.Env.Emit(ev)
	ctx.Send(e.runner, placed)
}

func (s *scheduler) reject(ctx actor.Context, e *entry, reason string) {
	ev := s.cfg.Env.Event(msg.EventRejected, "scheduler", e.job.Id)
	ev.Fields = map[string]string{"reason": reason}
	ev.Values = map[string]float64{"tries": float64(e.tries)}
	s.cfg.Env.Emit(ev)
	ctx.Send(e.runner, &msg.JobRejected{JobId: e.job.Id, Reason: reason, Tries: int32(e.tries)})
}

// netView answers the policies' network questions from the information
// service's measurements; a pair never measured is unknown.
type netView map[[2]string]*msg.LinkEstimate

func (n netView) get(a, b string) *msg.LinkEstimate {
	if l := n[[2]string{a, b}]; l != nil {
		return l
	}
	return n[[2]string{b, a}]
}

func (n netView) Latency(a, b string) (time.Duration, bool) {
	l := n.get(a, b)
	if l == nil || !l.Measured {
		return 0, false
	}
	return time.Duration(l.LatencyMs * float64(time.Millisecond)), true
}

func (n netView) Bandwidth(a, b string) (float64, bool) {
	l := n.get(a, b)
	if l == nil || !l.Measured {
		return 0, false
	}
	return l.BandwidthMbps * 1e6, true
}

// shapeKey is what a placement policy reads of a request (all but its job
// ID); requests with files are not keyed.
func shapeKey(r placement.Request) (string, bool) {
	if len(r.Files) > 0 {
		return "", false
	}
	// "type/total/cluster:size/..."
	key := strconv.AppendInt(make([]byte, 0, 16+16*len(r.Components)), int64(r.Type), 10)
	key = append(key, '/')
	key = strconv.AppendInt(key, int64(r.Total), 10)
	for _, c := range r.Components {
		key = append(append(key, '/'), c.Cluster...)
		key = strconv.AppendInt(append(key, ':'), int64(c.Size), 10)
	}
	return string(key), true
}
