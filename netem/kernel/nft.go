package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family ip) holding the delay line's
// rules in a node's namespace. Nothing else of the ruleset is touched.
const TableName = "koala_delay"

// queueRule diverts packets arriving through one interface from one set of
// source prefixes into one NFQUEUE queue.
type queueRule struct {
	queue    uint16
	prefixes []netip.Prefix
}

// nftOpen connects to nftables in the namespace nsFd refers to (0: the
// calling thread's namespace).
func nftOpen(nsFd int) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	switch {
	case nsFd > 0 && sameNamespace(nsFd):
		// No namespace switch (see inNamespace): one lasting socket,
		// opened here, stays in this namespace for every later operation,
		// from whichever thread.
		opts = append(opts, nftables.AsLasting())
	case nsFd > 0:
		opts = append(opts, nftables.WithNetNSFd(nsFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return c, nil
}

// installQueueRules creates table TableName with one prerouting chain
// (type filter, priority 0) and, for every rule, one nftables rule per
// prefix:
//
//	meta iif <ifindex> ip saddr & <mask> == <net> queue num <queue>
//
// after an accept rule for TCP and UDP to or from each exempt port (the
// emulator's control plane: its packets are never held), in one atomic
// transaction: either all of it exists afterwards or none.
// No bypass flag: if the delay line's socket went away, packets from delayed
// sources are dropped (a loud failure), never delivered undelayed.
//
// Why the receiving end and not the sender's postrouting: a packet the
// sender holds still belongs to its TCP socket (sk_wmem_alloc) until it is
// freed, and TCP Small Queues stop a socket from sending while more than
// about 1 ms of its pacing rate (sk_pacing_rate >> sk_pacing_shift) is
// queued below it. A delay of d held at the sender caps the flow at about
// (1 ms / d) of its own pacing rate, and the rate estimate follows: past
// about 4 ms (DAS-3's vrije-leiden at dilation 4) TCP never left the
// initial window (measured: 1.4 MB/s against 19.2 MB/s, 8 segments in
// flight, BBR's bandwidth estimate 1.7 MB/s). The receiving stack orphans
// every packet (ip_rcv_core) before the prerouting hook, so a packet held
// there counts against no socket. The link matrix is symmetric: the delay
// to a cluster is the delay from it.
//
// The native nftables queue expression (nft_queue) is tried first; kernels
// without it (this project's CI kernel) get the xtables NFQUEUE target
// through nft_compat, as iptables-nft does. It returns which one is in use.
func installQueueRules(c *nftables.Conn, ifindex int, rules []queueRule, exempt []uint16) (string, error) {
	if ifindex <= 0 {
		return "", fmt.Errorf("nftables: invalid interface index %d", ifindex)
	}
	for _, r := range rules {
		for _, p := range r.prefixes {
			if !p.Addr().Is4() {
				return "", fmt.Errorf("nftables: prefix %s: only IPv4 is shaped", p)
			}
		}
	}
	err := addQueueRules(c, ifindex, rules, exempt, false)
	if err == nil {
		return "nft queue", nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return "", err
	}
	if err2 := addQueueRules(c, ifindex, rules, exempt, true); err2 != nil {
		return "", errors.Join(err, err2)
	}
	return "xt NFQUEUE", nil
}

// queueExpr sends a packet to an NFQUEUE queue: the native expression or
// the xtables target (struct xt_NFQ_info_v3: queue number, queues total,
// flags, in host byte order, padded to 8 bytes).
func queueExpr(queue uint16, compat bool) expr.Any {
	if !compat {
		return &expr.Queue{Num: queue, Total: 1}
	}
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], queue)
	binary.NativeEndian.PutUint16(info[2:], 1)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}

// addQueueRules queues and flushes the transaction; the caller validated
// the interface and the prefixes, so nothing is left queued on failure.
func addQueueRules(c *nftables.Conn, ifindex int, rules []queueRule, exempt []uint16, compat bool) error {
	tb := c.AddTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4})
	policy := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name:     "ingress",
		Table:    tb,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookPrerouting,
		Priority: nftables.ChainPriorityFilter,
		Policy:   &policy,
	})
	for _, r := range portAcceptRules(exempt) {
		c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: r})
	}
	iif := binary.NativeEndian.AppendUint32(nil, uint32(ifindex))
	for _, r := range rules {
		for _, p := range r.prefixes {
			p = p.Masked()
			mask := prefixMask(p.Bits())
			netb := p.Addr().As4()
			c.AddRule(&nftables.Rule{
				Table: tb,
				Chain: ch,
				Exprs: []expr.Any{
					&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: iif},
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}, // saddr
					&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: netb[:]},
					queueExpr(r.queue, compat),
				},
			})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install %s: %w", TableName, err)
	}
	return nil
}

func prefixMask(bits int) [4]byte {
	var m [4]byte
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	binary.BigEndian.PutUint32(m[:], v)
	return m
}

// removeQueueRules deletes table TableName. A table that is already gone
// is not an error.
func removeQueueRules(c *nftables.Conn) error {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("nftables: list tables: %w", err)
	}
	found := false
	for _, t := range tables {
		if t.Name == TableName {
			found = true
		}
	}
	if !found {
		return nil
	}
	c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: delete %s: %w", TableName, err)
	}
	return nil
}

// probeNftables adds a table with a regular chain (no hook: no packet ever
// reaches it) holding a rule that sends to an NFQUEUE queue, natively or
// through the xtables target, and deletes it again.
func probeNftables(c *nftables.Conn, name string) (string, error) {
	try := func(compat bool) error {
		tb := c.AddTable(&nftables.Table{Name: name, Family: nftables.TableFamilyIPv4})
		ch := c.AddChain(&nftables.Chain{Name: "probe", Table: tb})
		c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{queueExpr(65000, compat)}})
		return c.Flush()
	}
	how := "nft queue"
	if err := try(false); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return "", fmt.Errorf("nftables: %w", err)
		}
		how = "xt NFQUEUE"
		if err2 := try(true); err2 != nil {
			return "", fmt.Errorf("nftables: no NFQUEUE (neither the queue expression nor the xtables target): %w", errors.Join(err, err2))
		}
	}
	tb := &nftables.Table{Name: name, Family: nftables.TableFamilyIPv4}
	c.DelTable(tb)
	if err := c.Flush(); err != nil {
		return "", fmt.Errorf("nftables: delete probe table %s: %w", name, err)
	}
	return how, nil
}
