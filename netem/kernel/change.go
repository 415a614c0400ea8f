package kernel

import (
	"errors"
	"fmt"

	"github.com/koala-emu/koala-emu/netem"
)

// This file holds the kernel shaping's runtime changes, for faults on
// purpose: one destination's link changed mid-run (Installed.SetLink), in
// place where the installation allows it.

// ErrReshape is the error of a change that the installation cannot make in
// place (the destination needs an HTB class, or a delay line queue, that
// it was installed without, or no longer needs the delay line it diverts
// through); the caller installs the plan again.
var ErrReshape = errors.New("the change needs the shaping installed again")

// SetLink gives the destination cluster dst the link l (dilated, as
// Install's plan) from now on, computed by the installation's model as
// Install computes it. The HTB class (rate and burst), its netem leaf
// (delay) and the delay line's queue (delay and serialiser rate) change in
// place: packets already queued stay, and packets the delay line holds
// keep their deadlines. A change the installation cannot make in place is an error
// wrapping ErrReshape and changes nothing.
func (i *Installed) SetLink(dst string, l netem.Link) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.in == nil {
		return fmt.Errorf("%s: shaping removed", i.mech)
	}
	old, ok := i.in.shaping[dst]
	if !ok {
		return fmt.Errorf("%s: no shaping towards %q", i.mech, dst)
	}
	s := i.model.shape(dst, l, i.mtu, !i.in.netem)
	s.Prefixes = old.Prefixes
	if i.adjust != nil {
		i.adjust(0, &s)
	}
	s.Queue = old.Queue
	if why := inPlace(old, s, i.in.netem); why != "" {
		return fmt.Errorf("%s: towards %s: %w (%s)", i.mech, dst, ErrReshape, why)
	}
	if err := i.in.change(s); err != nil {
		return fmt.Errorf("%s: towards %s: %w", i.mech, dst, err)
	}
	i.in.shaping[dst] = s
	i.eff[dst] = i.model.effective(s)
	return nil
}

// hasClass reports whether a destination shaped so gets an HTB class.
func hasClass(s Shaping, useNetem bool) bool { return s.Rate > 0 || (useNetem && s.Delay > 0) }

// inPlace says why the shaping of a destination cannot go from old to s in
// place, or "" when it can: the class and the delay line's queue must be
// there already (a class no longer needed stays, unlimited), and the
// destination must go through the delay line before and after or neither.
func inPlace(old, s Shaping, useNetem bool) string {
	switch {
	case old.Target.Unavailable || s.Target.Unavailable:
		return "an unavailable link is not shaped"
	case hasClass(s, useNetem) && !hasClass(old, useNetem):
		return "no HTB class was installed for it"
	case !useNetem && s.Divert && !old.Divert:
		return "it did not go through the delay line"
	case !useNetem && !s.Divert && old.Divert:
		return "it no longer needs the delay line it goes through"
	}
	return ""
}

// change applies the shaping s of one destination to its class, netem leaf
// and delay line queue (inPlace said it can).
func (in *installation) change(s Shaping) error {
	if spec, ok := in.classes[s.Cluster]; ok {
		spec.rate, spec.burst, spec.delay = s.Rate, s.Burst, s.Delay
		if spec.rate == 0 {
			spec.rate = unlimitedRate
		}
		if err := changeHTB(in.nl, in.link, spec); err != nil {
			return err
		}
		in.classes[s.Cluster] = spec
	}
	if s.Divert && in.line != nil {
		return errors.Join(in.line.SetRate(s.Queue, s.LineRate), in.line.SetDelay(s.Queue, s.Delay))
	}
	return nil
}
