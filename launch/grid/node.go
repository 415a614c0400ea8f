package grid

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/koala-emu/koala-emu/launch/membership"
)

// NodeMain is `koala-emu node`, the entrypoint of every container of the
// docker backend:
//
//	koala-emu node --role R --name N [--cluster C] --ip A [--port P] [--gossip-port G]
//
// with the run's Grid as JSON in the environment variable EnvGrid. It serves
// until ctx ends (SIGTERM) and returns nil after a clean shutdown; after a
// GridStop it idles until then.
func NodeMain(ctx context.Context, args []string, log io.Writer) error {
	// A host of the netns backend first moves into its namespace.
	if err := EnterNetns(); err != nil {
		return err
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	role := fs.String("role", "", "scheduler, kis, runner, cluster or node")
	name := fs.String("name", "", "host name, unique in the run")
	cluster := fs.String("cluster", "", "cluster of a cluster manager or node; site of a runner host")
	ip := fs.String("ip", "", "address to listen on and advertise")
	port := fs.Int("port", RemotePort, "protoactor remote port (-1: any free port)")
	gossip := fs.Int("gossip-port", GossipPort, "memberlist port (-1: any free port)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("node: unexpected arguments %v", fs.Args())
	}
	switch *role {
	case membership.RoleScheduler, membership.RoleKIS, membership.RoleRunner, membership.RoleCluster, membership.RoleNode:
	default:
		return fmt.Errorf("node: --role %q: want scheduler, kis, runner, cluster or node", *role)
	}
	if *name == "" {
		return fmt.Errorf("node: --name is required")
	}
	if net.ParseIP(*ip) == nil {
		return fmt.Errorf("node: --ip %q is not an IP address", *ip)
	}
	raw := os.Getenv(EnvGrid)
	if raw == "" {
		return fmt.Errorf("node: environment variable %s is empty (the launcher sets it)", EnvGrid)
	}
	g, err := DecodeGrid(raw)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	err = Serve(ctx, HostConfig{Name: *name, Role: *role, Cluster: *cluster, IP: *ip, RemotePort: *port, GossipPort: *gossip, Grid: g, Log: log})
	if errors.Is(err, ErrStopped) {
		// The launcher stopped the host and removed the container (the
		// process idled until then rather than exit by itself while Docker
		// removes it).
		return nil
	}
	return err
}
