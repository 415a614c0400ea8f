package batch

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// Jobs on node actors (Execution OnNodes).
//
// Nodes. A batch cluster of C processors has C node actors of one
// processor each, and a job of P processors runs as P processes, one on
// each of P nodes: the planner counts processors, the SWF logs count
// processors (the SP2 machines of the built-in traces had one a node),
// and a node of one processor holds exactly one process, so nothing is
// rounded up to whole nodes and the plan and the nodes never disagree on
// what fits. Each process is its node's one rank, using all of its
// processor: apps.Compute, computing the job's runtime at the cluster's
// speed (the node's), over the time scale.
//
// Processes. A compute-only job's processes exchange nothing, so each is
// rank 0 of a communicator of its own (StartRank of size 1, a rank table
// of itself): a table of the job's P ranks on every process would cost P²
// peer entries for nothing (12.6 million over the three days of
// realloc-heterogeneous-dedicated, about half a kilobyte each in
// nodes/comm). A process starts as soon as its node is ready (its
// RankTable on its RankReady). The job ends when the last of its
// processes has reported RankDone: completed when each ended by itself,
// failed when one reported an error (the manager then stops the others).
// Its end comes from the nodes' reports, never from a timer of the
// manager.
//
// Time. A job's run is anchored at its start in the plan: what the
// emulation adds before its processes compute is not charged to it. Its
// processes are launched as soon as the plan starts it, unless nodes it
// needs are still held by processes that have not reported yet (a few
// milliseconds of wall time); they then compute the runtime less that wait
// (processes.credit). The job starts (EventStart: its startup in the
// results is the wait and the launch) when its last process runs. The
// manager stops the processes (AbortRank) at the job's walltime from its
// start plus the time its launch took, from its StartRanks to its last
// process running (the deadline is armed then, for the walltime less the
// wait): at a time scale of 10,000 a millisecond of launching is 10 s of
// scenario time, and the hundreds of processes of a large job take
// milliseconds to start on two cores. The stop kills the job if it ends a
// process still computing; a process that had ended by itself (its report
// on its way, late by the host's latency, not the job's) reports its
// result, and a job whose processes all did so completed. A job whose
// walltime passed while it waited for nodes is killed without a process
// if its runtime exceeds its walltime (its processes would be cut at
// once); otherwise its processes compute what is left, nothing, and are
// not stopped. The plan keeps its own kill rule (policy.KillTime of the
// job's start): it counts the job's processors free from then.
//
// Plan and nodes. A job holds processors in the plan from its start to its
// end or the plan's walltime, and nodes from its launch to its end, which
// comes a little later (the launch, the reports). Its nodes come back all
// at once at its end, so no two jobs' records (start to end) ever hold one
// node (the results' Batsim export numbers them). A job the plan starts
// while the nodes it needs are still held waits for them (pool.waiting; a
// job that fits goes ahead of a wider one, in the plan's start order), and
// the wait comes off its computation, so a lag does not grow from job to
// job.

// pool is the node actors of a batch cluster: which are free, the job
// whose process each of the others runs, and the jobs waiting for nodes.
type pool struct {
	nodes   []Node
	index   map[string]int      // a node's position in nodes, by name
	free    []int               // free nodes; the last one freed is taken first
	holder  []*running          // by node: the job whose process it runs, nil when free
	jobs    map[string]*running // the jobs holding nodes or waiting for them, by ID
	waiting []*running          // jobs waiting for free nodes, in the plan's start order
	timers  map[*running]func() // the walltimes of the jobs whose processes run
}

func newPool(nodes []Node) *pool {
	p := &pool{nodes: nodes, index: make(map[string]int, len(nodes)), holder: make([]*running, len(nodes)),
		jobs: map[string]*running{}, timers: map[*running]func(){}}
	for i := len(nodes) - 1; i >= 0; i-- {
		p.free = append(p.free, i) // node 0 is taken first
	}
	for i, n := range nodes {
		p.index[n.Name] = i
	}
	return p
}

// stopTimers stops the walltimes of the running processes (the manager
// stops).
func (p *pool) stopTimers() {
	for _, stop := range p.timers {
		stop()
	}
}

