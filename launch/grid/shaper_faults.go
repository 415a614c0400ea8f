package grid

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
)

// This file holds a host's side of the faults timeline's partitions and
// degrades: its shaping changed mid-run (GridSetLink) and its application
// traffic cut off from other clusters (GridCut).

// linkSetter is an installation that changes one destination's link in
// place: the kernel mechanisms (dilated links; kernel.ErrReshape when
// they cannot) and the userspace shaper (undilated links).
type linkSetter interface {
	SetLink(dst string, l netem.Link) error
}

// setLink handles a GridSetLink: the link towards one cluster becomes
// req.Link, given as the installed plan was (undilated for the grid's
// plan, as it is for links the installation request gave). A kernel
// mechanism gets it dilated as the installed plan was and shapes it with
// the model the host installed with (floor, delay line overhead, MTU); it
// changes the HTB class and the delay line's delay in place, and only a
// change the installation cannot make in place (kernel.ErrReshape)
// installs the whole plan again, with the same mechanism and dilation.
// The reply carries the link now in effect.
func (s *shaper) setLink(ctx context.Context, req *msg.GridSetLink) *msg.GridShaped {
	reply := &msg.GridShaped{Host: s.name}
	if req.Link == nil {
		reply.Error = s.name + ": GridSetLink without a link"
		return reply
	}
	dst, l := req.Link.Cluster, fromGridLink(req.Link)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil {
		reply.Error = fmt.Sprintf("%s: no shaping installed to change the link to %s", s.name, dst)
		return reply
	}
	if _, ok := s.plan.To[dst]; !ok {
		reply.Error = fmt.Sprintf("%s: no link to %s in the installed plan", s.name, dst)
		return reply
	}
	reply.Mechanism, reply.Reason = s.mech, "changed in place"
	s.plan.To[dst] = l
	var err error
	ls, inPlace := s.inst.(linkSetter)
	if inPlace {
		err = ls.SetLink(dst, dilated(s.mech, netem.EgressPlan{To: map[string]netem.Link{dst: l}}, s.dilation).To[dst])
	}
	if !inPlace || errors.Is(err, kernel.ErrReshape) {
		reply.Reason = fmt.Sprintf("installed again: %s cannot change it in place", s.mech)
		if err != nil {
			reply.Reason = "installed again: " + err.Error()
		}
		err = s.installLocked(ctx, s.impl, s.plan, s.dilation)
	}
	if err != nil {
		reply.Error = fmt.Sprintf("%s: link to %s: %v", s.name, dst, err)
		return reply
	}
	if eff, ok := s.inst.Effective()[dst]; ok {
		reply.Effective = []*msg.GridLink{toGridLink(dst, eff)}
	}
	return reply
}

// setCut handles a GridCut: the host's application traffic to and from the
// hosts of the clusters is dropped (cut) or let through again (heal); its
// control-plane ports (s.keep) stay open whatever the mechanism.
func (s *shaper) setCut(req *msg.GridCut) *msg.GridAck {
	ack := &msg.GridAck{Host: s.name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setCutLocked(req.Clusters, req.Cut); err != nil {
		ack.Error = fmt.Sprintf("%s: %v", s.name, err)
	}
	return ack
}

func (s *shaper) setCutLocked(clusters []string, cut bool) error {
	if s.shared {
		return errors.New("a host without a network stack of its own cannot be cut off")
	}
	if !cut {
		if err := kernel.RemoveCut(); err != nil {
			return fmt.Errorf("heal: %w", err)
		}
		s.cut = false
		return nil
	}
	peers, err := cutPrefixes(s.grid.Subnets, s.cluster, clusters)
	if err != nil {
		return err
	}
	if err := kernel.InstallCut(peers, s.keep); err != nil {
		return fmt.Errorf("cut: %w", err)
	}
	s.cut = true
	return nil
}

// cutPrefixes are the prefixes of the clusters a host of cluster self is
// cut from: its own cluster's are never cut, an unknown cluster is an
// error.
func cutPrefixes(subnets map[string][]netip.Prefix, self string, clusters []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range clusters {
		if c == self {
			continue
		}
		ps, ok := subnets[c]
		if !ok {
			return nil, fmt.Errorf("cut: no subnet of cluster %q", c)
		}
		out = append(out, ps...)
	}
	return out, nil
}
