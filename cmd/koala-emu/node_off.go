//go:build simonly

package main

import "github.com/spf13/cobra"

// binaryName is the name the commands print: built with -tags simonly, the
// binary holds the inproc and sim backends only (make build names it
// koala-sim), for the studies that run the simulator thousands of times and
// should not pay the container and netlink libraries' start-up.
const binaryName = "koala-sim"

// hostCommands is empty: without the netns and docker backends there is no
// host to serve.
func hostCommands(*app) []*cobra.Command { return nil }
