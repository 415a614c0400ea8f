// Package docker is the container side of koala-emu's docker backend: it
// builds the one koala-emu image, gives every run its own Docker network
// with a subnet per cluster, starts the actor hosts (scheduler, information
// service, cluster managers, compute nodes, runners) as containers from that
// image, and removes everything again.
//
// Containers and image builds go through github.com/testcontainers/
// testcontainers-go; listing, killing, stats and label-based removal use the
// Docker client of the same provider. Testcontainers' reaper (Ryuk) needs an
// image pull, which is not possible here, so the package disables it (see
// DisableReaper) and cleans up itself: every container and network of a run
// carries the label koala-emu.run=<run id>, Run.Close removes them by that
// label, ListRuns lists every run on the daemon (with its labels: the
// owner of the run, see launch/owner) and CleanRun removes one run: the
// `koala-emu clean` command (launch.Clean) removes those whose owner is
// gone.
//
// Typical use, with Ctrl-C handled:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	image, err := docker.BuildImage(ctx, docker.ImageOptions{Binary: exe})
//	...
//	run, err := docker.NewRun(ctx, docker.Options{Image: image, Clusters: clusters, Progress: bar})
//	...
//	defer func() {
//		// ctx may be cancelled by now: clean up with a fresh one.
//		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
//		defer cancel()
//		if err := run.Close(cctx); err != nil { ... }
//	}()
//	nodes, err := run.Start(ctx, specs) // removes what it started if it fails
//
// Addressing: a run gets one bridge network 10.X.0.0/16 (X picked free in
// 200..250). Inside it, 10.X.0.0/24 holds the control plane (scheduler,
// information service, runners without a cluster) and cluster i of
// Options.Clusters gets 10.X.(i+1).0/24. Every container has a fixed IP in
// its subnet, so a node can shape its egress per destination cluster by
// destination prefix. (Docker's bridge driver accepts one subnet per
// network, so the cluster subnets are /24 slices of the run's /16 rather
// than separate IPAM pools; all containers share one L2 segment.)
package docker
