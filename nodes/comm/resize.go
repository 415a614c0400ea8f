package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"time"
)

// Resizing. A running job changes its rank table at a safe point of the
// program (between iterations, no operation of the program in flight):
// every current rank calls Comm.Resize with the new table, every new rank
// calls Endpoint.Join. Ranks keep their numbers: a grow appends ranks
// oldSize..newSize-1, a shrink removes the highest ranks newSize..oldSize-1
// (one resize never both adds and removes ranks).
//
// The program's data is a block-distributed byte array: the ranks' blocks
// concatenated in rank order. A resize redistributes it into balanced
// blocks over the new ranks (block j holds total/n bytes, the first
// total%n blocks one more), and every byte that changes owner travels over
// the job's (shaped) connections.
//
// Connections stay lazy (see Endpoint.Connect). Grow: every current rank
// installs the grown table, the current ranks exchange their block lengths
// and rank 0 hands the old layout to the new ranks (oldLayout), then the
// data moves; the connections those messages need are opened by their
// first sends. No new rank sends to a current rank before every current
// rank has installed the grown table; a connection that came earlier would
// still wait, accepted (parked), for it. Shrink: every
// rank, departing ones included, exchanges block lengths and data under
// the old table; the departing ranks then close their communicator, and
// the remaining ones say goodbye to those they have a connection with and
// drop those connections.

// ResizeStats describes one rank's part in a resize.
type ResizeStats struct {
	OldSize, NewSize int
	// Duration is the wall time of the rank's part: for a current rank from
	// the call until its new block is complete (a departing rank: until its
	// goodbyes are exchanged); for a new rank from the arrival of the old
	// layout, the grow's first message to it (it waits for the current
	// ranks' safe point before that, while they still compute).
	Duration time.Duration
	// BytesSent and BytesRecv are the data bytes moved over the network;
	// Kept the bytes of the rank's old block that stay with it.
	BytesSent, BytesRecv, Kept int64
}

// sortPeers checks that peers are ranks 0..n-1 exactly once and returns
// them ordered by rank.
func sortPeers(job string, peers []Peer) ([]Peer, error) {
	ps := append([]Peer(nil), peers...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Rank < ps[j].Rank })
	for i, p := range ps {
		if p.Rank != i {
			return nil, fmt.Errorf("comm: job %s: peers must be ranks 0..%d exactly once (got rank %d at position %d)", job, len(ps)-1, p.Rank, i)
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("comm: job %s: empty rank table", job)
	}
	return ps, nil
}

// Resize switches the communicator to the rank table peers at a safe point
// and redistributes data, this rank's block of the job's distributed array
// (see above). self is this rank's number in the new table: its current
// rank, or -1 when it leaves (only the highest ranks leave). It returns the
// rank's new block (nil when it left; the communicator is then closed) and
// what the resize cost. Every current rank must call Resize with the same
// table, and every new rank Join, as with a collective. An error leaves the
// communicator unusable (abort it).
func (c *Comm) Resize(ctx context.Context, peers []Peer, self int, data []byte) ([]byte, ResizeStats, error) {
	c.resizeMu.Lock()
	defer c.resizeMu.Unlock()
	start := time.Now()
	if err := c.check(ctx); err != nil {
		return nil, ResizeStats{}, err
	}
	ps, err := sortPeers(c.opts.JobID, peers)
	if err != nil {
		return nil, ResizeStats{}, err
	}
	old := c.t()
	oldN, n := len(old.peers), len(ps)
	st := ResizeStats{OldSize: oldN, NewSize: n}
	switch {
	case self == -1 && c.rank < n:
		return nil, st, c.errorf("resize %d->%d: rank %d cannot leave (only ranks %d..%d leave)", oldN, n, c.rank, n, oldN-1)
	case self >= 0 && self != c.rank:
		return nil, st, c.errorf("resize %d->%d: ranks keep their numbers (asked to become rank %d)", oldN, n, self)
	case self >= 0 && self >= n:
		return nil, st, c.errorf("resize %d->%d: rank %d not in the new table", oldN, n, self)
	}
	for i := 0; i < min(oldN, n); i++ {
		if ps[i].Addr != old.peers[i].Addr {
			return nil, st, c.errorf("resize %d->%d: rank %d of the new table is at %s, not %s (ranks keep their numbers)", oldN, n, i, ps[i].Addr, old.peers[i].Addr)
		}
	}
	if n == oldN {
		st.Kept = int64(len(data))
		return data, st, nil
	}
	if n > oldN {
		if err := c.extend(ctx, ps, oldN); err != nil {
			return nil, st, err
		}
	}
	out, err := c.redistribute(ctx, oldN, n, data, &st)
	if err != nil {
		return nil, st, err
	}
	if n < oldN {
		if self == -1 {
			if err := c.Close(); err != nil {
				return nil, st, err
			}
			out = nil
		} else if err := c.drop(ctx, ps); err != nil {
			return nil, st, err
		}
	}
	st.Duration = time.Since(start)
	c.account(st)
	return out, st, nil
}

