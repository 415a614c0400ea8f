package launch

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
)

// ReasonKilled is the NodeDown reason of a node the faults timeline killed.
const ReasonKilled = "killed by the faults timeline"

// inprocFaults is the inproc backend's wiring.FaultApplier: a kill stops
// the node actor (its rank with it) and reports the loss at once, as the
// membership does on the grid backends (there is no membership in one
// process: the loss is known when it happens); a partition or a degrade
// changes the userspace shapers of every host (nodes and probe endpoints)
// on either side; a load tells the node actors.
type inprocFaults struct {
	r *inprocRun

	mu      sync.Mutex
	hosts   map[string][]*netem.UserspaceEgress // by cluster
	runners []*actor.PID
	killed  map[string]bool // node actor names
}

func newInprocFaults(r *inprocRun) *inprocFaults {
	return &inprocFaults{r: r, hosts: map[string][]*netem.UserspaceEgress{}, killed: map[string]bool{}}
}

// addHost registers the egress of a host of cluster c.
func (f *inprocFaults) addHost(c string, eg *netem.UserspaceEgress) {
	f.mu.Lock()
	f.hosts[c] = append(f.hosts[c], eg)
	f.mu.Unlock()
}

// addRunner registers a job's runner, to be told of nodes lost.
func (f *inprocFaults) addRunner(pid *actor.PID) {
	f.mu.Lock()
	f.runners = append(f.runners, pid)
	f.mu.Unlock()
}

// isKilled reports whether the actor of that name is a killed node.
func (f *inprocFaults) isKilled(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed[name]
}

// markDownTimeout bounds, in wall time, how long a kill waits for the
// node's cluster manager to mark the node down.
const markDownTimeout = 30 * time.Second

// Kill tells the node's cluster manager and every runner that the node is
// down (the runner whose job had a rank there fails it with cause
// node_down, before its other ranks' broken connections are heard), then
// stops the node actor, which ends its rank. It returns once the cluster
// manager has marked the node down too: the kill is detected when it is
// applied, so its node_down event is sent to the recorder before the
// fault's own, whenever the run ends.
func (f *inprocFaults) Kill(node, cluster string) error {
	r := f.r
	name := wiring.NodeActor(node)
	f.mu.Lock()
	if f.killed[name] {
		f.mu.Unlock()
		return fmt.Errorf("node %s is already down", node)
	}
	f.killed[name] = true
	runners := append([]*actor.PID(nil), f.runners...)
	f.mu.Unlock()
	nd := &msg.NodeDown{Node: node, Cluster: cluster, Reason: ReasonKilled}
	marked := r.system.Root.RequestFuture(r.system.NewLocalPID(wiring.ClusterActor(cluster)), nd, markDownTimeout)
	for _, p := range runners {
		r.system.Root.Send(p, nd)
	}
	if err := r.system.Root.StopFuture(r.system.NewLocalPID(name)).Wait(); err != nil {
		return fmt.Errorf("stop node %s: %w", node, err)
	}
	if _, err := marked.Result(); err != nil {
		return fmt.Errorf("node %s: its cluster manager did not mark it down: %w", node, err)
	}
	return nil
}

// Cut cuts (or heals) every link between cluster and the other clusters,
// in both directions; unavailable pairs carry nothing and are left alone.
func (f *inprocFaults) Cut(cluster string, cut bool) error {
	links := f.r.plan.Links
	var errs []error
	f.mu.Lock()
	defer f.mu.Unlock()
	for c, hosts := range f.hosts {
		for _, dst := range links.Clusters {
			if (c == cluster) == (dst == cluster) {
				continue // both on one side of the cut
			}
			if l, err := links.Link(c, dst); err != nil || l.Unavailable {
				continue
			}
			for _, eg := range hosts {
				errs = append(errs, eg.Cut(dst, cut))
			}
		}
	}
	return errors.Join(errs...)
}

// SetLink gives every host of a its link to b, and every host of b its
// link to a.
func (f *inprocFaults) SetLink(a, b string, l netem.Link) error {
	var errs []error
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, eg := range f.hosts[a] {
		errs = append(errs, eg.SetLink(b, l))
	}
	if a != b {
		for _, eg := range f.hosts[b] {
			errs = append(errs, eg.SetLink(a, l))
		}
	}
	return errors.Join(errs...)
}

// Load tells each node's cluster manager how many loading programs now
// share the node: the manager reports it to the information service (the
// rescheduler reads it) and hands it to the node actor, whose ranks'
// computation stretches accordingly (nothing spins). A killed node is left
// alone.
func (f *inprocFaults) Load(loads []wiring.NodePrograms) error {
	for _, l := range loads {
		if f.isKilled(wiring.NodeActor(l.Node)) {
			continue
		}
		f.r.system.Root.Send(f.r.system.NewLocalPID(wiring.ClusterActor(l.Cluster)),
			&msg.NodeLoad{Node: l.Node, Programs: int32(l.Programs), Reason: "faults timeline"})
	}
	return nil
}

var _ wiring.FaultApplier = (*inprocFaults)(nil)
