package cluster

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
)

// Prober measures links from this cluster to others and answers their
// measurements. The launcher provides one per cluster.
type Prober interface {
	// Addr is where other clusters' probes connect.
	Addr() string
	// Measure returns the one-way latency and the payload bandwidth (bytes/s)
	// to the cluster dst whose probe endpoint listens at addr.
	Measure(ctx context.Context, dst, addr string, bandwidthBytes int) (time.Duration, float64, error)
}

// Config builds a cluster manager.
type Config struct {
	Name       string
	Nodes      []NodeInfo
	KIS        *actor.PID // receives *msg.ClusterStatus
	Background *Background
	Prober     Prober
	// ProbeTimeout bounds each link's probe (0: 2 minutes); dilated links
	// make probes slow (wiring.Spec.ProbeTimeouts).
	ProbeTimeout time.Duration
	// Processors is each node's processor count, reported with the
	// nodes' load.
	Processors int
	Env        actors.Env
}

// NodeInfo names a node actor of this cluster.
type NodeInfo struct {
	Name string
	PID  *actor.PID
}

type manager struct {
	cfg   Config
	nodes *Nodes
	pids  map[string]*actor.PID
	// durations of queued local jobs, by id
	durations map[string]time.Duration
	// programs are the loading programs on each loaded node (NodeLoad).
	programs map[string]int32
	self     *actor.PID
	cancel   []func()
	ctx      context.Context
	stop     context.CancelFunc
}

type bgTick struct{}

type localEnd struct{ id string }

// Props returns the props of a cluster manager.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		names := make([]string, len(cfg.Nodes))
		pids := make(map[string]*actor.PID, len(cfg.Nodes))
		for i, n := range cfg.Nodes {
			names[i] = n.Name
			pids[n.Name] = n.PID
		}
		return &manager{cfg: cfg, nodes: NewNodes(names), pids: pids, durations: map[string]time.Duration{}, programs: map[string]int32{}}
	})
}

func (m *manager) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Started:
		m.self = ctx.Self()
		m.ctx, m.stop = context.WithCancel(context.Background())
		if m.cfg.Background.Enabled() {
			period := m.cfg.Background.MeanJob / 8
			if period < time.Second {
				period = time.Second
			}
			m.tickBackground()
			m.cancel = append(m.cancel, m.cfg.Env.Every(period, m.self, func() interface{} { return &bgTick{} }))
		}
		m.publish(ctx)
	case *actor.Stopping:
		for _, c := range m.cancel {
			c()
		}
		if m.stop != nil {
			m.stop()
		}
	case *msg.Claim:
		m.claim(ctx, x)
	case *msg.ReleaseNodes:
		if n := m.nodes.Release(x.JobId, x.Nodes); n > 0 {
			m.startLocal()
			m.publish(ctx)
		}
	case *bgTick:
		m.tickBackground()
		m.publish(ctx)
	case *localEnd:
		m.nodes.EndLocal(x.id)
		m.startLocal()
		m.publish(ctx)
	case *msg.ProbeRequest:
		m.probe(x)
	case *msg.NodeLoad:
		m.load(ctx, x)
	case *msg.NodeDown:
		job, ok := m.nodes.MarkDown(x.Node)
		if ok {
			ev := m.cfg.Env.Event(msg.EventNodeDown, m.cfg.Name, job)
			ev.Fields = map[string]string{"node": x.Node, "reason": x.Reason}
			m.cfg.Env.Emit(ev)
			m.publish(ctx)
		}
		// A report sent as a request (the inproc faults timeline's kill)
		// is answered with itself once the node is marked down and its
		// event emitted.
		if ctx.Sender() != nil {
			ctx.Respond(x)
		}
	}
}

func (m *manager) claim(ctx actor.Context, c *msg.Claim) {
	reply := &msg.ClaimReply{JobId: c.JobId, Cluster: m.cfg.Name, ClaimId: c.ClaimId}
	names, err := m.nodes.Claim(c.JobId, int(c.Nodes))
	if err != nil {
		reply.Reason = err.Error()
	} else {
		reply.Ok = true
		// One allocation for the refs and one for their PIDs, not two per
		// node: every job's every node passes here.
		refs, pids := make([]msg.NodeRef, len(names)), make([]msg.Pid, len(names))
		reply.Nodes = make([]*msg.NodeRef, len(names))
		for i, n := range names {
			refs[i].Name = n
			if p := m.pids[n]; p != nil {
				pids[i].Address, pids[i].Id = p.Address, p.Id
				refs[i].Pid = &pids[i]
			}
			reply.Nodes[i] = &refs[i]
		}
		m.publish(ctx)
	}
	ctx.Send(c.ReplyTo.PID(), reply)
}

