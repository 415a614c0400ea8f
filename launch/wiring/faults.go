package wiring

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/scenarios"
)

// FaultApplier is how a backend breaks its grid on purpose: the one place
// each backend's mechanism sits (inproc: the node actors and the userspace
// shapers; netns and docker: the hosts' control actors). Which kinds a
// backend can apply its Capabilities say, and launch.Check refuses the
// others before the run starts: that is the one refusal.
type FaultApplier interface {
	// Kill stops node (of cluster) and the rank it runs, for good, and
	// makes the loss known as the backend detects it: the node's cluster
	// manager marks it down and the runner whose job had a rank there
	// fails the job (msg.NodeDown).
	Kill(node, cluster string) error
	// Cut cuts every link between cluster and the other clusters (cut
	// true), or heals them: writes across the cut stall until it heals.
	Cut(cluster string, cut bool) error
	// SetLink gives the link between clusters a and b (both directions;
	// a == b: the cluster's own network) the undilated link l.
	SetLink(a, b string, l netem.Link) error
	// Load gives each node its loading programs (load and unload faults):
	// the absolute count on the node, every load on it added up (0:
	// none). The node actor gets it as a msg.NodeLoad (on inproc through
	// its cluster manager, on the grid through LoadNode on its host); a
	// node the timeline killed is left alone.
	Load(loads []NodePrograms) error
}

// NodePrograms is the loading programs sharing one node.
type NodePrograms struct {
	Node, Cluster string
	Programs      int
}

// LoadNode tells a node actor that programs loading programs now share its
// node (msg.NodeLoad; the node stretches its ranks' computation by the
// share of its processors they take, and emits node_load): the one way a
// load reaches a node, whichever backend hosts the node actor.
func LoadNode(root *actor.RootContext, node *actor.PID, programs int) {
	root.Send(node, &msg.NodeLoad{Programs: int32(programs), Reason: "faults timeline"})
}

// FaultRun applies a plan's faults timeline.
type FaultRun struct {
	Plan    *scenarios.Plan
	Env     actors.Env
	KIS     *actor.PID // told of partitions and heals
	Applier FaultApplier
}

// Start applies the timeline from now on, each fault at its scenario time
// (the clock's, scaled like arrivals), until the timeline ends or ctx
// does; the returned function waits until no fault is being applied any
// more (call it after ctx ended, before the grid is taken down).
func (f FaultRun) Start(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	if len(f.Plan.Faults) == 0 {
		close(done)
		return func() {}
	}
	go func() {
		defer close(done)
		loads := map[string]int{} // node -> programs on it
		for _, ft := range f.Plan.Faults {
			if err := f.Env.Clock.Sleep(ctx, ft.At-f.Env.Clock.Now()); err != nil {
				return
			}
			f.apply(ft, loads)
		}
	}()
	return func() { <-done }
}

// apply applies one fault and records it (msg.EventFault, with the error
// when it could not be applied). A partition and a heal are told to the
// information service, which marks the cluster unreachable (the scheduler
// places nothing there) or reachable again.
func (f FaultRun) apply(ft scenarios.Fault, loads map[string]int) {
	ev := f.Env.Event(msg.EventFault, "faults", "")
	ev.Fields = map[string]string{"kind": ft.Kind, "target": ft.Target, "entry": fmt.Sprintf("faults[%d]", ft.Entry)}
	var err error
	switch ft.Kind {
	case scenarios.FaultKill:
		c, ok := f.Plan.NodeCluster(ft.Target)
		if !ok {
			err = fmt.Errorf("no node %s in the plan", ft.Target)
			break
		}
		ev.Fields["cluster"] = c
		err = f.Applier.Kill(ft.Target, c)
	case scenarios.FaultPartition, scenarios.FaultHeal:
		cut := ft.Kind == scenarios.FaultPartition
		err = f.Applier.Cut(ft.Target, cut)
		if f.KIS != nil && f.Env.System != nil {
			f.Env.System.Root.Send(f.KIS, &msg.ClusterReachability{Cluster: ft.Target, Reachable: !cut,
				Reason: ft.Kind + " by faults[" + fmt.Sprint(ft.Entry) + "]"})
		}
	case scenarios.FaultDegrade, scenarios.FaultRestore:
		ev.Fields["peer"] = ft.Peer
		ev.Values = map[string]float64{"latency_factor": ft.LatencyFactor, "bandwidth_factor": ft.BandwidthFactor}
		var l netem.Link
		if l, err = f.Plan.Links.Link(ft.Target, ft.Peer); err == nil {
			err = f.Applier.SetLink(ft.Target, ft.Peer, Degraded(l, ft.LatencyFactor, ft.BandwidthFactor))
		}
	case scenarios.FaultLoad, scenarios.FaultUnload:
		ev.Values = map[string]float64{"programs": float64(ft.Programs)}
		err = f.load(ft, loads)
	default:
		err = fmt.Errorf("unknown fault kind %q", ft.Kind)
	}
	if err != nil {
		ev.Fields["error"] = err.Error()
	}
	f.Env.Emit(ev)
}

// load adds a load's programs to every target node (a node, or every node
// of a cluster) and an unload's take them off, then tells the applier the
// target nodes' new totals.
func (f FaultRun) load(ft scenarios.Fault, loads map[string]int) error {
	delta := ft.Programs
	if ft.Kind == scenarios.FaultUnload {
		delta = -delta
	}
	var ts []NodePrograms
	if c, ok := f.Plan.NodeCluster(ft.Target); ok {
		ts = append(ts, NodePrograms{Node: ft.Target, Cluster: c})
	} else if c, ok := f.Plan.Cluster(ft.Target); ok {
		for i := 0; i < c.Nodes; i++ {
			ts = append(ts, NodePrograms{Node: scenarios.NodeName(c.Name, i), Cluster: c.Name})
		}
	} else {
		return fmt.Errorf("no node or cluster %s in the plan", ft.Target)
	}
	for i, t := range ts {
		loads[t.Node] = max(0, loads[t.Node]+delta)
		ts[i].Programs = loads[t.Node]
	}
	return f.Applier.Load(ts)
}

// Degraded is link l with its latency (and jitter) multiplied by lat and
// its bandwidth by bw (an unlimited bandwidth stays unlimited).
func Degraded(l netem.Link, lat, bw float64) netem.Link {
	l.Latency = time.Duration(float64(l.Latency) * lat)
	l.Jitter = time.Duration(float64(l.Jitter) * lat)
	if l.Bandwidth > 0 {
		l.Bandwidth *= bw
	}
	return l
}
