//go:build !simonly

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/launch/grid"
)

// binaryName is the name the commands print: this binary holds every
// backend (cmd/koala-emu/node_off.go is the sim-only build).
const binaryName = "koala-emu"

// hostCommands are the commands only a binary with the multi-host backends
// has: node, the entrypoint of their hosts.
func hostCommands(a *app) []*cobra.Command { return []*cobra.Command{newNodeCmd(a)} }

func newNodeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "node --role R --name N --ip A [--cluster C] [--port P] [--gossip-port G]",
		Short: "serve one host of a grid (the entrypoint of the netns and docker backends)",
		Long: fmt.Sprintf(`Serve one actor host of a grid: the entrypoint of every container of the
docker backend and of every process of the netns backend. The launcher starts
it with the run's grid in the environment; it is not meant to be run by hand.

Flags (parsed by the grid package, which owns this contract):
  --role string          scheduler, kis, runner, cluster or node
  --name string          host name, unique in the run
  --ip string            address to listen on and advertise
  --cluster string       cluster of a cluster manager or node; site of a runner host
  --port int             protoactor remote port, -1: any free port (default %d)
  --gossip-port int      memberlist port, -1: any free port (default %d)`, grid.RemotePort, grid.GossipPort),
		Hidden: true,
		// The arguments go to grid.NodeMain as they are, so that the
		// launcher and the host agree on one parser.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if arg == "-h" || arg == "--help" || arg == "-help" {
					return cmd.Help()
				}
			}
			return grid.NodeMain(cmd.Context(), args, a.stderr)
		},
	}
}