func (m *manager) tickBackground() {
	_, local := m.nodes.Held()
	for _, j := range m.cfg.Background.Tick(m.nodes.Capacity(), local+m.nodes.QueuedLocal()) {
		m.nodes.SubmitLocal(j.LocalJob)
		m.durations[j.ID] = j.Duration
	}
	m.startLocal()
}

func (m *manager) startLocal() {
	for _, j := range m.nodes.StartLocal() {
		d := m.durations[j.ID]
		delete(m.durations, j.ID)
		m.cancel = append(m.cancel, m.cfg.Env.After(d, m.self, &localEnd{id: j.ID}))
	}
}

func (m *manager) publish(ctx actor.Context) {
	if m.cfg.KIS == nil {
		return
	}
	koala, local := m.nodes.Held()
	probe := ""
	if m.cfg.Prober != nil {
		probe = m.cfg.Prober.Addr()
	}
	ctx.Send(m.cfg.KIS, &msg.ClusterStatus{
		ProbeAddr:    probe,
		Cluster:      m.cfg.Name,
		Idle:         int32(m.nodes.Idle()),
		Capacity:     int32(m.nodes.Capacity()),
		LocalBusy:    int32(local),
		KoalaBusy:    int32(koala),
		LocalQueued:  int32(m.nodes.QueuedLocal()),
		AtS:          m.cfg.Env.Now(),
		Processors:   int32(m.cfg.Processors),
		NodePrograms: maps.Clone(m.programs),
	})
}

// load records a node's loading programs, hands them to the node actor
// (its ranks compute under them) and reports them in the cluster's
// status. A node the cluster does not have is ignored.
func (m *manager) load(ctx actor.Context, x *msg.NodeLoad) {
	pid, ok := m.pids[x.Node]
	if !ok {
		return
	}
	if x.Programs > 0 {
		m.programs[x.Node] = x.Programs
	} else {
		delete(m.programs, x.Node)
	}
	ctx.Send(pid, x)
	m.publish(ctx)
}

// probe measures every target off the handler (Env.Go: a goroutine, inline
// under the simulation clock) and replies when done, so the
// manager keeps answering claims meanwhile. The targets are measured at
// once, each over its own link, so a round takes as long as its slowest
// link rather than the sum of them (at dilation 1000 a round of four
// clusters one after the other took about a minute).
func (m *manager) probe(req *msg.ProbeRequest) {
	if m.cfg.Prober == nil {
		m.cfg.Env.System.Root.Send(req.ReplyTo.PID(), &msg.ProbeResult{Error: m.cfg.Name + ": no prober configured"})
		return
	}
	ctx, env, name := m.ctx, m.cfg.Env, m.cfg.Name
	timeout := m.cfg.ProbeTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	env.Go(func() {
		links := make([]*msg.LinkEstimate, len(req.Targets))
		errs := make([]string, len(req.Targets))
		var wg sync.WaitGroup
		for i, t := range req.Targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, timeout)
				lat, bw, err := m.cfg.Prober.Measure(pctx, t.Cluster, t.Addr, int(req.BandwidthBytes))
				cancel()
				if err != nil {
					errs[i] = name + "->" + t.Cluster + ": " + err.Error()
					return
				}
				links[i] = &msg.LinkEstimate{
					Src: name, Dst: t.Cluster, Measured: true, AtS: env.Now(),
					LatencyMs: float64(lat) / float64(time.Millisecond), BandwidthMbps: bw / 1e6,
				}
			}()
		}
		wg.Wait()
		res := &msg.ProbeResult{}
		for i := range links {
			if links[i] != nil {
				res.Links = append(res.Links, links[i])
			}
			if errs[i] != "" {
				res.Error = errs[i] // the last, as before
			}
		}
		env.System.Root.Send(req.ReplyTo.PID(), res)
	})
}
