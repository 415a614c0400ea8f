package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// CutTableName is the nftables table (family ip) holding a host's cut
// (InstallCut) in its namespace. Nothing else of the ruleset is touched.
const CutTableName = "koala_cut"

// InstallCut cuts the calling thread's namespace off from the peer
// prefixes: every IPv4 packet to them (output hook) or from them
// (prerouting, at raw priority: before the delay line's queue rules, so a
// dropped packet never waits there) is dropped, except TCP and UDP packets
// to or from a keep port (the control plane: protoactor remoting and
// memberlist). Dropping, not rejecting: a stream across the cut stalls and
// TCP retransmits until the cut is removed, as a partitioned network
// behaves. Installing again replaces the cut, in one transaction.
func InstallCut(peers []netip.Prefix, keep []uint16) error {
	for _, p := range peers {
		if !p.Addr().Is4() {
			return fmt.Errorf("cut: prefix %s: only IPv4 is cut", p)
		}
	}
	c, err := nftOpen(0)
	if err != nil {
		return err
	}
	if err := deleteCutTable(c, false); err != nil {
		return err
	}
	tb := c.AddTable(&nftables.Table{Name: CutTableName, Family: nftables.TableFamilyIPv4})
	policy := nftables.ChainPolicyAccept
	for _, h := range []struct {
		name     string
		hook     *nftables.ChainHook
		priority *nftables.ChainPriority
		addrOff  uint32
	}{
		{"out", nftables.ChainHookOutput, nftables.ChainPriorityFilter, 16}, // daddr
		{"in", nftables.ChainHookPrerouting, nftables.ChainPriorityRaw, 12}, // saddr
	} {
		ch := c.AddChain(&nftables.Chain{Name: h.name, Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: h.hook, Priority: h.priority, Policy: &policy})
		for _, r := range cutRules(peers, keep, h.addrOff) {
			c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: r})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install %s: %w", CutTableName, err)
	}
	return nil
}

// RemoveCut deletes the cut of the calling thread's namespace; no cut is
// not an error.
func RemoveCut() error {
	c, err := nftOpen(0)
	if err != nil {
		return err
	}
	return deleteCutTable(c, true)
}

// deleteCutTable deletes the cut table if it exists; flush false only
// queues the deletion (InstallCut's transaction).
func deleteCutTable(c *nftables.Conn, flush bool) error {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("nftables: list tables: %w", err)
	}
	for _, t := range tables {
		if t.Name != CutTableName {
			continue
		}
		c.DelTable(t)
		if !flush {
			return nil
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("nftables: delete %s: %w", CutTableName, err)
		}
	}
	return nil
}

// cutRules are one chain's rules: first accept TCP and UDP to or from
// every keep port, then drop every packet whose address at addrOff in the
// IPv4 header (12 source, 16 destination) is in a peer prefix.
func cutRules(peers []netip.Prefix, keep []uint16, addrOff uint32) [][]expr.Any {
	out := portAcceptRules(keep)
	for _, p := range peers {
		p = p.Masked()
		mask := prefixMask(p.Bits())
		netb := p.Addr().As4()
		out = append(out, []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: addrOff, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: netb[:]},
			&expr.Verdict{Kind: expr.VerdictDrop},
		})
	}
	return out
}

// portAcceptRules accept TCP and UDP packets to or from every port of
// ports: the control plane, which a cut keeps open (cutRules) and the
// delay line does not hold (addQueueRules).
func portAcceptRules(ports []uint16) [][]expr.Any {
	var out [][]expr.Any
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		for _, port := range ports {
			for _, off := range []uint32{0, 2} { // source port, destination port
				out = append(out, []expr.Any{
					&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
					&expr.Verdict{Kind: expr.VerdictAccept},
				})
			}
		}
	}
	return out
}
