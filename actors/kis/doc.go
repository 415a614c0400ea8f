// Package kis is the KOALA information service: its processor information
// provider keeps the idle nodes of every cluster (background load included)
// as the cluster managers report them, and its network information provider
// measures latency and bandwidth between every available pair of clusters
// with periodic probes through the shaped links. It forwards both to the
// scheduler, whose policies use the measured values, never the configured
// ones.
package kis
