// Package owner records who started a docker or netns run (process id,
// process start time, host name, run id, start wall time) and decides
// whether that process is still alive, so that `koala-emu clean` removes
// only runs whose launcher is gone: a process id that no longer exists, or
// one the kernel has given to another process since (its start time
// differs). The record travels as Docker labels on a run's containers and
// networks, and as a small JSON file per netns run under RunsDir.
package owner
