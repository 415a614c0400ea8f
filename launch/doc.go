// Package launch starts a run's actors on a backend and takes them down
// again: `inproc` (every actor in this process, links shaped by the
// userspace shaper) and `docker` (every actor in its own container, see
// launch/docker). It shapes the links, probes them for the information
// service, replays the workload to runner actors, shows progress and writes
// the results directory. Setup steps undo themselves on failure.
package launch
