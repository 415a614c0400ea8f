package apps

import (
	"context"
	"fmt"

	"github.com/koala-emu/koala-emu/nodes/comm"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// moveTag is the tag base of a checkpoint move's messages (plus the old
// rank).
const moveTag = 1 << 24

// MoveCheckpoint redistributes a checkpoint between two process sets over
// one communicator that joins them: the old processes are ranks [0,
// plan.From.Procs()), the new ones the next plan.To.Procs() ranks. Every
// old rank cuts its block (local) into the plan's messages (srs.Plan.Pack)
// and sends each to its new rank at once, through its node's egress, so
// the bytes cross the shaped links between the old and the new nodes (SPEC
// §6: reading the checkpoint across the wide area and redistributing it);
// every new rank receives its messages and assembles its block
// (srs.Plan.Unpack), which it returns. An old rank returns nil.
func MoveCheckpoint(ctx context.Context, c *comm.Comm, plan srs.Plan, local []byte) ([]byte, error) {
	oldN, newN := plan.From.Procs(), plan.To.Procs()
	if c.Size() != oldN+newN {
		return nil, fmt.Errorf("apps: move checkpoint: communicator of %d ranks for %d old and %d new processes", c.Size(), oldN, newN)
	}
	r := c.Rank()
	if r < oldN {
		msgs, err := plan.Pack(r, local)
		if err != nil {
			return nil, fmt.Errorf("apps: move checkpoint: %w", err)
		}
		waits := make([]func() error, 0, len(msgs))
		for to, b := range msgs {
			waits = append(waits, c.Isend(ctx, oldN+to, moveTag+r, b))
		}
		var first error
		for _, w := range waits {
			if err := w(); err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return nil, fmt.Errorf("apps: move checkpoint: old rank %d: %w", r, first)
		}
		return nil, nil
	}
	to := r - oldN
	msgs := map[int][]byte{}
	for _, t := range plan.Transfers {
		if t.To != to {
			continue
		}
		b, err := c.Recv(ctx, t.From, moveTag+t.From)
		if err != nil {
			return nil, fmt.Errorf("apps: move checkpoint: new rank %d from old rank %d: %w", to, t.From, err)
		}
		msgs[t.From] = b
	}
	out, err := plan.Unpack(to, msgs)
	if err != nil {
		return nil, fmt.Errorf("apps: move checkpoint: %w", err)
	}
	return out, nil
}