// of returns the node a process's report names and the job it runs there,
// if the report is of that job's process there.
func (p *pool) of(node, job string) (int, *running) {
	i, ok := p.index[node]
	if !ok || p.holder[i] == nil || p.holder[i].job.GetId() != job {
		return -1, nil
	}
	return i, p.holder[i]
}

// processOf returns the node a process's message names and the job whose
// process runs there, if the message is of it (none OnTimers).
func (m *manager) processOf(node, job string) (int, *running) {
	if m.pool == nil {
		return -1, nil
	}
	return m.pool.of(node, job)
}

// processes are a job's processes on its nodes.
type processes struct {
	nodes []int // the nodes they run on (nil while the job waits for nodes)
	// credit is how long the job waited for nodes after its start: its
	// processes compute that much less, and their walltime is that much
	// shorter.
	credit    time.Duration
	connected int // processes running (RankConnected)
	live      int // processes not reported yet
	// stopped says the manager stopped the processes, and how the job
	// ends then (killed at its walltime, or failed with a process).
	stopped *ending
	// cut says a stop at the walltime ended a process still running (it
	// reported an error): the job was killed.
	cut bool
	fid [][]byte // the reported processes' fidelity figures
}

// deadline is the walltime of a job's processes (processes.credit).
type deadline struct{ r *running }

// unlaunched ends a job killed before its processes were launched.
type unlaunched struct{ r *running }

// launch starts a job's processes on free nodes, or queues it until enough
// are free.
func (m *manager) launch(r *running) {
	r.procs = &processes{}
	m.pool.jobs[r.job.GetId()] = r
	m.pool.waiting = append(m.pool.waiting, r)
	m.dispatch()
}

// dispatch starts the processes of the waiting jobs that fit in the free
// nodes, in start order. A job that fits goes ahead of a wider one still
// waiting: the plan holds the wider one's processors, so the nodes it
// lacks are held by processes that have not reported yet, and it gets them
// when they have.
func (m *manager) dispatch() {
	p := m.pool
	kept := p.waiting[:0]
	for _, r := range p.waiting {
		n := int(r.job.GetProcs())
		if len(p.free) < n {
			kept = append(kept, r)
			continue
		}
		r.procs.credit = m.now() - r.start
		wall, run := time.Duration(r.job.GetWalltimeNs()), time.Duration(r.job.GetRuntimeNs())
		if r.procs.credit >= wall && run > wall {
			// Its processes would be cut at once. It ends in a handler of
			// its own: dispatch may run inside a plan (start), which must
			// not plan again.
			r.procs.stopped = &ending{killed: true, note: "it waited for nodes past it"}
			r.procs.cut = true
			m.send(m.self, &unlaunched{r: r})
			continue
		}
		r.procs.nodes = append([]int(nil), p.free[len(p.free)-n:]...)
		p.free = p.free[:len(p.free)-n]
		r.procs.live = n
		left := max(run-r.procs.credit, 0)
		args := map[string]float64{"runtime_s": left.Seconds()}
		for _, i := range r.procs.nodes {
			p.holder[i] = r
			m.send(p.nodes[i].PID, &msg.StartRank{JobId: r.job.GetId(), Rank: 0, Size: 1, App: apps.ComputeName, Args: args,
				TimeScale: m.cfg.TimeScale, Cluster: m.cfg.Name, Runner: msg.FromPID(m.self)})
		}
	}
	clear(p.waiting[len(kept):])
	p.waiting = kept
}

func (m *manager) send(pid *actor.PID, message any) { m.cfg.Env.System.Root.Send(pid, message) }

// ready starts a process whose node is ready (its rank table: itself), or
// counts it reported when its node could not start it.
func (m *manager) ready(x *msg.RankReady) {
	i, r := m.processOf(x.GetNode(), x.GetJobId())
	if r == nil {
		return
	}
	if x.GetError() != "" {
		m.pool.holder[i] = nil // no process runs there
		m.reported(r, fmt.Sprintf("node %s: %s", x.GetNode(), x.GetError()), nil)
		return
	}
	if r.procs.stopped != nil {
		return // its AbortRank follows the StartRank the node answered
	}
	m.send(m.pool.nodes[i].PID, &msg.RankTable{JobId: r.job.GetId(),
		Peers: []*msg.RankPeer{{Rank: 0, Addr: x.GetAddr(), Cluster: m.cfg.Name}}})
}

