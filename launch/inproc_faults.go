package launch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
)

// inprocFaults is the inproc backend's wiring.FaultApplier and its
// membership. Every node and every cluster manager is a member of an
// in-memory hub (membership.Hub): a kill stops the node actor and fails its
// member, and each cluster's watcher learns the loss from the hub's events
// by the rule the grid backends' cluster hosts follow on memberlist's
// (wiring.NodeLossOf), then tells the cluster manager and the runners. A
// partition or a degrade changes the userspace shapers of every host (nodes
// and probe endpoints) on either side; a load tells the node actors.
type inprocFaults struct {
	r   *inprocRun
	hub *membership.Hub

	mu       sync.Mutex
	hosts    map[string][]*netem.UserspaceEgress // by cluster
	runners  []*actor.PID
	killed   map[string]bool // node actor names
	members  []*membership.InmemProvider
	watchers []*membership.InmemProvider
	watching sync.WaitGroup
	pending  map[string]*killWait // by node name
}

// killWait is a kill waiting for its node's watcher: sent closes once the
// cluster manager and the runners have been told, marked then says whether
// the manager marked the node down.
type killWait struct {
	sent   chan struct{}
	marked chan error
}

func newInprocFaults(r *inprocRun) *inprocFaults {
	return &inprocFaults{r: r, hub: membership.NewHub(), hosts: map[string][]*netem.UserspaceEgress{},
		killed: map[string]bool{}, pending: map[string]*killWait{}}
}

// join makes node (of cluster) a member of the hub.
func (f *inprocFaults) join(node, cluster string) error {
	p := f.hub.NewMember(membership.Member{Name: node, Role: membership.RoleNode, Cluster: cluster})
	if err := p.Join(context.Background(), nil); err != nil {
		return err
	}
	f.mu.Lock()
	f.members = append(f.members, p)
	f.mu.Unlock()
	return nil
}

// watch makes cluster's manager a member of the hub and follows the
// membership for it until the hub closes its provider (closeMembership).
func (f *inprocFaults) watch(cluster string) error {
	p := f.hub.NewProvider(membership.Member{Name: wiring.ClusterActor(cluster), Role: membership.RoleCluster, Cluster: cluster})
	if err := p.Join(context.Background(), nil); err != nil {
		return err
	}
	f.mu.Lock()
	f.watchers = append(f.watchers, p)
	f.mu.Unlock()
	f.watching.Go(func() {
		for ev := range p.Events() {
			if loss, ok := wiring.NodeLossOf(ev, cluster); ok {
				f.lost(loss)
			}
		}
	})
	return nil
}

// lost tells the node's cluster manager and every runner that the node is
// down, then reports to a kill waiting for it. A failure needs no other
// confirmation here: in one process the hub fails a member only when the
// faults timeline killed it.
func (f *inprocFaults) lost(loss wiring.NodeLoss) {
	r := f.r
	nd := &msg.NodeDown{Node: loss.Node.Name, Cluster: loss.Node.Cluster, Reason: loss.Reason}
	marked := r.system.Root.RequestFuture(r.system.NewLocalPID(wiring.ClusterActor(loss.Node.Cluster)), nd, markDownTimeout)
	f.mu.Lock()
	runners := append([]*actor.PID(nil), f.runners...)
	w := f.pending[loss.Node.Name]
	delete(f.pending, loss.Node.Name)
	f.mu.Unlock()
	for _, p := range runners {
		r.system.Root.Send(p, nd)
	}
	if w == nil {
		return
	}
	close(w.sent)
	_, err := marked.Result()
	w.marked <- err
}

// closeMembership closes the watchers first (so the members closed next
// are no loss), waits for them, then closes the members.
func (f *inprocFaults) closeMembership() error {
	f.mu.Lock()
	watchers, members := f.watchers, f.members
	f.watchers, f.members = nil, nil
	f.mu.Unlock()
	for _, p := range watchers {
		_ = p.Close()
	}
	f.watching.Wait()
	for _, p := range members {
		_ = p.Close()
	}
	return nil
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

// Kill fails the node's member of the hub and waits until its cluster's
// watcher has told the cluster manager and every runner (the runner whose
// job had a rank there fails it with cause node_down, before its other
// ranks' broken connections are heard), then stops the node actor, which
// ends its rank. It returns once the cluster manager has marked the node
// down too: the kill is detected when it is applied, so its node_down event
// is sent to the recorder before the fault's own, whenever the run ends.
func (f *inprocFaults) Kill(node, cluster string) error {
	r := f.r
	name := wiring.NodeActor(node)
	w := &killWait{sent: make(chan struct{}), marked: make(chan error, 1)}
	f.mu.Lock()
	if f.killed[name] {
		f.mu.Unlock()
		return fmt.Errorf("node %s is already down", node)
	}
	f.killed[name] = true
	f.pending[node] = w
	f.mu.Unlock()
	if err := f.hub.Fail(node); err != nil {
		f.mu.Lock()
		delete(f.pending, node)
		f.mu.Unlock()
		return fmt.Errorf("kill node %s of %s: %w", node, cluster, err)
	}
	timeout := time.NewTimer(markDownTimeout)
	defer timeout.Stop()
	select {
	case <-w.sent:
	case <-timeout.C:
		return fmt.Errorf("node %s: its cluster's membership watcher did not report it lost within %v", node, markDownTimeout)
	}
	if err := r.system.Root.StopFuture(r.system.NewLocalPID(name)).Wait(); err != nil {
		return fmt.Errorf("stop node %s: %w", node, err)
	}
	select {
	case err := <-w.marked:
		if err != nil {
			return fmt.Errorf("node %s: its cluster manager did not mark it down: %w", node, err)
		}
	case <-timeout.C:
		return fmt.Errorf("node %s: its cluster manager did not mark it down within %v", node, markDownTimeout)
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
