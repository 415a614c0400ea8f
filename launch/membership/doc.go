// Package membership tells every koala-emu actor host which other hosts are
// alive: the scheduler, the information service (kis), the cluster managers,
// the compute nodes and the runners.
//
// Membership sits behind the small Provider interface. Two implementations
// exist:
//
//   - Memberlist gossips over UDP/TCP with github.com/hashicorp/memberlist
//     (SWIM with Lifeguard). It is used by the docker backend, where every
//     actor host is its own container. Role, cluster and the protoactor
//     remote address of a member travel in memberlist's node metadata.
//   - Hub and InmemProvider keep membership in one process, for unit tests:
//     they inject failures and network partitions deterministically. The
//     inproc backend has no membership: it knows a node is lost when its
//     faults timeline kills it (launch/inproc_faults.go) and reports it as
//     the grid backends' cluster hosts report a membership failure.
//
// Providers report changes on a channel of Events: Join, Leave (graceful),
// Fail (detected dead or cut off by a partition) and Update (metadata
// changed). Delivery never blocks the membership machinery: events wait in
// an unbounded per-provider queue until the consumer reads them.
package membership
