package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Collectives must be called by every rank of the Comm in the same order
// (as in MPI). They use reserved tags, so they never match user messages.

// RingThreshold is the total allgather size (ranks x bytes per rank) from
// which Allgather switches from Bruck's algorithm to the ring, the choice
// MPICH makes for long messages.
const RingThreshold = 512 << 10

// Barrier returns once every rank has entered it (dissemination barrier:
// ceil(log2 n) rounds of empty messages).
func (c *Comm) Barrier(ctx context.Context) error {
	defer c.timed(time.Now())
	n := c.Size()
	for dist := 1; dist < n; dist *= 2 {
		if err := c.send(ctx, (c.rank+dist)%n, tagBarrier, nil); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		if _, err := c.recv(ctx, (c.rank-dist+n)%n, tagBarrier); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
	}
	return nil
}

// Bcast sends root's b to every rank along a binomial tree and returns it
// (on the root, b itself).
func (c *Comm) Bcast(ctx context.Context, root int, b []byte) ([]byte, error) {
	defer c.timed(time.Now())
	if err := c.peerCheck(root); err != nil {
		return nil, err
	}
	return c.bcast(ctx, root, b, tagBcast)
}

// bcast is Bcast's tree with the given reserved tag, untimed.
func (c *Comm) bcast(ctx context.Context, root int, b []byte, tag int32) ([]byte, error) {
	parent, children := bcastTree(c.Size(), c.rank, root)
	if parent >= 0 {
		got, err := c.recv(ctx, parent, tag)
		if err != nil {
			return nil, fmt.Errorf("bcast: %w", err)
		}
		b = got
	}
	for _, ch := range children {
		if err := c.send(ctx, ch, tag, b); err != nil {
			return nil, fmt.Errorf("bcast: %w", err)
		}
	}
	return b, nil
}

// bcastTree is rank r's place in the binomial tree of a broadcast from
// root over n ranks: its parent (-1 at the root) and its children, in the
// order it sends to them (farthest first).
func bcastTree(n, r, root int) (parent int, children []int) {
	vr := (r - root + n) % n
	parent = -1
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			parent = (vr - mask + root) % n
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			children = append(children, (vr+mask+root)%n)
		}
	}
	return parent, children
}

// AllreduceFloat64 combines v elementwise over all ranks with op and returns
// the result on every rank (recursive doubling; a non power of two folds
// the extra ranks in first). Every rank gets bitwise the same result.
func (c *Comm) AllreduceFloat64(ctx context.Context, v []float64, op Op) ([]float64, error) {
	defer c.timed(time.Now())
	if op != Sum && op != Max && op != Min {
		return nil, fmt.Errorf("comm: allreduce: unknown %v", op)
	}
	acc := append([]float64(nil), v...)
	r := c.rank
	fold, exch := allreduceSchedule(c.Size(), r)
	buf := make([]byte, 8*len(v))
	exchange := func(peer int) error {
		encodeFloats(buf, acc)
		if err := c.send(ctx, peer, tagAllreduce, buf); err != nil {
			return err
		}
		got, err := c.recv(ctx, peer, tagAllreduce)
		if err != nil {
			return err
		}
		return c.combine(acc, got, op, peer < r)
	}
	if fold >= 0 {
		if fold > r {
			encodeFloats(buf, acc)
			if err := c.send(ctx, fold, tagAllreduce, buf); err != nil {
				return nil, fmt.Errorf("allreduce: %w", err)
			}
		} else {
			got, err := c.recv(ctx, fold, tagAllreduce)
			if err != nil {
				return nil, fmt.Errorf("allreduce: %w", err)
			}
			if err := c.combine(acc, got, op, true); err != nil {
				return nil, err
			}
		}
	}
	for _, peer := range exch {
		if err := exchange(peer); err != nil {
			return nil, fmt.Errorf("allreduce: %w", err)
		}
	}
	if fold >= 0 {
		if fold < r {
			encodeFloats(buf, acc)
			if err := c.send(ctx, r-1, tagAllreduce, buf); err != nil {
				return nil, fmt.Errorf("allreduce: %w", err)
			}
		} else {
			got, err := c.recv(ctx, r+1, tagAllreduce)
			if err != nil {
				return nil, fmt.Errorf("allreduce: %w", err)
			}
			if len(got) != len(buf) {
				return nil, c.errorf("allreduce: got %d bytes, want %d", len(got), len(buf))
			}
			decodeFloats(acc, got)
		}
	}
	return acc, nil
}

