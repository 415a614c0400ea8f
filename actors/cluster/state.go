package cluster

import (
	"errors"
	"fmt"
)

// Owner kinds of a node.
const (
	ownerNone  = ""
	localOwner = "local:"
)

// Nodes is the pure bookkeeping of a cluster's space-shared nodes: each node
// is idle, held by one KOALA job, held by one local job, or down. It is not
// safe for concurrent use; the cluster actor owns it.
type Nodes struct {
	names []string
	owner []string // job id, localOwner+id, or ownerNone
	down  []bool
	queue []LocalJob // FCFS queue of local jobs waiting for nodes
}

// LocalJob is a job of a local user submitted straight to the cluster.
type LocalJob struct {
	ID    string
	Nodes int
}

// ErrNotEnough is returned when a claim asks for more nodes than are idle.
var ErrNotEnough = errors.New("not enough idle nodes")

// NewNodes returns bookkeeping for the named nodes, all idle.
func NewNodes(names []string) *Nodes {
	return &Nodes{names: append([]string(nil), names...), owner: make([]string, len(names)), down: make([]bool, len(names))}
}

// Capacity is the number of nodes that are up.
func (n *Nodes) Capacity() int {
	c := 0
	for _, d := range n.down {
		if !d {
			c++
		}
	}
	return c
}

// Idle is the number of idle nodes that are up.
func (n *Nodes) Idle() int {
	c := 0
	for i, o := range n.owner {
		if o == ownerNone && !n.down[i] {
			c++
		}
	}
	return c
}

// Held counts nodes held by KOALA jobs and by local jobs.
func (n *Nodes) Held() (koala, local int) {
	for i, o := range n.owner {
		switch {
		case o == ownerNone || n.down[i]:
		case len(o) > len(localOwner) && o[:len(localOwner)] == localOwner:
			local++
		default:
			koala++
		}
	}
	return koala, local
}

// QueuedLocal is the number of nodes local jobs wait for.
func (n *Nodes) QueuedLocal() int {
	s := 0
	for _, j := range n.queue {
		s += j.Nodes
	}
	return s
}

// Claim gives count idle nodes to a KOALA job, lowest index first.
func (n *Nodes) Claim(job string, count int) ([]string, error) {
	if job == "" || count < 1 {
		return nil, fmt.Errorf("claim of %d nodes for job %q: bad request", count, job)
	}
	if n.Idle() < count {
		return nil, ErrNotEnough
	}
	return n.take(job, count), nil
}

func (n *Nodes) take(owner string, count int) []string {
	got := make([]string, 0, count)
	for i := range n.owner {
		if len(got) == count {
			break
		}
		if n.owner[i] == ownerNone && !n.down[i] {
			n.owner[i] = owner
			got = append(got, n.names[i])
		}
	}
	return got
}

// Release frees the nodes a job holds (all of them when names is empty) and
// returns how many were freed. A node another job (or a local job) holds is
// left alone, so a late release never frees someone else's node. Whoever
// releases gives a node back only once the node actor holds nothing of the
// job any more (the malleable runner waits for the rank's RankDone, or for
// the node's refusal of it).
func (n *Nodes) Release(job string, names []string) int {
	want := map[string]bool{}
	for _, nm := range names {
		want[nm] = true
	}
	freed := 0
	for i, o := range n.owner {
		if o == job && (len(want) == 0 || want[n.names[i]]) {
			n.owner[i] = ownerNone
			freed++
		}
	}
	return freed
}

// SubmitLocal queues a local job.
func (n *Nodes) SubmitLocal(j LocalJob) { n.queue = append(n.queue, j) }

// StartLocal starts local jobs from the head of the FCFS queue while the head
// fits (no backfilling) and returns the ones started.
func (n *Nodes) StartLocal() []LocalJob {
	var started []LocalJob
	for len(n.queue) > 0 && n.queue[0].Nodes <= n.Idle() {
		j := n.queue[0]
		n.queue = n.queue[1:]
		n.take(localOwner+j.ID, j.Nodes)
		started = append(started, j)
	}
	return started
}

// EndLocal frees a local job's nodes.
func (n *Nodes) EndLocal(id string) int { return n.Release(localOwner+id, nil) }

// MarkDown takes a node out of service and returns the KOALA job it held
// (empty when none).
func (n *Nodes) MarkDown(name string) (job string, ok bool) {
	for i, nm := range n.names {
		if nm == name {
			n.down[i] = true
			o := n.owner[i]
			n.owner[i] = ownerNone
			if len(o) >= len(localOwner) && o[:len(localOwner)] == localOwner {
				o = ""
			}
			return o, true
		}
	}
	return "", false
}
