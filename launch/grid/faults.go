package grid

import (
	"context"
	"errors"
	"fmt"

	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
)

// FaultKinds are the kinds of the faults timeline the grid backends apply:
// kill only. A killed node's host is killed as a crash would (SIGKILL of
// its process or container) and the loss is detected as any host's is,
// through the membership. Partitions and degrades need the hosts' kernel
// shaping changed mid-run, which the grid does not do yet; launch.Check
// refuses them.
var FaultKinds = []string{"kill"}

// gridFaults is the grid backends' wiring.FaultApplier.
type gridFaults struct {
	ctx  context.Context
	plat Platform
}

// Kill kills the node's host.
func (g gridFaults) Kill(node, _ string) error {
	switch k := g.plat.(type) {
	case interface {
		Kill(context.Context, string) error
	}:
		return k.Kill(g.ctx, node)
	case interface{ Kill(string) error }:
		return k.Kill(node)
	case interface{ kill(string) error }:
		return k.kill(node)
	}
	return fmt.Errorf("the %s platform cannot kill a host", backendOf(g.plat))
}

var errNotOnGrid = errors.New("the grid backends apply kill faults only")

// Cut is refused (launch.Check refuses partitions before a run).
func (gridFaults) Cut(string, bool) error { return errNotOnGrid }

// SetLink is refused (launch.Check refuses degrades before a run).
func (gridFaults) SetLink(string, string, netem.Link) error { return errNotOnGrid }

var _ wiring.FaultApplier = gridFaults{}
