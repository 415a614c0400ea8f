package wiring

import "github.com/koala-emu/koala-emu/launch/membership"

// Reasons a node is reported down (msg.NodeDown.Reason) when the
// membership loses it.
const (
	ReasonNodeLeft   = "left the grid"
	ReasonNodeFailed = "failed: no longer answers membership probes nor connections"
)

// NodeLoss is a node of a cluster that a membership event says is lost.
type NodeLoss struct {
	Node   membership.Member
	Reason string
	// Suspected is true for a failure (the member stopped answering, or a
	// partition cut it off): a watcher that can check the node's liveness
	// otherwise (the grid's hosts dial its address) confirms it before
	// reporting, since a member of a loaded machine can miss its probes
	// while it is alive. A departure (Leave) is certain.
	Suspected bool
}

// NodeLossOf is the one rule by which a cluster's manager learns from the
// membership that one of its nodes is lost, on every backend that runs one
// (the grid backends' memberlist, the inproc backend's in-memory hub): a
// Fail or Leave of a node member of cluster. Every other event (joins,
// updates, other roles, other clusters) is no loss.
func NodeLossOf(ev membership.Event, cluster string) (NodeLoss, bool) {
	if ev.Member.Role != membership.RoleNode || ev.Member.Cluster != cluster {
		return NodeLoss{}, false
	}
	switch ev.Kind {
	case membership.Leave:
		return NodeLoss{Node: ev.Member, Reason: ReasonNodeLeft}, true
	case membership.Fail:
		return NodeLoss{Node: ev.Member, Reason: ReasonNodeFailed, Suspected: true}, true
	}
	return NodeLoss{}, false
}
