// Package launch runs a scenario plan on a backend. A backend is a value
// (Backend: name, run, calibrate, clean, capabilities) found in one
// explicit registry (Backends, LookupBackend): inproc (every actor in this
// process, links shaped in userspace), netns (every actor host a process
// in its own network namespace), docker (every actor host in its own
// container) and sim (every actor in this process on a virtual clock,
// jobs' executions predicted by a performance model: launch/sim);
// launch/grid drives netns and docker. Check is the one place a
// backend refuses what it cannot do. Every backend builds the roles and
// finishes the results through launch/wiring, so they differ only in where
// an actor lives and how its PID is found. Clean removes what runs left
// whose owner process is gone (launch/owner), or the runs it is told to.
package launch
