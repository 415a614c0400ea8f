package fidelity

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Hist is a mergeable histogram of non-negative ratios (a lateness divided
// by its target). Buckets grow geometrically by 2 % from MinRatio, so a
// quantile is exact to within 2 %; values below MinRatio (on time, or early)
// share bucket 0. The zero value is empty and ready to use. It is not safe
// for concurrent use.
type Hist struct {
	counts []uint64
	// wire holds the non-empty buckets of a histogram decoded from JSON
	// (UnmarshalJSON) while nothing was added to it (counts is nil then):
	// merging it adds just those, so that a job's hundreds of ranks with a
	// computation each cost no whole histogram each (MergeEncoded).
	wire  [][2]uint64
	n     uint64
	max   float64
	early uint64 // values < 0: arrived before the model's time
}

const (
	// MinRatio is the smallest ratio a bucket of its own holds: 0.01 %.
	MinRatio = 1e-4
	// growth is the ratio between consecutive bucket edges.
	growth  = 1.02
	buckets = 1 + 900 // up to MinRatio x 1.02^900 (about 5e3)
)

var logGrowth = math.Log(growth)

func bucket(v float64) int {
	if v < MinRatio || math.IsNaN(v) {
		return 0
	}
	b := 1 + int(math.Log(v/MinRatio)/logGrowth)
	return min(b, buckets-1)
}

// upper is the upper edge of bucket b.
func upper(b int) float64 {
	if b == 0 {
		return MinRatio
	}
	return MinRatio * math.Pow(growth, float64(b))
}

// Add records one value. Negative values count as on time and are counted
// apart (Early).
func (h *Hist) Add(v float64) {
	h.dense()
	if h.counts == nil {
		h.counts = make([]uint64, buckets)
	}
	if v < 0 {
		h.early++
		v = 0
	}
	h.counts[bucket(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Count is the number of values recorded.
func (h *Hist) Count() uint64 { return h.n }

// Early is the number of negative values recorded.
func (h *Hist) Early() uint64 { return h.early }

// Max is the largest value recorded.
func (h *Hist) Max() float64 { return h.max }

// Quantile returns the upper edge of the bucket holding quantile q (0..1),
// capped by the largest value; 0 when empty.
func (h *Hist) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.bucketCounts() {
		seen += c
		if seen >= rank {
			return math.Min(upper(b), h.max)
		}
	}
	return h.max
}

// QuantileAmong is Quantile among total values of which h holds the
// largest (the others, not recorded, are 0): how the earliness of a link's
// frames, recorded for the early ones only, is read over all its frames.
func (h *Hist) QuantileAmong(q float64, total uint64) float64 {
	total = max(total, h.n)
	zeros := total - h.n
	rank := max(uint64(math.Ceil(q*float64(total))), 1)
	if rank <= zeros {
		return 0
	}
	return h.Quantile(float64(rank-zeros) / float64(h.n))
}

// Merge adds o's values to h.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.n == 0 {
		return
	}
	h.dense()
	if h.counts == nil {
		h.counts = make([]uint64, buckets)
	}
	for b, c := range o.counts {
		h.counts[b] += c
	}
	for _, bc := range o.wire {
		h.counts[bc[0]] += bc[1]
	}
	h.n += o.n
	h.early += o.early
	h.max = math.Max(h.max, o.max)
}

// dense makes a decoded histogram's buckets whole, before it is added to.
func (h *Hist) dense() {
	if h.wire == nil {
		return
	}
	h.counts = h.bucketCounts()
	h.wire = nil
}

// bucketCounts returns the count of every bucket.
func (h *Hist) bucketCounts() []uint64 {
	if h.wire == nil {
		return h.counts
	}
	c := make([]uint64, buckets)
	for _, bc := range h.wire {
		c[bc[0]] += bc[1]
	}
	return c
}

// histJSON is the compact wire form: the non-empty buckets only.
type histJSON struct {
	N       uint64      `json:"n"`
	Max     float64     `json:"max"`
	Early   uint64      `json:"early,omitempty"`
	Buckets [][2]uint64 `json:"b,omitempty"` // (bucket, count)
}

// MarshalJSON implements json.Marshaler.
func (h Hist) MarshalJSON() ([]byte, error) {
	j := histJSON{N: h.n, Max: h.max, Early: h.early}
	for b, c := range h.bucketCounts() {
		if c > 0 {
			j.Buckets = append(j.Buckets, [2]uint64{uint64(b), c})
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Hist{n: j.N, max: j.Max, early: j.Early}
	var sum uint64
	for _, bc := range j.Buckets {
		if bc[0] >= buckets {
			return fmt.Errorf("fidelity: histogram bucket %d out of range", bc[0])
		}
		sum += bc[1]
	}
	if sum != j.N {
		return fmt.Errorf("fidelity: histogram counts %d values, says %d", sum, j.N)
	}
	if len(j.Buckets) > 0 {
		h.wire = j.Buckets
	}
	return nil
}

// Summary is a histogram's figures for results.
type Summary struct {
	N   uint64  `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summary returns the histogram's figures.
func (h *Hist) Summary() Summary {
	return Summary{N: h.n, P50: h.Quantile(0.5), P99: h.Quantile(0.99), Max: h.max}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
