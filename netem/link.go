package netem

import (
	"fmt"
	"time"
)

// Link is the one-way behaviour of traffic between two emulated nodes.
// Bandwidth is in bytes per second of application payload (what an MPI
// ping-pong with 1 MB messages reports); Latency is one-way.
type Link struct {
	Latency   time.Duration
	Bandwidth float64 // bytes/s; 0 means unlimited
	Jitter    time.Duration
	Loss      float64 // probability in [0,1)
	// Unavailable marks a pair that was never measured (DAS-3 Delft-Leiden):
	// jobs must not span it.
	Unavailable bool
}

// MBps returns the bandwidth in MB/s (1e6 bytes).
func (l Link) MBps() float64 { return l.Bandwidth / 1e6 }

// String renders a link as "561 MB/s, 0.030 ms".
func (l Link) String() string {
	if l.Unavailable {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MB/s, %.3f ms", l.MBps(), float64(l.Latency)/float64(time.Millisecond))
}

// Dilate returns the link as seen under time dilation d: latency x d,
// bandwidth / d. d <= 1 returns the link unchanged.
func (l Link) Dilate(d float64) Link {
	if d <= 1 {
		return l
	}
	l.Latency = time.Duration(float64(l.Latency) * d)
	l.Jitter = time.Duration(float64(l.Jitter) * d)
	if l.Bandwidth > 0 {
		l.Bandwidth /= d
	}
	return l
}

// Matrix is a symmetric link matrix over named clusters. Links[i][i] is the
// intra-cluster link of cluster i.
type Matrix struct {
	Clusters []string
	Links    [][]Link
}

// Index returns the position of a cluster, or -1.
func (m Matrix) Index(name string) int {
	for i, c := range m.Clusters {
		if c == name {
			return i
		}
	}
	return -1
}

// Link returns the link between two clusters.
func (m Matrix) Link(a, b string) (Link, error) {
	i, j := m.Index(a), m.Index(b)
	if i < 0 {
		return Link{}, fmt.Errorf("netem: unknown cluster %q", a)
	}
	if j < 0 {
		return Link{}, fmt.Errorf("netem: unknown cluster %q", b)
	}
	return m.Links[i][j], nil
}

// MaxLatency is the largest latency of an available link under dilation d
// (see Link.Dilate; 0: no link).
func (m Matrix) MaxLatency(d float64) time.Duration {
	var out time.Duration
	for _, row := range m.Links {
		for _, l := range row {
			if !l.Unavailable {
				out = max(out, l.Dilate(d).Latency)
			}
		}
	}
	return out
}

// EgressPlan is what one emulated node applies to its egress: for every
// destination cluster, the rate and the one-way delay.
type EgressPlan struct {
	Node    string
	Cluster string
	To      map[string]Link // destination cluster -> link
}

// PlanFor returns the egress plan of a node in cluster src.
func (m Matrix) PlanFor(node, src string) (EgressPlan, error) {
	i := m.Index(src)
	if i < 0 {
		return EgressPlan{}, fmt.Errorf("netem: unknown cluster %q", src)
	}
	p := EgressPlan{Node: node, Cluster: src, To: make(map[string]Link, len(m.Clusters))}
	for j, dst := range m.Clusters {
		p.To[dst] = m.Links[i][j]
	}
	return p, nil
}
