package comm

import (
	"context"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// twoClusters is a matrix of clusters a and b: 10 µs inside each, 1 ms and
// 1 MB/s between them.
func twoClusters() netem.Matrix {
	in := netem.Link{Latency: 10 * time.Microsecond}
	across := netem.Link{Latency: time.Millisecond, Bandwidth: 1e6}
	return netem.Matrix{Clusters: []string{"a", "b"}, Links: [][]netem.Link{{in, across}, {across, in}}}
}

// idealJob connects one rank per cluster name, with links m.
func idealJob(t *testing.T, m netem.Matrix, clusters ...string) []*Comm {
	t.Helper()
	opts := make([]Options, len(clusters))
	for i, c := range clusters {
		opts[i] = Options{JobID: "ideal", Cluster: c, Links: m}
	}
	cs, err := ConnectLocal(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Abort(nil)
		}
	})
	return cs
}

func TestIdealCosts(t *testing.T) {
	us := time.Microsecond
	four := idealJob(t, twoClusters(), "a", "a", "b", "b")
	three := idealJob(t, twoClusters(), "a", "b", "b")
	bare := idealJob(t, netem.Matrix{}, "a", "b")
	for _, tc := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"hop across with 1000 bytes: latency and 1 ms of bandwidth", four[0].IdealHop(0, 2, 1000), 2 * time.Millisecond},
		{"hop inside, unlimited bandwidth", four[0].IdealHop(0, 1, 1000), 10 * us},
		{"hop to itself", four[0].IdealHop(1, 1, 1000), 0},
		{"gather on 0: the far ranks' hop", four[0].IdealGather(0, 0), time.Millisecond},
		{"bcast from 0: 0->2 across, then 2->3 inside", four[1].IdealBcast(0, 0), time.Millisecond + 10*us},
		{"bcast from 2: 2->0 across, then 0->1 inside", four[3].IdealBcast(2, 0), time.Millisecond + 10*us},
		{"allreduce of 4: a round inside, a round across", four[2].IdealAllreduce(0), time.Millisecond + 10*us},
		{"allreduce of 3: 0 folds into 1 across, 1 and 2 exchange inside, 1 hands back across", three[0].IdealAllreduce(0), 2 * time.Millisecond},
		{"no matrix: no cost", bare[0].IdealAllreduce(8) + bare[0].IdealGather(0, 8) + bare[0].IdealBcast(0, 8), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
