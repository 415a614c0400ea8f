// Package node is the actor of one emulated compute node. It runs at most one
// job component at a time (space sharing): on StartRank it opens the rank's
// endpoint, on RankTable it connects the rank to its peers and runs the
// application from nodes/apps, whose traffic leaves through the node's
// shaped egress, and it reports RankConnected and RankDone to the runner.
package node
