// Package node is the actor of one emulated compute node. It runs at most one
// job component at a time (space sharing): on StartRank it opens the rank's
// endpoint, on RankTable it connects the rank to its peers and runs the
// application from nodes/apps, whose traffic leaves through the node's
// shaped egress, and it reports RankConnected and RankDone to the runner.
//
// Malleable applications (apps.Malleable) are also resized: a ResizeRanks
// for a running rank is applied at the application's next safe point (the
// rank switches to the new table, or leaves the job: it hands its data to
// the remaining ranks, reports RankResized released, then RankDone ok); a
// ResizeRanks for a rank started by StartRank for a grow makes it join the
// running job (Endpoint.Join). Every rank reports its part with
// RankResized (resize_s in scenario seconds, safe_points) and an event
// "rank_resized" with the bytes it moved; the application's voluntary
// release goes to the runner as AppRelease.
package node
