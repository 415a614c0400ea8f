package kis

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
)

// Config builds the information service. It starts probing once every
// cluster in Order has reported its status.
type Config struct {
	Order       []string              // clusters, in scenario order
	Clusters    map[string]*actor.PID // cluster managers
	Unavailable map[[2]string]bool    // pairs never to probe (both orders)
	Scheduler   *actor.PID
	// Rescheduler, when set, gets every cluster status as the scheduler
	// does: the idle nodes and each node's load, which its migration
	// decisions predict with.
	Rescheduler *actor.PID
	ProbePeriod time.Duration // scenario time between probe rounds; 0 = once
	// BandwidthBytes is the message size of bandwidth probes.
	BandwidthBytes int
	// Ready is closed once the first probe round has completed.
	Ready chan<- struct{}
	Env   actors.Env
}

type kis struct {
	cfg       Config
	clusters  map[string]*msg.ClusterStatus
	links     map[[2]string]*msg.LinkEstimate
	pending   int
	probing   bool
	readyOnce sync.Once
	cancel    func()
	errors    int
	// unreachable are the clusters cut off from the rest (partitioned),
	// with the reason.
	unreachable map[string]string
}

type probeRound struct{}

// Props returns the information service's props.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &kis{cfg: cfg, clusters: map[string]*msg.ClusterStatus{}, links: map[[2]string]*msg.LinkEstimate{},
			unreachable: map[string]string{}}
	})
}

func (k *kis) Receive(ctx actor.Context) {
	switch x := ctx.Message().(type) {
	case *actor.Stopping:
		if k.cancel != nil {
			k.cancel()
		}
	case *probeRound:
		if k.pending == 0 {
			k.round(ctx)
		}
	case *msg.ClusterReachability:
		k.reachability(ctx, x)
	case *msg.ClusterStatus:
		_, cut := k.unreachable[x.Cluster]
		x.Unreachable = cut
		k.clusters[x.Cluster] = x
		k.status(ctx, x)
		// Probing starts once every cluster has reported, so every probe
		// endpoint is up.
		if !k.probing && len(k.clusters) == len(k.cfg.Order) {
			k.probing = true
			k.round(ctx)
			if k.cfg.ProbePeriod > 0 {
				k.cancel = k.cfg.Env.Every(k.cfg.ProbePeriod, ctx.Self(), func() interface{} { return &probeRound{} })
			}
		}
	case *msg.ProbeResult:
		k.pending--
		if x.Error != "" {
			k.errors++
			ev := k.cfg.Env.Event(msg.EventProbeError, "kis", "")
			ev.Fields = map[string]string{"error": x.Error}
			k.cfg.Env.Emit(ev)
		}
		for _, l := range x.Links {
			k.links[[2]string{l.Src, l.Dst}] = l
			ev := k.cfg.Env.Event(msg.EventProbe, "kis", "")
			ev.Fields = map[string]string{"src": l.Src, "dst": l.Dst}
			ev.Values = map[string]float64{"latency_ms": l.LatencyMs, "bandwidth_mbps": l.BandwidthMbps}
			k.cfg.Env.Emit(ev)
		}
		if k.cfg.Scheduler != nil && len(x.Links) > 0 {
			ctx.Send(k.cfg.Scheduler, &msg.GridStatus{Links: x.Links})
		}
		if k.pending == 0 && k.cfg.Ready != nil {
			k.readyOnce.Do(func() { close(k.cfg.Ready) })
		}
	}
}

// reachability marks a cluster unreachable (a partition) or reachable
// again (a heal): the scheduler sees its status with the mark at once, and
// probe rounds leave its links to other clusters alone while it is cut.
func (k *kis) reachability(ctx actor.Context, x *msg.ClusterReachability) {
	_, cut := k.unreachable[x.Cluster]
	if cut == !x.Reachable {
		return
	}
	kind := msg.EventReachable
	if x.Reachable {
		delete(k.unreachable, x.Cluster)
	} else {
		k.unreachable[x.Cluster] = x.Reason
		kind = msg.EventUnreachable
	}
	ev := k.cfg.Env.Event(kind, "kis", "")
	ev.Fields = map[string]string{"cluster": x.Cluster, "reason": x.Reason}
	k.cfg.Env.Emit(ev)
	st := k.clusters[x.Cluster]
	if st == nil {
		return
	}
	st = proto.Clone(st).(*msg.ClusterStatus)
	st.Unreachable = !x.Reachable
	k.clusters[x.Cluster] = st
	k.status(ctx, st)
}

// status hands a cluster's status to the scheduler and the rescheduler.
func (k *kis) status(ctx actor.Context, st *msg.ClusterStatus) {
	for _, to := range []*actor.PID{k.cfg.Scheduler, k.cfg.Rescheduler} {
		if to != nil {
			ctx.Send(to, &msg.GridStatus{Clusters: []*msg.ClusterStatus{st}})
		}
	}
}

// cutOff reports whether the link between two different clusters crosses a
// partition.
func (k *kis) cutOff(a, b string) bool {
	if a == b {
		return false
	}
	_, ca := k.unreachable[a]
	_, cb := k.unreachable[b]
	return ca || cb
}

// round asks every cluster to probe the clusters after it in scenario order
// and itself (intra-cluster), skipping unavailable pairs.
func (k *kis) round(ctx actor.Context) {
	for i, src := range k.cfg.Order {
		req := &msg.ProbeRequest{ReplyTo: msg.FromPID(ctx.Self()), BandwidthBytes: int32(k.cfg.BandwidthBytes)}
		for _, dst := range k.cfg.Order[i:] {
			if k.cfg.Unavailable[[2]string{src, dst}] || k.cfg.Unavailable[[2]string{dst, src}] || k.cutOff(src, dst) {
				continue
			}
			req.Targets = append(req.Targets, &msg.ProbeTarget{Cluster: dst, Addr: k.clusters[dst].GetProbeAddr()})
		}
		if len(req.Targets) == 0 {
			continue
		}
		k.pending++
		ctx.Send(k.cfg.Clusters[src], req)
	}
	if k.pending == 0 && k.cfg.Ready != nil {
		k.readyOnce.Do(func() { close(k.cfg.Ready) })
	}
}
