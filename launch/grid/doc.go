// Package grid runs the docker and netns backends of koala-emu: every actor
// host (the scheduler or malleability manager, the information service,
// each cluster manager, each compute node, each runner site) runs
// `koala-emu node` in its own container (DockerPlatform) or as a process in
// its own network namespace (NetnsPlatform), and the koala-emu process that
// started the run (the launcher) drives them. The role actors are built
// from the run's wiring.Spec (carried in the Grid) exactly as on the inproc
// backend; a host only finds its peers' PIDs through the membership.
//
// A run (Run):
//
//  1. The platform (DockerPlatform, NetnsPlatform; the tests use processes
//     on 127.0.0.1) builds or finds the image, or the namespaces, and
//     creates the run's network: a /24 per cluster. It records the run's
//     owner (launch/owner: Docker labels, or a record file for netns) so
//     that `koala-emu clean` removes the run only once its launcher is gone.
//  2. The launcher starts an actor system with protoactor remote on the
//     network's gateway (the recorder and the submitter live there) and
//     joins the membership (memberlist) as its first member and seed.
//  3. Every container starts at once, without readiness waits; each host
//     starts its actor system with remote on its own IP, its control actor
//     ("ctl"), a probe endpoint and, on a node, the node actor, then joins
//     the membership. The launcher counts joins (progress: containers
//     started and joined) and fails early, with the container's output,
//     when one exits. It gives up on a start only when the start stalls
//     (Config.StartStall: no host started and no new high of hosts in the
//     membership), so a slow machine makes the start slow, not failed.
//  4. Shaping: one node host selects the mechanism by probes
//     (netem.Select), two measure the unshaped floor and, for htb, the
//     delay line's own overhead at the delays the matrix needs (the line
//     installed once at both ends, its delay changed in place for each
//     probe with msg.GridSetLink); then every node and cluster-manager host
//     installs its own egress shaping per destination cluster
//     (netem/kernel) and reports what is in effect: the run's manifest.
//  5. Activation, in dependency order: scheduler, information service,
//     runner sites, cluster managers. Each finds its peers through the
//     membership (a cluster manager waits until its nodes have joined;
//     a host that waits exchanges the whole membership with the seeds every
//     few seconds, which repairs a join that gossip dropped).
//     The information service reports its first probe round (GridReady).
//  6. The launcher sets scenario time 0 on every host (GridEpoch) and
//     replays the workload: at each submission time the job's runner site
//     spawns its runner (a malleable runner for a job the Spec lists as
//     malleable: msg.SpawnRunner carries no bounds). Events from every host
//     reach the recorder over remote; at the end the launcher collects the
//     malleability invariant counters of the scheduler host and the runner
//     sites (wiring.KindInvariantReport) and finishes the results as every
//     backend does (wiring.Results.Finish).
//
// Node failures: every cluster manager's host watches the membership for
// its nodes; one that fails or leaves is reported with msg.NodeDown to its
// cluster actor (marks it down, emits node_down) and to every runner site,
// which forwards it to its runners: the runner of a job with a rank there
// fails the job with a reason naming the node. The job is not resubmitted.
// results.json counts node failures and the jobs they failed (extra).
//
// Faults on purpose (the scenario's faults timeline, applied by
// launch/wiring as on every backend; FaultKinds): a kill kills the node's
// host; a degrade or restore tells every node and cluster-manager host of
// the two clusters its new link towards the other (msg.GridSetLink), which
// the host dilates and shapes with its installed model, changing the HTB
// class and the delay line's delay in place; a partition or heal tells
// every such host of the cluster to drop, or stop dropping, its traffic to
// and from the other clusters' subnets (msg.GridCut: nftables table
// koala_cut in its namespace). The cut spares the control plane on
// purpose: TCP and UDP to or from the remoting and gossip ports cross it,
// so memberlist reports nobody dead and jobs across the cut stall, as on
// inproc (docs/docker-netns.md, Faults on purpose). A load or unload tells
// each target node's host its node's loading programs (msg.GridLoad); the
// host hands them to its node actor as inproc does (wiring.LoadNode).
//
// The messages between the launcher and the hosts are in
// actors/msg/grid.proto. The same role actors run as on the inproc backend
// (actors/*), under the same names.
package grid
