// Package comm is the MPI-like runtime the emulated applications run on.
//
// Every rank of a job owns an Endpoint (a TCP listener) and, once the
// addresses of all ranks are known, a Comm: TCP connections to the other
// ranks, over which real bytes travel. Each side shapes its own writes with
// its node's netem.Egress (per destination cluster), so the cost of
// communication comes out of the emulated network, never out of a formula.
//
// Connections are lazy, as MPI over TCP makes them: Connect dials nobody,
// and a rank's connection to a peer is opened the first time it sends to
// that peer (or is the one the peer opened first; if both dial at once the
// pair has two, each rank sending over its own so the order of its
// messages holds). The applications talk to few peers (ring and stencil
// neighbours, log2(n) collective partners, a root), and the full mesh a
// job used to open at start-up (2,016 connections for 64 ranks, a job
// every few seconds) was the main cause of late messages for the other
// jobs running at the time. A program that knows its peers opens just
// those before it starts (ConnectPeers: the lower rank of each pair dials,
// the higher waits for it; the collectives' peer sets are BarrierPeers,
// AllreducePeers and the like), so that no measured exchange pays for a
// connection's set-up. Stats.Connections counts what a rank opened.
// Computation is emulated: Compute waits work/(speed x processors) x
// dilation with a precise timer.
//
// Wire format. A connection starts with a handshake (magic, job ID, the
// dialer's rank and the job size) answered by one status byte (accepted,
// refused, or refused because the rank's communicator is closed). After that
// both directions carry frames: an 8-byte header (payload length uint32,
// tag int32, big endian) followed by the payload. User tags are >= 0;
// collectives use reserved negative tags, and two more mark a graceful
// goodbye and an abort (its payload is the reason).
//
// Semantics. Sends are eager: a reader goroutine per connection drains the
// socket into per-(source, tag) FIFO queues, so Send never waits for the
// matching Recv and Sendrecv cannot deadlock. Messages between two ranks
// with the same tag arrive in order. A peer that disappears without saying
// goodbye (or that aborts) breaks the Comm of the ranks connected to it:
// every pending and later operation fails with an error naming the peer
// (ranks without a connection to it learn of the failure from the job's
// runner, which aborts the job). Sending to a peer that has closed fails
// with ErrPeerClosed. Every blocking call honours
// its context. Close says goodbye to the peers it has connections with,
// waits (bounded) for theirs so no data in flight is lost, closes the
// connections and the endpoint and waits for its goroutines; Abort tells
// those peers why and closes at once.
//
// Resizing. A running job may change its rank table at a safe point:
// Comm.Resize on the current ranks (ranks keep their numbers; a grow
// appends ranks, a shrink removes the highest ones) and Endpoint.Join on
// the new ranks. The job's data, a block-distributed byte array, is
// redistributed into balanced blocks over the new ranks, every moved byte
// crossing the shaped connections; departing ranks hand their blocks over,
// exchange goodbyes and close. Stats counts the resizes, their wall time
// and the bytes they moved (see resize.go).
//
// Costs. A message is one write of header and payload (a per-connection
// buffer, no bufio copy) and, on the receiving side, one allocation for the
// payload (payloads from 4 KiB up come from pools; Release gives them
// back). On the 2-core reference host a small message costs about 15 µs of
// CPU in all (mostly the kernel's loopback TCP), so the whole process
// carries on the order of 100k messages/s; emulated jobs should stay well
// below that (see nodes/apps).
package comm
