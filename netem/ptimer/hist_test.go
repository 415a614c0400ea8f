package ptimer

import (
	"testing"
	"time"
)

func TestBucketEdges(t *testing.T) {
	for _, d := range []time.Duration{0, 999, time.Microsecond, 255 * time.Microsecond, 256 * time.Microsecond,
		257 * time.Microsecond, 999 * time.Microsecond, time.Millisecond, 37 * time.Millisecond, time.Second, time.Hour} {
		b := bucketOf(d)
		if b < 0 || b >= numBuckets {
			t.Fatalf("bucketOf(%v) = %d out of range", d, b)
		}
		if up := bucketUpper(b); d >= up {
			t.Errorf("%v not below its bucket's upper edge %v", d, up)
		}
		if b > 0 {
			if lo := bucketUpper(b - 1); d < lo {
				t.Errorf("%v below its bucket's lower edge %v", d, lo)
			}
		}
	}
	for i := 1; i < numBuckets; i++ {
		if bucketUpper(i) <= bucketUpper(i-1) {
			t.Fatalf("bucket edges not increasing at %d", i)
		}
	}
}

func TestHistogramStats(t *testing.T) {
	var h Histogram
	if s := h.Stats(); s.Count != 0 || s.P99 != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for i := range 100 {
		h.Record(time.Duration(i) * time.Microsecond) // 0..99 µs
	}
	h.Record(-time.Second) // counts as 0
	s := h.Stats()
	if s.Count != 101 {
		t.Fatalf("count %d", s.Count)
	}
	if s.P50 < 49*time.Microsecond || s.P50 > 51*time.Microsecond {
		t.Errorf("p50 %v", s.P50)
	}
	if s.P99 < 98*time.Microsecond || s.P99 > 99*time.Microsecond {
		t.Errorf("p99 %v", s.P99)
	}
	if s.Max != 99*time.Microsecond {
		t.Errorf("max %v", s.Max)
	}
	var g Histogram
	g.Record(5 * time.Millisecond)
	h.Merge(&g)
	if s := h.Stats(); s.Count != 102 || s.Max != 5*time.Millisecond {
		t.Errorf("merge: %+v", s)
	}
	h.Reset()
	if s := h.Stats(); s.Count != 0 || s.Max != 0 {
		t.Errorf("reset: %+v", s)
	}
}
