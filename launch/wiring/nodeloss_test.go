package wiring

import (
	"testing"

	"github.com/koala-emu/koala-emu/launch/membership"
)

// NodeLossOf reports a node of the cluster that fails (suspected) or leaves
// (certain), and nothing else.
func TestNodeLossOf(t *testing.T) {
	node := membership.Member{Name: "vrije-n001", Role: membership.RoleNode, Cluster: "vrije"}
	other := membership.Member{Name: "leiden-n001", Role: membership.RoleNode, Cluster: "leiden"}
	mgr := membership.Member{Name: "cluster-vrije", Role: membership.RoleCluster, Cluster: "vrije"}
	for _, c := range []struct {
		ev        membership.Event
		loss      bool
		reason    string
		suspected bool
	}{
		{membership.Event{Kind: membership.Fail, Member: node}, true, ReasonNodeFailed, true},
		{membership.Event{Kind: membership.Leave, Member: node}, true, ReasonNodeLeft, false},
		{membership.Event{Kind: membership.Join, Member: node}, false, "", false},
		{membership.Event{Kind: membership.Update, Member: node}, false, "", false},
		{membership.Event{Kind: membership.Fail, Member: other}, false, "", false},
		{membership.Event{Kind: membership.Fail, Member: mgr}, false, "", false},
	} {
		l, ok := NodeLossOf(c.ev, "vrije")
		if ok != c.loss || l.Reason != c.reason || l.Suspected != c.suspected || (ok && l.Node.Name != c.ev.Member.Name) {
			t.Errorf("%v %s: loss %v %+v, want %v %q suspected %v", c.ev.Kind, c.ev.Member.Name, ok, l, c.loss, c.reason, c.suspected)
		}
	}
}