// connected counts a running process; with the job's last one the job
// starts (EventStart), its launch is over, and its deadline is armed: its
// walltime less its wait for nodes.
func (m *manager) connected(x *msg.RankConnected) {
	if m.pool == nil {
		return
	}
	r := m.pool.jobs[x.GetJobId()]
	if r == nil || r.procs.stopped != nil {
		return
	}
	r.procs.connected++
	if r.procs.connected < len(r.procs.nodes) {
		return
	}
	m.cfg.Env.Emit(m.cfg.Env.Event(msg.EventStart, m.cfg.Name, r.job.GetId()))
	// A job whose walltime passed while it waited (and whose runtime does
	// not exceed it) computes nothing and is not stopped.
	if left := time.Duration(r.job.GetWalltimeNs()) - r.procs.credit; left > 0 {
		m.pool.timers[r] = m.cfg.Env.After(left, m.self, &deadline{r: r})
	}
}

// deadline stops the processes of a job still running at its walltime.
func (m *manager) deadline(d *deadline) {
	if _, ok := m.pool.timers[d.r]; !ok {
		return
	}
	delete(m.pool.timers, d.r)
	m.stopProcesses(d.r, ending{killed: true})
}

// processDone is a process's report.
func (m *manager) processDone(x *msg.RankDone) {
	i, r := m.processOf(x.GetNode(), x.GetJobId())
	if r == nil {
		return
	}
	m.pool.holder[i] = nil // its node comes back with the job's others, at the job's end
	failure := ""
	if !x.GetOk() {
		failure = fmt.Sprintf("node %s: %s", x.GetNode(), x.GetError())
	}
	m.reported(r, failure, x.GetFidelity())
}

// reported counts a process of job r ended (failure says how, "" when it
// completed); the job ends with its last process.
func (m *manager) reported(r *running, failure string, fid []byte) {
	r.procs.live--
	if len(fid) > 0 {
		r.procs.fid = append(r.procs.fid, fid)
	}
	switch {
	case failure != "" && r.procs.stopped == nil:
		m.stopProcesses(r, ending{failure: failure})
	case failure != "" && r.procs.stopped.killed:
		r.procs.cut = true
	}
	if r.procs.live == 0 {
		m.ended(r)
	}
}

// ended ends a job whose processes have all reported: its nodes come back,
// and if the plan still holds its processors (its walltime in the plan has
// not come) the plan moves on.
func (m *manager) ended(r *running) {
	p := m.pool
	for _, i := range r.procs.nodes {
		p.holder[i] = nil
		p.free = append(p.free, i)
	}
	delete(p.jobs, r.job.GetId())
	if stop, ok := p.timers[r]; ok {
		stop()
		delete(p.timers, r)
	}
	how := ending{}
	if r.procs.stopped != nil && (!r.procs.stopped.killed || r.procs.cut) {
		how = *r.procs.stopped
	}
	if f, err := fidelity.MergeEncoded(r.procs.fid); err == nil {
		how.fidelity = f
	}
	planned := m.running[r.job.GetId()] == r
	m.finish(r, how)
	if planned {
		m.replan()
	}
	m.dispatch()
}

// stopProcesses stops a job's processes (AbortRank) and says how the job
// ends once they have reported.
func (m *manager) stopProcesses(r *running, how ending) {
	if r.procs.stopped != nil {
		return
	}
	r.procs.stopped = &how
	reason := "killed at its walltime"
	if how.failure != "" {
		reason = "another process of the job failed: " + how.failure
	}
	for _, i := range r.procs.nodes {
		if m.pool.holder[i] == r {
			m.send(m.pool.nodes[i].PID, &msg.AbortRank{JobId: r.job.GetId(), Reason: reason})
		}
	}
}
