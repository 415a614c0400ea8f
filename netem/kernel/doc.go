// Package kernel shapes an emulated node's egress in the Linux kernel,
// per destination cluster, behind the netem.Mechanism interface:
//
//   - Netem ("netem"): an HTB root on the egress interface, one class per
//     destination cluster (its rate), u32 filters on the destination
//     prefixes, and a netem qdisc under each class for the one-way delay
//     (and jitter and loss). Used where the kernel has netem; its probe
//     fails with ErrNoNetem ("no netem qdisc in this kernel (ENOENT)")
//     where it does not, as on this project's CI kernel.
//
//   - HTB ("htb"): the same HTB classes for the rate, and a userspace delay
//     line for the latency, applied where packets arrive: nftables rules
//     (table "koala_delay", family ip, prerouting, programmed over netlink)
//     send packets arriving on the node's interface from a delayed cluster
//     to an NFQUEUE queue, one queue per cluster; a DelayLine holds each
//     packet and accepts it at its deadline, after which the node's stack
//     receives it. The sender's HTB class has limited the rate already;
//     the link matrix being symmetric, the delay from a cluster is the
//     delay to it. Held at the receiver, a packet no longer belongs to the
//     sender's socket, so TCP Small Queues do not throttle the flow (see
//     installQueueRules). Kernels without the nftables queue expression
//     get the xtables NFQUEUE target through nft_compat, as iptables-nft
//     does.
//
// TCP and UDP packets to or from an exempt port (HTB.Exempt, Netem.Exempt:
// the emulator's control plane) are neither classified nor queued: u32
// filters tried before the prefixes' send them to HTB's direct queue, and
// accept rules ahead of the queue rules let them through prerouting.
//
// Why NFQUEUE and not a TUN device: packets stay in the kernel (only 20
// header bytes are copied to userspace, whole 64 KB GSO packets are queued
// as one), ordering per queue is kept by the kernel, a batch verdict
// releases everything due at once, nothing is re-injected by hand (a TUN
// device needs forwarding, policy routing, source-address exemptions and
// userspace copies of every byte), and removing one nftables table undoes
// the diversion atomically.
//
// The delay line is one locked OS thread per installation that receives,
// holds and releases (ppoll on the queue socket with the next deadline as
// timeout, 1 ns timer slack, spinning the last stretch before a deadline):
// on small virtual machines every hand-off between threads costs tens of
// microseconds. The spin margin adapts to the p99.5 of the thread's recent
// wake-up overshoots (plus SpinGuard, between MinSpin and MaxSpin), per
// class of sleep length (ptimer.Margin: longer sleeps wake later); an
// idle line sleeps without a timeout and uses no CPU. The thread runs with
// SCHED_FIFO by default when allowed (see HTB.NoRealtime), and while it
// exists GOMAXPROCS has a spare P (ptimer.ReserveP), so that it finds a P
// at once when its sleep ends. What it cannot avoid is the Go garbage
// collector's stop-the-world pauses of its own process, which hold it up
// on its way back from ppoll (see the calibrate command). Release
// lateness (verdict issued minus deadline, the deadline being the packet's
// arrival in userspace plus the queue's delay) is kept in a
// ptimer.Histogram; kernel queue drops are read from
// /proc/net/netfilter/nfnetlink_queue of the namespace.
//
// The line also serialises: each sender's packets are charged their wire
// time at the link's rate, one after the other, before the delay
// (serialised). The sender's HTB class lets its burst and a whole GSO
// packet (up to 64 KB) leave at once after being idle, so without it a
// message of that size arrived without its wire time, 19 ms early for
// 20 KB on dilated GbE. Where the line serialises, the class runs 5 %
// faster and only paces the flow. Each sender of a queue has its own
// serialiser, so the packets due may not be the oldest of the queue: they
// then get a verdict each (one write). A sender's wire is shared by its
// destinations in the cluster only through its HTB class; the receivers'
// serialisers do not see each other's share. Links faster than
// MaxLineRate (20 MB/s) are not serialised: there the class's model is
// right and reading packets one by one set the pace (DAS-3's 185 MB/s
// pairs 6-7 % slow on the docker backend).
//
// Rates and delays follow Model: targets are what a 1 MB ping-pong reports
// (netem.WireRate: one way is latency + message/rate), HTB counts Ethernet
// frames (PayloadFactor: 0.956 of them is TCP payload at MTU 1500), each
// message starts with a full token bucket (the burst is subtracted where
// the line does not serialise), the path's own latency (Floor) and the
// delay line's own cost at the delay it adds (Overhead, a curve measured
// at OverheadProbes) are subtracted from the delays, and a target at or
// below the floor gets no delay. Explicit quantum and burst (at least
// 16 KB, 120 µs of the rate) keep HTB precise from 10 MB/s to Gbit rates.
//
// Probe and Install act on the network namespace of the calling OS thread
// (netns.Topology.Run locks one); the installation keeps a handle on that
// namespace, so Close and the statistics work from any goroutine. Every
// step of Install undoes itself when a later one fails; Close removes the
// rules, releases what the line holds, closes it and deletes the HTB root.
//
// For faults on purpose, Installed.SetLink changes one destination's link
// mid-run in place (the HTB class's rate and burst, the netem leaf's delay,
// the delay line queue's delay), computed by the installation's Model as
// Install computes it; a change the installation's layout cannot absorb
// (a class or a delay line queue it has not) is refused with ErrReshape.
// InstallCut and RemoveCut cut a namespace off from peer prefixes and heal
// it (nftables table CutTableName, drop rules on output and prerouting,
// control-plane ports let through).
package kernel