func (c *Comm) account(st ResizeStats) {
	c.resizes.Add(1)
	c.resizeNs.Add(int64(st.Duration))
	c.resizeSent.Add(st.BytesSent)
	c.resizeRecv.Add(st.BytesRecv)
}

// extend installs the grown table (new ranks oldN..len(ps)-1) and adopts
// the connections new ranks opened before it. It dials nobody: the
// redistribution's sends open the connections they need.
func (c *Comm) extend(ctx context.Context, ps []Peer, oldN int) error {
	if err := ctx.Err(); err != nil {
		return c.errorf("resize: %w", err)
	}
	n := len(ps)
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return ErrClosed
	}
	c.linkMu.Lock()
	defer c.linkMu.Unlock()
	if !c.accepting {
		return ErrClosed
	}
	old := c.t()
	slots := make([]*slot, n)
	copy(slots, old.slots)
	for j := oldN; j < n; j++ {
		slots[j] = newSlot(j, ps[j])
	}
	c.tab.Store(&table{peers: ps, slots: slots})
	c.adoptParked(slots, n)
	return nil
}

// drop says goodbye to the departed ranks len(ps).. it has connections
// with (after their data has arrived), waits for theirs, closes those
// connections and installs the shrunk table.
func (c *Comm) drop(ctx context.Context, ps []Peer) error {
	n := len(ps)
	old := c.t()
	c.linkMu.Lock()
	var links []*link
	var gone []*slot
	for _, s := range old.slots[n:] {
		if len(s.links) > 0 {
			links = append(links, s.links...)
			gone = append(gone, s)
		}
	}
	c.linkMu.Unlock()
	var first error
	for _, l := range links {
		if err := c.control(l, tagGoodbye, nil); err != nil && first == nil {
			first = c.errorf("resize: goodbye to departing rank %d: %w", l.peer, err)
		}
	}
	timer := time.NewTimer(c.opts.CloseTimeout)
	defer timer.Stop()
	for _, s := range gone {
		if first != nil {
			break
		}
		select {
		case <-s.in.gone:
		case <-c.failed:
			first = c.Err()
		case <-ctx.Done():
			first = c.errorf("resize: waiting for departing rank %d: %w", s.rank, ctx.Err())
		case <-timer.C:
			first = c.errorf("resize: departing rank %d did not say goodbye within %s", s.rank, c.opts.CloseTimeout)
		}
	}
	if first != nil {
		return first
	}
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return ErrClosed
	}
	c.linkMu.Lock()
	links = links[:0]
	for _, s := range old.slots[n:] {
		links = append(links, s.links...)
	}
	c.tab.Store(&table{peers: ps, slots: old.slots[:n:n]})
	// Survivors that finished the shrink first may have dialed this rank.
	c.adoptParked(old.slots[:n:n], n)
	c.linkMu.Unlock()
	for _, l := range links {
		_ = l.w.Close()
		_ = l.raw.Close()
	}
	return nil
}

// balanced returns the block lengths and offsets of total bytes over n ranks.
func balanced(total int64, n int) (lens, offs []int64) {
	lens, offs = make([]int64, n), make([]int64, n)
	q, r := total/int64(n), total%int64(n)
	var off int64
	for j := range lens {
		lens[j] = q
		if int64(j) < r {
			lens[j]++
		}
		offs[j] = off
		off += lens[j]
	}
	return lens, offs
}

// redistribute moves the distributed array from the blocks of ranks
// 0..oldN-1 to balanced blocks over ranks 0..newN-1. The current table is
// the union of both (the grown table, or the old one on a shrink). It
// returns this rank's new block (nil when it has none).
func (c *Comm) redistribute(ctx context.Context, oldN, newN int, data []byte, st *ResizeStats) ([]byte, error) {
	oldLen, err := c.oldLayout(ctx, oldN, newN, int64(len(data)))
	if err != nil {
		return nil, err
	}
	return c.moveBlocks(ctx, oldN, newN, data, oldLen, st)
}

