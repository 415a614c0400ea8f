package srs

import (
	"fmt"
	"sort"
)

// Range is the half-open interval [Lo, Hi) of global indices.
type Range struct{ Lo, Hi int }

// Len is the number of indices in the range.
func (r Range) Len() int { return r.Hi - r.Lo }

// Transfer is what one old process sends to one new process: the elements
// whose row lies in Rows and whose column lies in Cols (a Cartesian
// product, because both distributions are products of their two axes).
// Every range lies in one block of the old and one block of the new
// distribution, or spans blocks of an axis with one process, so it is
// contiguous in both processes' local storage.
type Transfer struct {
	From, To   int // old rank, new rank
	Rows, Cols []Range
	Bytes      int64
}

// Elements is the number of matrix elements the transfer carries.
func (t Transfer) Elements() int64 { return int64(total(t.Rows)) * int64(total(t.Cols)) }

func total(rs []Range) int {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// Plan is the redistribution of a matrix from one distribution to another:
// one Transfer for every (old, new) pair that shares at least one element,
// sorted by (From, To). A pair whose old and new ranks are equal is still a
// transfer: the ranks of the two distributions are different processes
// (restart runs on other nodes), so the runtime decides whether it is local.
type Plan struct {
	From, To  Distribution
	ElemSize  int
	Transfers []Transfer
}

// Redistribute returns the transfer plan from one distribution of a
// matrix to another of the same shape, for elements of elemSize bytes.
func Redistribute(from, to Distribution, elemSize int) (Plan, error) {
	if err := from.Validate(); err != nil {
		return Plan{}, fmt.Errorf("srs: from: %w", err)
	}
	if err := to.Validate(); err != nil {
		return Plan{}, fmt.Errorf("srs: to: %w", err)
	}
	if from.Rows != to.Rows || from.Cols != to.Cols {
		return Plan{}, fmt.Errorf("srs: to shape %dx%d differs from from shape %dx%d", to.Rows, to.Cols, from.Rows, from.Cols)
	}
	if elemSize < 1 {
		return Plan{}, fmt.Errorf("srs: elemSize must be >= 1, got %d", elemSize)
	}
	rows := axisPairs(from.Row, to.Row, from.Rows)
	cols := axisPairs(from.Col, to.Col, from.Cols)
	p := Plan{From: from, To: to, ElemSize: elemSize}
	for rk, rr := range rows {
		for ck, cr := range cols {
			t := Transfer{
				From: rk[0]*from.Col.Procs + ck[0],
				To:   rk[1]*to.Col.Procs + ck[1],
				Rows: rr, Cols: cr,
			}
			t.Bytes = t.Elements() * int64(elemSize)
			p.Transfers = append(p.Transfers, t)
		}
	}
	sort.Slice(p.Transfers, func(a, b int) bool {
		ta, tb := p.Transfers[a], p.Transfers[b]
		if ta.From != tb.From {
			return ta.From < tb.From
		}
		return ta.To < tb.To
	})
	return p, nil
}

// axisPairs cuts [0, n) at every block boundary of either axis and groups
// the pieces by (old owner, new owner), merging neighbours.
func axisPairs(old, new Axis, n int) map[[2]int][]Range {
	out := map[[2]int][]Range{}
	bo, bn := old.block(n), new.block(n)
	for i := 0; i < n; {
		next := min((i/bo+1)*bo, (i/bn+1)*bn, n)
		k := [2]int{old.Owner(i, n), new.Owner(i, n)}
		rs := out[k]
		if l := len(rs); l > 0 && rs[l-1].Hi == i {
			rs[l-1].Hi = next
		} else {
			rs = append(rs, Range{i, next})
		}
		out[k] = rs
		i = next
	}
	return out
}

// Bytes is the plan as a matrix: Bytes()[old][new] is the number of bytes
// old rank old sends to new rank new (zero where they share nothing).
func (p Plan) Bytes() [][]int64 {
	m := make([][]int64, p.From.Procs())
	for i := range m {
		m[i] = make([]int64, p.To.Procs())
	}
	for _, t := range p.Transfers {
		m[t.From][t.To] += t.Bytes
	}
	return m
}

// TotalBytes is the sum of every transfer: the whole matrix.
func (p Plan) TotalBytes() int64 {
	var s int64
	for _, t := range p.Transfers {
		s += t.Bytes
	}
	return s
}

// Pack cuts old rank from's local block into the plan's messages, keyed by
// the new rank each is for. A message holds the transfer's elements in
// column-major order of their global indices.
func (p Plan) Pack(from int, local []byte) (map[int][]byte, error) {
	if err := p.From.checkRank(from); err != nil {
		return nil, fmt.Errorf("srs: pack: %w", err)
	}
	if want := p.From.LocalBytes(from, p.ElemSize); int64(len(local)) != want {
		return nil, fmt.Errorf("srs: pack: local block of rank %d has %d bytes, want %d", from, len(local), want)
	}
	lrows, _ := p.From.LocalShape(from)
	out := map[int][]byte{}
	for _, t := range p.Transfers {
		if t.From != from {
			continue
		}
		msg := make([]byte, 0, t.Bytes)
		walk(p.From, lrows, p.ElemSize, t, func(off, n int) { msg = append(msg, local[off:off+n]...) })
		out[t.To] = msg
	}
	return out, nil
}

// Unpack assembles new rank to's local block from the messages the old
// ranks packed for it, keyed by old rank. Every message the plan expects
// must be present with the expected length, and no other.
func (p Plan) Unpack(to int, msgs map[int][]byte) ([]byte, error) {
	if err := p.To.checkRank(to); err != nil {
		return nil, fmt.Errorf("srs: unpack: %w", err)
	}
	local := make([]byte, p.To.LocalBytes(to, p.ElemSize))
	lrows, _ := p.To.LocalShape(to)
	used := 0
	for _, t := range p.Transfers {
		if t.To != to {
			continue
		}
		msg, ok := msgs[t.From]
		if !ok {
			return nil, fmt.Errorf("srs: unpack: rank %d: no message from old rank %d", to, t.From)
		}
		if int64(len(msg)) != t.Bytes {
			return nil, fmt.Errorf("srs: unpack: rank %d: message from old rank %d has %d bytes, want %d", to, t.From, len(msg), t.Bytes)
		}
		pos := 0
		walk(p.To, lrows, p.ElemSize, t, func(off, n int) { pos += copy(local[off:off+n], msg[pos:pos+n]) })
		used++
	}
	if used != len(msgs) {
		return nil, fmt.Errorf("srs: unpack: rank %d: got %d messages, the plan has %d for it", to, len(msgs), used)
	}
	return local, nil
}

// walk visits a transfer's elements in the local storage of distribution
// d (lrows local rows), one contiguous run per (column, row range), in
// column-major order of global indices: f(byte offset, byte count).
func walk(d Distribution, lrows, es int, t Transfer, f func(off, n int)) {
	for _, cr := range t.Cols {
		for j := cr.Lo; j < cr.Hi; j++ {
			lj := d.Col.Local(j, d.Cols)
			for _, rr := range t.Rows {
				li := d.Row.Local(rr.Lo, d.Rows)
				f((lj*lrows+li)*es, rr.Len()*es)
			}
		}
	}
}

// Scatter cuts a global matrix (column-major, rows x cols elements of
// elemSize bytes) into the local blocks of d, indexed by rank.
func Scatter(d Distribution, elemSize int, global []byte) ([][]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if elemSize < 1 {
		return nil, fmt.Errorf("srs: scatter: elemSize must be >= 1, got %d", elemSize)
	}
	if want := d.Rows * d.Cols * elemSize; len(global) != want {
		return nil, fmt.Errorf("srs: scatter: global matrix has %d bytes, want %d", len(global), want)
	}
	locals := make([][]byte, d.Procs())
	for r := range locals {
		locals[r] = make([]byte, d.LocalBytes(r, elemSize))
	}
	eachElement(d, func(i, j, rank, off int) {
		g := (j*d.Rows + i) * elemSize
		copy(locals[rank][off*elemSize:(off+1)*elemSize], global[g:g+elemSize])
	})
	return locals, nil
}

// Gather is the inverse of Scatter.
func Gather(d Distribution, elemSize int, locals [][]byte) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if elemSize < 1 {
		return nil, fmt.Errorf("srs: gather: elemSize must be >= 1, got %d", elemSize)
	}
	if len(locals) != d.Procs() {
		return nil, fmt.Errorf("srs: gather: %d local blocks for %d processes", len(locals), d.Procs())
	}
	for r, l := range locals {
		if want := d.LocalBytes(r, elemSize); int64(len(l)) != want {
			return nil, fmt.Errorf("srs: gather: local block of rank %d has %d bytes, want %d", r, len(l), want)
		}
	}
	global := make([]byte, d.Rows*d.Cols*elemSize)
	eachElement(d, func(i, j, rank, off int) {
		g := (j*d.Rows + i) * elemSize
		copy(global[g:g+elemSize], locals[rank][off*elemSize:(off+1)*elemSize])
	})
	return global, nil
}

// eachElement calls f for every global element with its rank and its
// element offset in the rank's local block.
func eachElement(d Distribution, f func(i, j, rank, off int)) {
	for j := 0; j < d.Cols; j++ {
		for i := 0; i < d.Rows; i++ {
			rank, li, lj := d.Owner(i, j)
			lrows, _ := d.LocalShape(rank)
			f(i, j, rank, lj*lrows+li)
		}
	}
}
