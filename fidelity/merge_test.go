package fidelity

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// A histogram decoded from JSON keeps only its non-empty buckets until it is
// added to; it answers, encodes and merges as the histogram it came from,
// before and after values are added to it.
func TestDecodedHistActsAsItsSource(t *testing.T) {
	enc := func(h *Hist) string {
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 9))
		var src Hist
		for range r.IntN(30) {
			src.Add(r.NormFloat64() * 0.2)
		}
		var dec Hist
		if err := json.Unmarshal([]byte(enc(&src)), &dec); err != nil {
			t.Fatal(err)
		}
		same := func(when string, a, b *Hist) {
			t.Helper()
			if enc(a) != enc(b) || a.Count() != b.Count() || a.Early() != b.Early() || a.Max() != b.Max() {
				t.Fatalf("seed %d, %s: %s and %s", seed, when, enc(a), enc(b))
			}
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
				if a.Quantile(q) != b.Quantile(q) {
					t.Fatalf("seed %d, %s: quantile %v %v and %v", seed, when, q, a.Quantile(q), b.Quantile(q))
				}
			}
		}
		same("decoded", &src, &dec)
		var a, b Hist
		a.Merge(&src)
		b.Merge(&dec)
		same("merged into an empty one", &a, &b)
		var twice, again Hist
		twice.Merge(&src)
		twice.Merge(&src)
		if err := json.Unmarshal([]byte(enc(&src)), &again); err != nil {
			t.Fatal(err)
		}
		again.Merge(&dec)
		same("merged into a decoded one", &twice, &again)
		v := r.Float64()
		src.Add(v)
		dec.Add(v)
		same("added to", &src, &dec)
	}
}

// randomStats is a rank's figures: computations and frames of a few pairs.
func randomStats(r *rand.Rand) *Stats {
	p := NewProbe()
	for range 1 + r.IntN(3) {
		asked := time.Duration(1+r.IntN(1e6)) * time.Microsecond
		p.Compute(asked, asked, asked+time.Duration(r.NormFloat64()*float64(asked)/20))
	}
	s := p.Snapshot()
	return &s
}

// A blob whose histogram does not add up is refused, naming the rank.
func TestMergeEncodedRefusesBadHistograms(t *testing.T) {
	for i, b := range []string{
		`{"compute_late":{"n":2,"max":0.1,"b":[[3,1]]}}`,
		`{"compute_late":{"n":1,"max":0.1,"b":[[9000,1]]}}`,
		`{"links":{"a>b":{"late":{"n":0,"max":0,"b":[[1,1]]}}}}`,
	} {
		_, err := MergeEncoded([][]byte{randomStats(rand.New(rand.NewPCG(1, 1))).Encode(), []byte(b)})
		if err == nil || !strings.HasPrefix(err.Error(), "fidelity: rank 1") {
			t.Errorf("case %d: %v, want an error naming rank 1", i, err)
		}
	}
}

// A batch job's processes: hundreds of ranks with one computation each.
func BenchmarkMergeEncodedProcesses(b *testing.B) {
	blobs := make([][]byte, 430)
	for i := range blobs {
		p := NewProbe()
		p.Compute(time.Second, time.Second, time.Second+time.Duration(i)*time.Microsecond)
		s := p.Snapshot()
		blobs[i] = s.Encode()
	}
	for b.Loop() {
		if _, err := MergeEncoded(blobs); err != nil {
			b.Fatal(err)
		}
	}
}
