package ptimer

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats summarises a distribution of lateness values.
type Stats struct {
	Count int64
	P50   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// Histogram buckets: 1 µs wide below linearLimit µs, then 32 buckets per
// power of two (about 3% resolution) up to 2^maxExp µs (about 19 h).
const (
	linearLimit = 256 // µs, a power of two
	linearBits  = 8   // log2(linearLimit)
	subBits     = 5
	subBuckets  = 1 << subBits
	maxExp      = 36
	numBuckets  = linearLimit + (maxExp-linearBits+1)*subBuckets
)

// Histogram records durations in fixed memory (about 10 KiB) with 1 µs
// resolution below 256 µs and about 3% above. It is safe for concurrent use;
// the zero value is ready.
type Histogram struct {
	counts [numBuckets]atomic.Int64
	count  atomic.Int64
	max    atomic.Int64
}

func bucketOf(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	us := uint64(d / time.Microsecond)
	if us < linearLimit {
		return int(us)
	}
	e := bits.Len64(us) - 1 // >= linearBits
	if e > maxExp {
		return numBuckets - 1
	}
	sub := int(us>>(uint(e)-subBits)) & (subBuckets - 1)
	return linearLimit + (e-linearBits)*subBuckets + sub
}

// bucketUpper is the exclusive upper edge of bucket i.
func bucketUpper(i int) time.Duration {
	if i < linearLimit {
		return time.Duration(i+1) * time.Microsecond
	}
	k := i - linearLimit
	e := k/subBuckets + linearBits
	sub := k % subBuckets
	lo := uint64(1)<<uint(e) + uint64(sub)<<(uint(e)-subBits)
	hi := lo + uint64(1)<<(uint(e)-subBits)
	if hi > math.MaxInt64/uint64(time.Microsecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(hi) * time.Microsecond
}

// Record adds one value. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(d)].Add(1)
	h.count.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

// Reset forgets every value.
func (h *Histogram) Reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.count.Store(0)
	h.max.Store(0)
}

// Stats returns the count, the median, the 99th percentile and the maximum.
// Percentiles are the upper edge of their bucket (never below the true value
// by more than the bucket width, never above Max).
func (h *Histogram) Stats() Stats {
	var c [numBuckets]int64
	var n int64
	for i := range h.counts {
		c[i] = h.counts[i].Load()
		n += c[i]
	}
	s := Stats{Count: n, Max: time.Duration(h.max.Load())}
	if n == 0 {
		return s
	}
	s.P50 = quantile(c[:], n, 0.50, s.Max)
	s.P99 = quantile(c[:], n, 0.99, s.Max)
	return s
}

// Merge adds the contents of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if v := o.counts[i].Load(); v != 0 {
			h.counts[i].Add(v)
			h.count.Add(v)
		}
	}
	om := o.max.Load()
	for {
		m := h.max.Load()
		if om <= m || h.max.CompareAndSwap(m, om) {
			break
		}
	}
}

func quantile(c []int64, n int64, q float64, max time.Duration) time.Duration {
	rank := int64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var acc int64
	for i, v := range c {
		acc += v
		if acc >= rank {
			u := bucketUpper(i)
			if u > max {
				u = max
			}
			return u
		}
	}
	return max
}