// allreduceSchedule is rank r's part of a recursive-doubling allreduce over
// n ranks. With n not a power of two, the first 2 rem ranks pair up first:
// fold is r's partner (-1 for the other ranks); the even rank of a pair
// sends its vector to the odd one, sits the rounds out and gets the result
// back from it at the end. exch are the partners of r's doubling rounds,
// in order (none for a rank that sits out).
func allreduceSchedule(n, r int) (fold int, exch []int) {
	pof2 := 1
	for pof2*2 <= n {
		pof2 *= 2
	}
	rem := n - pof2
	fold, newRank := -1, r-rem
	if r < 2*rem {
		fold, newRank = r+1, -1
		if r%2 == 1 {
			fold, newRank = r-1, r/2
		}
	}
	if newRank < 0 {
		return fold, nil
	}
	for mask := 1; mask < pof2; mask <<= 1 {
		nd := newRank ^ mask
		peer := nd + rem
		if nd < rem {
			peer = 2*nd + 1
		}
		exch = append(exch, peer)
	}
	return fold, exch
}

// combine folds the encoded vector b into acc. The lower rank's operand
// comes first so every rank computes bitwise the same values.
func (c *Comm) combine(acc []float64, b []byte, op Op, otherIsLower bool) error {
	if len(b) != 8*len(acc) {
		return c.errorf("allreduce: got %d bytes, want %d (vectors of different lengths?)", len(b), 8*len(acc))
	}
	for i := range acc {
		o := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		x, y := acc[i], o
		if otherIsLower {
			x, y = o, acc[i]
		}
		switch op {
		case Sum:
			acc[i] = x + y
		case Max:
			acc[i] = math.Max(x, y)
		case Min:
			acc[i] = math.Min(x, y)
		}
	}
	return nil
}

func encodeFloats(dst []byte, v []float64) {
	for i, x := range v {
		binary.LittleEndian.PutUint64(dst[8*i:], math.Float64bits(x))
	}
}

func decodeFloats(dst []float64, b []byte) {
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
}

// Allgather gives every rank the b of every rank, indexed by rank. Every
// byte crosses the network: below RingThreshold in total it uses Bruck's
// algorithm (ceil(log2 n) rounds), from it on the ring (n-1 steps, one
// block per step), as MPICH does. The choice uses n x len(b), so every rank
// must pass the same length (as MPI_Allgather requires); for blocks of
// different lengths call AllgatherBruck or AllgatherRing directly.
func (c *Comm) Allgather(ctx context.Context, b []byte) ([][]byte, error) {
	if c.Size()*len(b) >= RingThreshold {
		return c.AllgatherRing(ctx, b)
	}
	return c.AllgatherBruck(ctx, b)
}

// AllgatherRing is Allgather along the ring: in step s every rank forwards
// to its right neighbour the block it received in step s-1. Blocks may
// differ in length. The result's own entry is b itself.
func (c *Comm) AllgatherRing(ctx context.Context, b []byte) ([][]byte, error) {
	defer c.timed(time.Now())
	n := c.Size()
	r := c.rank
	out := make([][]byte, n)
	out[r] = b
	right, left := (r+1)%n, (r-1+n)%n
	for s := 0; s < n-1; s++ {
		if err := c.send(ctx, right, tagAllgather, out[(r-s+n)%n]); err != nil {
			return nil, fmt.Errorf("allgather: %w", err)
		}
		got, err := c.recv(ctx, left, tagAllgather)
		if err != nil {
			return nil, fmt.Errorf("allgather: %w", err)
		}
		out[(r-s-1+n)%n] = got
	}
	return out, nil
}

// AllgatherBruck is Allgather by Bruck's algorithm: in round k every rank
// sends the blocks it holds (up to 2^k of them, length-prefixed) to rank
// r-2^k and receives as many from rank r+2^k. Blocks may differ in length.
func (c *Comm) AllgatherBruck(ctx context.Context, b []byte) ([][]byte, error) {
	defer c.timed(time.Now())
	return c.allgatherBruck(ctx, b, tagAllgather, c.Size())
}