// moveBlocks is redistribute once the old layout (the block lengths of
// ranks 0..oldN-1) is known.
func (c *Comm) moveBlocks(ctx context.Context, oldN, newN int, data []byte, oldLen []int64, st *ResizeStats) ([]byte, error) {
	u := c.rank
	oldOff := make([]int64, oldN)
	var total int64
	for v, l := range oldLen {
		oldOff[v] = total
		total += l
	}
	newLen, newOff := balanced(total, newN)
	var out []byte
	if u < newN {
		out = make([]byte, newLen[u])
	}
	overlap := func(a, al, b, bl int64) (int64, int64) { return max(a, b), min(a+al, b+bl) }
	// Send what leaves this rank, keep what stays.
	if u < oldN {
		a := oldOff[u]
		for j := 0; j < newN; j++ {
			lo, hi := overlap(a, int64(len(data)), newOff[j], newLen[j])
			if lo >= hi {
				continue
			}
			if j == u {
				copy(out[lo-newOff[u]:], data[lo-a:hi-a])
				st.Kept += hi - lo
				continue
			}
			if err := c.send(ctx, j, tagResize, data[lo-a:hi-a]); err != nil {
				return nil, fmt.Errorf("resize: hand %d bytes to rank %d: %w", hi-lo, j, err)
			}
			st.BytesSent += hi - lo
		}
	}
	// Receive the rest of the new block.
	if u < newN {
		for v := 0; v < oldN; v++ {
			if v == u {
				continue
			}
			lo, hi := overlap(oldOff[v], oldLen[v], newOff[u], newLen[u])
			if lo >= hi {
				continue
			}
			b, err := c.recv(ctx, v, tagResize)
			if err != nil {
				return nil, fmt.Errorf("resize: data from rank %d: %w", v, err)
			}
			if int64(len(b)) != hi-lo {
				return nil, c.errorf("resize: got %d bytes from rank %d, want %d", len(b), v, hi-lo)
			}
			copy(out[lo-newOff[u]:], b)
			c.Release(b)
			st.BytesRecv += hi - lo
		}
	}
	return out, nil
}

// oldLayout returns the block lengths of ranks 0..oldN-1 before the
// resize. The current ranks exchange theirs among themselves (Bruck's
// allgather over ranks 0..oldN-1); on a grow, rank 0 then hands the layout
// down a binomial tree over the grown table to the new ranks, whose
// hand-over broadcast (the application's) follows the same edges. That is
// newN-1 messages more, where an allgather over the grown table sent
// newN*log2(newN) and opened as many connections: 12.5 of the 16 ms a grow
// from 2 to 46 ranks took on loopback (BenchmarkGrow2to46), a pause of
// the host's making that counts k times at time scale k.
func (c *Comm) oldLayout(ctx context.Context, oldN, newN int, mine int64) ([]int64, error) {
	var lay []byte
	if c.rank < oldN {
		var lb [8]byte
		binary.BigEndian.PutUint64(lb[:], uint64(mine))
		got, err := c.allgatherBruck(ctx, lb[:], tagLayout, oldN)
		if err != nil {
			return nil, fmt.Errorf("resize: exchange block lengths: %w", err)
		}
		for v, b := range got {
			if len(b) != 8 {
				return nil, c.errorf("resize: block length of rank %d: %d bytes", v, len(b))
			}
			lay = append(lay, b...)
		}
	} else if mine != 0 {
		return nil, c.errorf("resize: new rank %d brings %d bytes of data", c.rank, mine)
	}
	if newN > oldN {
		got, err := c.bcast(ctx, 0, lay, tagOldLayout)
		if err != nil {
			return nil, fmt.Errorf("resize: hand the layout to the new ranks: %w", err)
		}
		if len(got) != 8*oldN || (lay != nil && string(got) != string(lay)) {
			return nil, c.errorf("resize: layout from rank 0 of %d bytes differs from the %d ranks' own", len(got), oldN)
		}
		lay = got
	}
	lens := make([]int64, oldN)
	for v := range lens {
		lens[v] = int64(binary.BigEndian.Uint64(lay[8*v:]))
	}
	return lens, nil
}

// Join makes a new rank part of a running job that grows from oldSize
// ranks to len(peers): it connects (lazily, see Connect) to the new table
// and receives its block of the job's data. The endpoint's rank must be one of the new ranks
// oldSize..len(peers)-1. Like Connect, an endpoint joins once.
func (e *Endpoint) Join(ctx context.Context, peers []Peer, oldSize int) (*Comm, []byte, ResizeStats, error) {
	n := len(peers)
	st := ResizeStats{OldSize: oldSize, NewSize: n}
	if oldSize < 1 || oldSize >= n {
		return nil, nil, st, fmt.Errorf("comm: job %s rank %d: join: old size %d must be in [1, %d)", e.opts.JobID, e.opts.Rank, oldSize, n)
	}
	if e.opts.Rank < oldSize || e.opts.Rank >= n {
		return nil, nil, st, fmt.Errorf("comm: job %s: join: rank %d is not a new rank (%d..%d)", e.opts.JobID, e.opts.Rank, oldSize, n-1)
	}
	c, err := e.Connect(ctx, peers)
	if err != nil {
		return nil, nil, st, err
	}
	c.resizeMu.Lock()
	defer c.resizeMu.Unlock()
	lens, err := c.oldLayout(ctx, oldSize, n, 0)
	if err != nil {
		c.Abort(err)
		return nil, nil, st, err
	}
	// The grow reaches this rank with the layout; before, it waited for
	// the current ranks' safe point while they still computed.
	start := time.Now()
	data, err := c.moveBlocks(ctx, oldSize, n, nil, lens, &st)
	if err != nil {
		c.Abort(err)
		return nil, nil, st, err
	}
	st.Duration = time.Since(start)
	c.account(st)
	return c, data, st, nil
}
