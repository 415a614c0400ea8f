package kernel

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// htbRoot is the handle of the root HTB qdisc (1:).
var htbRoot = netlink.MakeHandle(1, 0)

// classSpec is the shaping of one destination cluster on one interface.
type classSpec struct {
	cluster  string
	minor    uint16 // class 1:<minor>
	rate     uint64 // bytes/s counted by HTB (link-layer bytes)
	burst    uint32 // bytes
	quantum  uint32 // bytes
	prefixes []netip.Prefix
	// netem, when set, puts a netem qdisc with this one-way delay (and
	// limit) under the class: the Netem mechanism.
	netem      bool
	delay      time.Duration
	netemLimit uint32
	leaf       uint16 // the netem qdisc's major handle
}

func (c classSpec) handle() uint32 { return netlink.MakeHandle(1, c.minor) }

// installHTB puts an HTB root qdisc on link with one class per spec and one
// u32 filter per destination prefix. Unclassified traffic (other
// destinations, ARP) bypasses the classes unshaped (HTB's direct queue), and
// so do TCP and UDP packets to or from an exempt port: their filters
// (exemptFilters) come first and select the root itself, which HTB takes
// for its direct queue.
// On failure the root qdisc is deleted again, which removes every class,
// leaf and filter under it.
func installHTB(h *netlink.Handle, link netlink.Link, specs []classSpec, exempt []uint16) (err error) {
	idx := link.Attrs().Index
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: htbRoot, Parent: netlink.HANDLE_ROOT})
	root.Defcls = 0 // unclassified traffic goes out directly
	if err := h.QdiscAdd(root); err != nil {
		return fmt.Errorf("htb: add root qdisc on %s: %w", link.Attrs().Name, err)
	}
	defer func() {
		if err != nil {
			if derr := h.QdiscDel(root); derr != nil && !errors.Is(derr, unix.ENOENT) && !errors.Is(derr, unix.EINVAL) {
				err = errors.Join(err, fmt.Errorf("htb: undo root qdisc on %s: %w", link.Attrs().Name, derr))
			}
		}
	}()
	for i, f := range exemptFilters(idx, exempt) {
		if err := h.FilterAdd(f); err != nil {
			return fmt.Errorf("htb: add u32 filter %d for the exempt ports %v: %w", i, exempt, err)
		}
	}
	for _, s := range specs {
		if err := h.ClassAdd(s.class(idx)); err != nil {
			return fmt.Errorf("htb: add class %x for %s (%d B/s): %w", s.handle(), s.cluster, s.rate, err)
		}
		if s.netem {
			if err := h.QdiscAdd(s.leafQdisc(idx)); err != nil {
				return fmt.Errorf("netem: add qdisc under class %x for %s: %w", s.handle(), s.cluster, err)
			}
		}
		for j, p := range s.prefixes {
			if !p.Addr().Is4() {
				return fmt.Errorf("htb: prefix %s of %s: only IPv4 is shaped", p, s.cluster)
			}
			p = p.Masked()
			a := p.Addr().As4()
			val := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
			mask := uint32(0)
			if p.Bits() > 0 {
				mask = ^uint32(0) << (32 - p.Bits())
			}
			f := &netlink.U32{
				FilterAttrs: netlink.FilterAttrs{
					LinkIndex: idx, Parent: htbRoot, Priority: classFilterPriority, Protocol: unix.ETH_P_IP,
				},
				ClassId: s.handle(),
				Sel: &netlink.TcU32Sel{
					Flags: netlink.TC_U32_TERMINAL,
					Keys:  []netlink.TcU32Key{{Mask: mask, Val: val, Off: 16}},
				},
			}
			if err := h.FilterAdd(f); err != nil {
				return fmt.Errorf("htb: add u32 filter %s -> class %x (%s, prefix %d): %w", p, s.handle(), s.cluster, j, err)
			}
		}
	}
	return nil
}

// Filter priorities: the exempt ports' filters are tried before the
// destination prefixes'.
const (
	exemptFilterPriority = 1
	classFilterPriority  = 2
)

// exemptFilters are u32 filters on interface idx sending TCP and UDP
// packets from or to each port to HTB's direct queue. They match IPv4
// headers without options (header length 5: the stack sends none here),
// the protocol, and the port at its fixed offset behind such a header.
func exemptFilters(idx int, ports []uint16) []*netlink.U32 {
	var out []*netlink.U32
	for _, proto := range []uint32{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		for _, port := range ports {
			for _, k := range []netlink.TcU32Key{
				{Mask: 0xffff0000, Val: uint32(port) << 16, Off: 20}, // source port
				{Mask: 0x0000ffff, Val: uint32(port), Off: 20},       // destination port
			} {
				out = append(out, &netlink.U32{
					FilterAttrs: netlink.FilterAttrs{
						LinkIndex: idx, Parent: htbRoot, Priority: exemptFilterPriority, Protocol: unix.ETH_P_IP,
					},
					ClassId: htbRoot,
					Sel: &netlink.TcU32Sel{
						Flags: netlink.TC_U32_TERMINAL,
						Keys: []netlink.TcU32Key{
							{Mask: 0x0f000000, Val: 0x05000000, Off: 0}, // header length 5
							{Mask: 0x00ff0000, Val: proto << 16, Off: 8},
							k,
						},
					},
				})
			}
		}
	}
	return out
}

// class is the spec's HTB class on interface idx.
func (c classSpec) class(idx int) *netlink.HtbClass {
	bits := c.rate * 8
	return netlink.NewHtbClass(
		netlink.ClassAttrs{LinkIndex: idx, Parent: htbRoot, Handle: c.handle()},
		netlink.HtbClassAttrs{Rate: bits, Ceil: bits, Buffer: c.burst, Cbuffer: c.burst, Quantum: c.quantum},
	)
}

// leafQdisc is the netem qdisc under the spec's class (netem mechanism).
func (c classSpec) leafQdisc(idx int) *netlink.Netem {
	return netlink.NewNetem(
		netlink.QdiscAttrs{LinkIndex: idx, Parent: c.handle(), Handle: netlink.MakeHandle(c.leaf, 0)},
		netlink.NetemQdiscAttrs{Latency: uint32(c.delay / time.Microsecond), Limit: c.netemLimit},
	)
}

// changeHTB gives a class installed by installHTB the spec's rate and
// burst, and its netem leaf the spec's delay, in place: packets queued in
// the class stay queued and the filters are left alone.
func changeHTB(h *netlink.Handle, link netlink.Link, s classSpec) error {
	idx := link.Attrs().Index
	if err := h.ClassChange(s.class(idx)); err != nil {
		return fmt.Errorf("htb: change class %x for %s (%d B/s): %w", s.handle(), s.cluster, s.rate, err)
	}
	if s.netem {
		if err := h.QdiscChange(s.leafQdisc(idx)); err != nil {
			return fmt.Errorf("netem: change qdisc under class %x for %s: %w", s.handle(), s.cluster, err)
		}
	}
	return nil
}

// removeHTB deletes the root HTB qdisc installed by installHTB (and with it
// every class, leaf and filter). A root that is already gone is fine.
func removeHTB(h *netlink.Handle, link netlink.Link) error {
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: htbRoot, Parent: netlink.HANDLE_ROOT})
	if err := h.QdiscDel(root); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("htb: delete root qdisc on %s: %w", link.Attrs().Name, err)
	}
	return nil
}
