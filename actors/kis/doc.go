// Package kis is the KOALA information service: its processor information
// provider keeps the idle nodes of every cluster (background load included)
// and the load on each node (the loading programs that share its
// processors) as the cluster managers report them, and its network
// information provider measures latency and bandwidth between every
// available pair of clusters with periodic probes through the shaped links.
// It forwards both to the scheduler, whose policies use the measured values,
// never the configured ones, and the cluster statuses to the rescheduler
// (migration), which predicts with the nodes' load.
package kis
