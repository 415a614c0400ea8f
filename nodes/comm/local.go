package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ConnectLocal starts one rank per entry of opts in this process, on
// loopback, and connects them into a job: opts[i] becomes rank i (its Rank
// field is overwritten, its JobID defaults to "local"). The endpoints are
// closed once the mesh stands. Tests, benchmarks and the in-process backend
// use it.
func ConnectLocal(ctx context.Context, opts []Options) ([]*Comm, error) {
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
		e, err := Listen(ctx, o, "127.0.0.1:0")
		if err != nil {
			closeEps()
			return nil, err
		}
		eps[i] = e
		peers[i] = Peer{Rank: i, Addr: e.Addr(), Cluster: o.Cluster}
	}
	defer closeEps()
	comms := make([]*Comm, n)
	errs := make([]error, n)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range eps {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			comms[i], errs[i] = eps[i].Connect(cctx, peers)
			if errs[i] != nil {
				cancel()
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
			}
		}
		return nil, fmt.Errorf("comm: ConnectLocal of %d ranks: %w", n, err)
	}
	return comms, nil
}
