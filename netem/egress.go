package netem

import "net"

// Egress shapes what one emulated node sends, per destination cluster. The
// userspace shaper wraps connections; kernel mechanisms shape the node's
// interface instead and return connections unchanged.
type Egress interface {
	// Wrap returns a connection whose writes to a node of dstCluster follow
	// the node's plan for that cluster.
	Wrap(c net.Conn, dstCluster string) net.Conn
}

// Passthrough is an Egress that shapes nothing (unshaped baseline, and
// backends whose links are shaped in the kernel).
type Passthrough struct{}

// Wrap implements Egress.
func (Passthrough) Wrap(c net.Conn, _ string) net.Conn { return c }
