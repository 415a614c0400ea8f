package msg

import "github.com/asynkron/protoactor-go/actor"

// FromPID converts a protoactor PID to the wire form.
func FromPID(p *actor.PID) *Pid {
	if p == nil {
		return nil
	}
	return &Pid{Address: p.Address, Id: p.Id}
}

// PID converts the wire form back to a protoactor PID.
func (p *Pid) PID() *actor.PID {
	if p == nil {
		return nil
	}
	return actor.NewPID(p.Address, p.Id)
}

// NodeNames returns the names of the nodes, in order (a ReleaseNodes list).
func NodeNames(ns []*NodeRef) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}
