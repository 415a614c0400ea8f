// Package netns builds the project's own test hosts out of Linux network
// namespaces: one namespace per emulated compute node, each with an eth0
// veth into a Linux bridge, one /24 per cluster inside a 10.X.0.0/16 (the
// first from 10.77 on that no route or address of the machine overlaps: the
// machine's own network, or another run, may hold 10.77) so that every node
// reaches every other one. The bridge lives in a namespace of
// its own (not the root namespace): the root namespace of a Docker host
// runs bridged traffic through its iptables FORWARD chain (br_netfilter,
// policy DROP), and a private switch namespace keeps the test hosts
// isolated from the machine, touches nothing of the host's configuration
// and is removed in one step.
//
// Every namespace is named koala-<runid>-...; Topology.Close removes what
// Setup created (Setup undoes itself when it fails partway) and Clean
// removes what a crashed run left behind. Topology.Run executes a function
// inside a host's namespace on a locked OS thread; sockets created there
// (listeners, connections) keep working from any goroutine.
//
// CalibrateNetns measures a link matrix over such hosts with a shaping
// mechanism installed in every host's namespace (see calibrate.go).
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and uses only
// private addresses inside namespaces the package created.
package netns
