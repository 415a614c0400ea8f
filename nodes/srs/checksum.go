package srs

import (
	"encoding/binary"
	"fmt"
)

// Checksum is rank's share of the checksum of a distributed matrix. The
// checksum of the whole matrix is the Combine of every rank's share; it is
// a sum over the elements of a hash of (global index, element bytes), so it
// is the same for every distribution of the same matrix (and equals
// GlobalChecksum of the assembled matrix). A migrated job's matrix can thus
// be compared with the unmigrated run's without gathering either.
func Checksum(d Distribution, elemSize, rank int, local []byte) (uint64, error) {
	if err := d.Validate(); err != nil {
		return 0, err
	}
	if err := d.checkRank(rank); err != nil {
		return 0, fmt.Errorf("srs: checksum: %w", err)
	}
	if elemSize < 1 {
		return 0, fmt.Errorf("srs: checksum: elemSize must be >= 1, got %d", elemSize)
	}
	if want := d.LocalBytes(rank, elemSize); int64(len(local)) != want {
		return 0, fmt.Errorf("srs: checksum: local block of rank %d has %d bytes, want %d", rank, len(local), want)
	}
	pr, pc := d.Coords(rank)
	lrows, lcols := d.LocalShape(rank)
	var sum uint64
	for lj := 0; lj < lcols; lj++ {
		j := d.Col.Global(pc, lj, d.Cols)
		for li := 0; li < lrows; li++ {
			i := d.Row.Global(pr, li, d.Rows)
			off := (lj*lrows + li) * elemSize
			sum += elementHash(uint64(j)*uint64(d.Rows)+uint64(i), local[off:off+elemSize])
		}
	}
	return sum, nil
}

// Combine adds the ranks' shares of a checksum (modulo 2^64).
func Combine(shares ...uint64) uint64 {
	var s uint64
	for _, v := range shares {
		s += v
	}
	return s
}

// GlobalChecksum is the checksum of an assembled rows x cols matrix
// (column-major): the one every distribution of it combines to.
func GlobalChecksum(rows, cols, elemSize int, global []byte) (uint64, error) {
	if rows < 0 || cols < 0 || elemSize < 1 {
		return 0, fmt.Errorf("srs: global checksum: rows %d, cols %d, elemSize %d: need rows, cols >= 0 and elemSize >= 1", rows, cols, elemSize)
	}
	if len(global) != rows*cols*elemSize {
		return 0, fmt.Errorf("srs: global checksum: matrix has %d bytes, want %d", len(global), rows*cols*elemSize)
	}
	var sum uint64
	for k := 0; k < rows*cols; k++ {
		sum += elementHash(uint64(k), global[k*elemSize:(k+1)*elemSize])
	}
	return sum, nil
}

// elementHash mixes an element's column-major global index with its bytes,
// taken 8 at a time (little endian, the last word zero-padded).
func elementHash(idx uint64, b []byte) uint64 {
	h := mix(idx + 0x9e3779b97f4a7c15)
	for len(b) >= 8 {
		h = mix(h ^ binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		copy(w[:], b)
		h = mix(h ^ binary.LittleEndian.Uint64(w[:]) ^ uint64(len(b))<<56)
	}
	return h
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