// allgatherBruck is AllgatherBruck over ranks 0..n-1 of the table (this
// rank among them) with the given reserved tag, untimed.
func (c *Comm) allgatherBruck(ctx context.Context, b []byte, tag int32, n int) ([][]byte, error) {
	r := c.rank
	have := make([][]byte, 1, n) // have[i] is the block of rank (r+i)%n
	have[0] = b
	var buf []byte
	for dist := 1; dist < n; dist *= 2 {
		cnt := min(dist, n-dist)
		buf = buf[:0]
		for _, blk := range have[:cnt] {
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(blk)))
			buf = append(buf, blk...)
		}
		if err := c.send(ctx, (r-dist+n)%n, tag, buf); err != nil {
			return nil, fmt.Errorf("allgather: %w", err)
		}
		got, err := c.recv(ctx, (r+dist)%n, tag)
		if err != nil {
			return nil, fmt.Errorf("allgather: %w", err)
		}
		for i := 0; i < cnt; i++ {
			if len(got) < 4 {
				return nil, c.errorf("allgather: short message from rank %d", (r+dist)%n)
			}
			l := int(binary.BigEndian.Uint32(got))
			if len(got) < 4+l {
				return nil, c.errorf("allgather: short block from rank %d", (r+dist)%n)
			}
			have = append(have, got[4:4+l:4+l])
			got = got[4+l:]
		}
	}
	out := make([][]byte, n)
	for i, blk := range have {
		out[(r+i)%n] = blk
	}
	return out, nil
}

// Gather collects every rank's b on root, indexed by rank (each rank sends
// straight to the root). Other ranks get nil.
func (c *Comm) Gather(ctx context.Context, root int, b []byte) ([][]byte, error) {
	defer c.timed(time.Now())
	if err := c.peerCheck(root); err != nil {
		return nil, err
	}
	if c.rank != root {
		if err := c.send(ctx, root, tagGather, b); err != nil {
			return nil, fmt.Errorf("gather: %w", err)
		}
		return nil, nil
	}
	out := make([][]byte, c.Size())
	out[root] = b
	for j := range out {
		if j == root {
			continue
		}
		got, err := c.recv(ctx, j, tagGather)
		if err != nil {
			return nil, fmt.Errorf("gather: %w", err)
		}
		out[j] = got
	}
	return out, nil
}

// The ranks each collective makes rank r of n exchange messages with, in
// both directions (r names p if and only if p names r), sorted, without r:
// what an application passes to ConnectPeers for the collectives it calls.

// BarrierPeers are the partners of Barrier's dissemination rounds.
func BarrierPeers(n, r int) []int {
	var ps []int
	for dist := 1; dist < n; dist *= 2 {
		ps = append(ps, (r+dist)%n, (r-dist+n)%n)
	}
	return PeerSet(r, ps)
}

// BcastPeers are r's parent and children in Bcast's tree from root.
func BcastPeers(n, r, root int) []int {
	parent, children := bcastTree(n, r, root)
	return PeerSet(r, append(children, parent))
}

// AllreducePeers are the partners of AllreduceFloat64's rounds.
func AllreducePeers(n, r int) []int {
	fold, exch := allreduceSchedule(n, r)
	return PeerSet(r, append(exch, fold))
}

// AllgatherPeers are the partners of Allgather with blocks of blockLen
// bytes: the ring's neighbours or the partners of Bruck's rounds.
func AllgatherPeers(n, r, blockLen int) []int {
	if n*blockLen >= RingThreshold {
		return AllgatherRingPeers(n, r)
	}
	return AllgatherBruckPeers(n, r)
}

// AllgatherBruckPeers are the partners of AllgatherBruck's rounds: r-2^k
// and r+2^k, as the barrier's.
func AllgatherBruckPeers(n, r int) []int { return BarrierPeers(n, r) }

// AllgatherRingPeers are AllgatherRing's neighbours.
func AllgatherRingPeers(n, r int) []int {
	return PeerSet(r, []int{(r + 1) % n, (r - 1 + n) % n})
}

// GatherPeers are, for the root, every other rank; for another rank, the
// root.
func GatherPeers(n, r, root int) []int {
	if r != root {
		return PeerSet(r, []int{root})
	}
	ps := make([]int, 0, n)
	for j := range n {
		ps = append(ps, j)
	}
	return PeerSet(r, ps)
}

// PeerSet returns the ranks of ps sorted, once each, without r and
// without negative entries (a "none").
func PeerSet(r int, ps ...[]int) []int {
	var out []int
	for _, p := range ps {
		for _, x := range p {
			if x >= 0 && x != r {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
