package comm

import (
	"context"
	"errors"
	"fmt"
)

// ConnectLocal starts one rank per entry of opts in this process, on
// loopback, and connects them into a job: opts[i] becomes rank i (its Rank
// field is overwritten, its JobID defaults to "local"). Connections are
// lazy (see Endpoint.Connect); each endpoint is closed with its Comm.
// Tests, benchmarks and the in-process backend use it.
func ConnectLocal(ctx context.Context, opts []Options) ([]*Comm, error) {
	return ConnectWith(ctx, opts, func(_ int, o Options) (*Endpoint, error) { return Listen(ctx, o, "127.0.0.1:0") })
}

// ConnectWith is ConnectLocal with each rank's endpoint opened by listen
// (rank i, its options with Rank and JobID set): the kernel-shaper host
// probe opens them inside network namespaces.
func ConnectWith(ctx context.Context, opts []Options, listen func(i int, o Options) (*Endpoint, error)) ([]*Comm, error) {
	n := len(opts)
	if n == 0 {
		return nil, errors.New("comm: ConnectLocal: no ranks")
	}
	eps := make([]*Endpoint, n)
	peers := make([]Peer, n)
	closeEps := func() {
		for _, e := range eps {
			if e != nil {
				_ = e.Close()
			}
		}
	}
	for i := range opts {
		o := opts[i]
		o.Rank = i
		if o.JobID == "" {
			o.JobID = "local"
		}
		e, err := listen(i, o)
		if err != nil {
			closeEps()
			return nil, err
		}
		eps[i] = e
		peers[i] = Peer{Rank: i, Addr: e.Addr(), Cluster: o.Cluster}
	}
	comms := make([]*Comm, n)
	for i, e := range eps {
		c, err := e.Connect(ctx, peers)
		if err != nil {
			for _, c := range comms[:i] {
				c.Abort(err)
			}
			closeEps()
			return nil, fmt.Errorf("comm: ConnectLocal of %d ranks: %w", n, err)
		}
		comms[i] = c
	}
	return comms, nil
}
