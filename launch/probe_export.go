package launch

import (
	"context"
	"io"

	"github.com/koala-emu/koala-emu/actors/cluster"
	"github.com/koala-emu/koala-emu/netem"
)

// ProbeEndpoint is a cluster's probe endpoint (see NewProbeEndpoint): a
// cluster.Prober that also closes.
type ProbeEndpoint interface {
	cluster.Prober
	io.Closer
}

// NewProbeEndpoint starts the probe endpoint of a host of cluster, listening
// on host (any free port): a ping-pong server whose replies leave through
// egress towards the asking cluster, and a client (Measure) that measures
// links from this cluster through the same egress. A probe connection opens
// with one line naming the asking cluster, then speaks the netem ping-pong
// protocol. The docker backend runs one in every node and cluster-manager
// container.
func NewProbeEndpoint(ctx context.Context, clusterName string, egress netem.Egress, host string) (ProbeEndpoint, error) {
	return newProber(ctx, clusterName, egress, host)
}
