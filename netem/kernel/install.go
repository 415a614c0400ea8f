package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/koala-emu/koala-emu/netem"
)

// Shaping is what one installation applies to one destination cluster.
type Shaping struct {
	Cluster string
	Target  netem.Link
	// Rate is the HTB rate in link-layer bytes/s (0: not rate-limited).
	Rate  uint64
	Burst uint32
	// LineRate is the rate in payload bytes/s at which the delay line
	// serialises each sender's packets (0: none, the class alone sets the
	// rate); see Model.
	LineRate float64
	// Delay is the one-way delay added (0: none).
	Delay time.Duration
	// Floor is set when the target latency is at or below the path's own
	// latency: no delay is added and the floor is what is in effect.
	Floor bool
	// Divert sends the destination's packets through the delay line (HTB
	// mechanism) on queue Queue, with Delay (possibly 0: the line's own
	// overhead is the delay).
	Divert   bool
	Queue    uint16
	Prefixes []netip.Prefix
}

// installation is what an Install put into one namespace; close removes it
// in reverse order.
type installation struct {
	ns      vnetns.NsHandle
	nl      *netlink.Handle
	nft     *nftables.Conn
	link    netlink.Link
	shaping map[string]Shaping
	classes map[string]classSpec // by destination cluster
	netem   bool                 // classes carry netem leaves
	htb     bool
	rules   bool
	line    *DelayLine
	divert  string // how packets reach the delay line
}

// egressLink finds the interface that traffic to every destination prefix
// leaves through (route lookup in the namespace). dev, when set, names it.
func egressLink(h *netlink.Handle, dev string, dsts map[string][]netip.Prefix) (netlink.Link, error) {
	if dev != "" {
		l, err := h.LinkByName(dev)
		if err != nil {
			return nil, fmt.Errorf("egress interface %s: %w", dev, err)
		}
		return l, nil
	}
	idx := 0
	var first string
	keys := sortedKeys(dsts)
	for _, c := range keys {
		for _, p := range dsts[c] {
			// The prefix's first host may be this namespace's own address
			// (a cluster manager on its cluster's subnet): its route is the
			// loopback and says nothing, so the second host is asked then.
			probe := p.Masked().Addr().Next()
			if !p.Contains(probe) {
				probe = p.Addr() // a single address
			}
			for try := 0; try < 2 && p.Contains(probe); try++ {
				rs, err := h.RouteGet(net.IP(probe.AsSlice()))
				if err != nil {
					return nil, fmt.Errorf("route to %s (%s): %w", p, c, err)
				}
				if len(rs) == 0 {
					return nil, fmt.Errorf("no route to %s (%s)", p, c)
				}
				if l, err := h.LinkByIndex(rs[0].LinkIndex); err == nil && l.Attrs().Flags&net.FlagLoopback != 0 {
					probe = probe.Next()
					continue
				}
				switch {
				case idx == 0:
					idx, first = rs[0].LinkIndex, p.String()
				case idx != rs[0].LinkIndex:
					return nil, fmt.Errorf("destinations leave through different interfaces (%s and %s): set the interface explicitly", first, p)
				}
				break
			}
		}
	}
	if idx == 0 {
		return nil, errors.New("no destination prefixes")
	}
	l, err := h.LinkByIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("egress interface %d: %w", idx, err)
	}
	return l, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// install sets up HTB classes (and netem leaves or a delay line) in the
// calling thread's namespace; TCP and UDP to or from an exempt port pass
// unshaped. Every step undoes itself when a later one fails.
func install(ctx context.Context, shaping []Shaping, dev string, useNetem bool, dsts map[string][]netip.Prefix, exempt []uint16, dl DelayLineConfig) (_ *installation, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in := &installation{ns: -1, shaping: map[string]Shaping{}, classes: map[string]classSpec{}, netem: useNetem}
	defer func() {
		if err != nil {
			if cerr := in.close(context.WithoutCancel(ctx)); cerr != nil {
				err = errors.Join(err, fmt.Errorf("undoing partial install: %w", cerr))
			}
		}
	}()
	if in.ns, err = currentNamespace(); err != nil {
		return nil, err
	}
	if in.nl, err = handleAt(in.ns); err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	if in.link, err = egressLink(in.nl, dev, dsts); err != nil {
		return nil, err
	}
	var specs []classSpec
	var queues []DelayQueue
	var rules []queueRule
	for i, s := range shaping {
		in.shaping[s.Cluster] = s
		if s.Rate > 0 || (useNetem && s.Delay > 0) {
			rate := s.Rate
			if rate == 0 {
				rate = unlimitedRate
			}
			spec := classSpec{
				cluster: s.Cluster, minor: uint16(0x10 + i), rate: rate, burst: s.Burst,
				quantum: htbQuantum, prefixes: s.Prefixes,
				netem: useNetem, delay: s.Delay, netemLimit: netemLimit, leaf: uint16(0x100 + len(specs)),
			}
			specs = append(specs, spec)
			in.classes[s.Cluster] = spec
		}
		if !useNetem && s.Divert {
			queues = append(queues, DelayQueue{Num: s.Queue, Cluster: s.Cluster, Delay: s.Delay, Rate: s.LineRate})
			rules = append(rules, queueRule{queue: s.Queue, prefixes: s.Prefixes})
		}
	}
	if len(specs) > 0 {
		if err := installHTB(in.nl, in.link, specs, exempt); err != nil {
			return nil, err
		}
		in.htb = true
	}
	if len(queues) > 0 {
		dl.NetNS = int(in.ns)
		dl.Queues = queues
		if in.line, err = NewDelayLine(dl); err != nil {
			return nil, err
		}
		if in.nft, err = nftOpen(int(in.ns)); err != nil {
			return nil, err
		}
		in.rules = true // a failed flush leaves nothing, removal is then a no-op
		if in.divert, err = installQueueRules(in.nft, in.link.Attrs().Index, rules, exempt); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// close removes the rules first (no new packets reach the delay line), then
// releases what the line holds and closes it, then deletes the HTB root.
func (in *installation) close(ctx context.Context) error {
	var errs []error
	if in.rules && in.nft != nil {
		if err := removeQueueRules(in.nft); err != nil {
			errs = append(errs, err)
		}
		in.rules = false
	}
	if in.line != nil {
		if err := in.line.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		in.line = nil
	}
	if in.htb {
		if err := removeHTB(in.nl, in.link); err != nil {
			errs = append(errs, err)
		}
		in.htb = false
	}
	if in.nft != nil {
		if err := in.nft.CloseLasting(); err != nil {
			errs = append(errs, fmt.Errorf("nftables: %w", err))
		}
		in.nft = nil
	}
	if in.nl != nil {
		in.nl.Close()
		in.nl = nil
	}
	if in.ns >= 0 {
		if err := in.ns.Close(); err != nil {
			errs = append(errs, fmt.Errorf("namespace handle: %w", err))
		}
		in.ns = -1
	}
	return errors.Join(errs...)
}

const (
	// htbQuantum is set explicitly: the default (rate/10) is far above the
	// kernel's sanity limit at Gbit rates. One GSO packet per round.
	htbQuantum = 65536
	// netemLimit is the netem qdisc's queue in packets.
	netemLimit = 10000
	// unlimitedRate shapes nothing in practice (10 GB/s), for classes that
	// only carry a netem leaf.
	unlimitedRate = 10e9
)
