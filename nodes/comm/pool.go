package comm

import (
	"math/bits"
	"sync"
)

// Large payloads come from size-classed pools so programs that move
// megabytes per iteration do not churn the garbage collector; Release gives
// a received payload back.

const (
	poolMinShift = 12 // 4 KiB
	poolMaxShift = 27 // 128 MiB
)

var bufPools [poolMaxShift + 1]sync.Pool

func getBuf(n int) []byte {
	if n < 1<<poolMinShift || n > 1<<poolMaxShift {
		return make([]byte, n)
	}
	shift := bits.Len(uint(n - 1))
	if p, ok := bufPools[shift].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<shift)
}

// Release returns a payload obtained from Recv (or a collective) to the
// runtime for reuse. The caller must not touch b afterwards. Releasing is
// optional; slices the runtime did not hand out are ignored.
func (c *Comm) Release(b []byte) {
	k := cap(b)
	if k < 1<<poolMinShift || k > 1<<poolMaxShift || k&(k-1) != 0 {
		return
	}
	b = b[:k]
	bufPools[bits.Len(uint(k))-1].Put(&b)
}
