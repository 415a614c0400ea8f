package qr

import (
	"fmt"
	"math"
	"time"
)

// Node is what the model needs of the node a process runs on.
type Node struct {
	Speed float64 // flops/s of the process when it has the processor to itself
	Load  int     // loading programs sharing the processor (SPEC §6: busy loops)
}

// LinkFunc gives the one-way latency and the bandwidth (bytes/s; 0 means
// unlimited) between the nodes of ranks i and j.
type LinkFunc func(i, j int) (latency time.Duration, bandwidth float64)

// Predict gives the predicted time of each phase in [from, to) when rank r
// runs on nodes[r].
//
// Model: a phase takes its computation plus its communication, without
// overlap. Computation goes at the pace of the slowest process: the
// largest ProcFlops[r] / (Speed_r / (1 + Load_r)) (a time-shared processor
// gives the application 1/(1+load) of itself, so 10 loading programs make
// computation 11 times slower). Communication: each Comm costs Msgs x the
// largest latency plus Bytes / the smallest bandwidth among the pairs of
// its group (the process row or column); the panel factorisations add up,
// the broadcasts of the process rows run concurrently (the slowest row
// counts), and so do the reductions of the process columns.
func (m *Model) Predict(from, to int, nodes []Node, links LinkFunc) ([]time.Duration, error) {
	if from < 0 || to > len(m.phases) || from > to {
		return nil, fmt.Errorf("qr: predict: phase range [%d, %d) outside [0, %d)", from, to, len(m.phases))
	}
	if len(nodes) != m.p*m.q {
		return nil, fmt.Errorf("qr: predict: %d nodes for %d processes", len(nodes), m.p*m.q)
	}
	for r, nd := range nodes {
		if !(nd.Speed > 0) || math.IsInf(nd.Speed, 0) {
			return nil, fmt.Errorf("qr: predict: nodes[%d].Speed must be a positive number of flops/s, got %v", r, nd.Speed)
		}
		if nd.Load < 0 {
			return nil, fmt.Errorf("qr: predict: nodes[%d].Load must be >= 0, got %d", r, nd.Load)
		}
	}
	if links == nil {
		return nil, fmt.Errorf("qr: predict: links is nil")
	}
	rowG, colG := m.groups(links)
	out := make([]time.Duration, 0, to-from)
	for _, ph := range m.phases[from:to] {
		var compute float64
		for r, f := range ph.ProcFlops {
			compute = max(compute, float64(f)*float64(1+nodes[r].Load)/nodes[r].Speed)
		}
		var panel, bcast, reduce float64
		for pc, c := range ph.Panel {
			panel += colG[pc].cost(c)
		}
		for pr, c := range ph.Bcast {
			bcast = max(bcast, rowG[pr].cost(c))
		}
		for pc, c := range ph.Reduce {
			reduce = max(reduce, colG[pc].cost(c))
		}
		out = append(out, seconds(compute+panel+bcast+reduce))
	}
	return out, nil
}

// Remaining is the predicted time of phases [from, end): what is left of
// the run once phase from starts.
func (m *Model) Remaining(from int, nodes []Node, links LinkFunc) (time.Duration, error) {
	ts, err := m.Predict(from, len(m.phases), nodes, links)
	if err != nil {
		return 0, err
	}
	var s time.Duration
	for _, t := range ts {
		s += t
	}
	return s, nil
}

// group is the worst link of a process row or column.
type group struct {
	latency   float64 // seconds, largest among the pairs
	bandwidth float64 // bytes/s, smallest among the limited pairs; 0 unlimited
}

func (g group) cost(c Comm) float64 {
	t := float64(c.Msgs) * g.latency
	if g.bandwidth > 0 {
		t += float64(c.Bytes) / g.bandwidth
	}
	return t
}

func (m *Model) groups(links LinkFunc) (rows, cols []group) {
	worst := func(ranks []int) group {
		var g group
		for _, a := range ranks {
			for _, b := range ranks {
				if a == b {
					continue
				}
				l, bw := links(a, b)
				g.latency = max(g.latency, l.Seconds())
				if bw > 0 && (g.bandwidth == 0 || bw < g.bandwidth) {
					g.bandwidth = bw
				}
			}
		}
		return g
	}
	for pr := 0; pr < m.p; pr++ {
		var ranks []int
		for pc := 0; pc < m.q; pc++ {
			ranks = append(ranks, pr*m.q+pc)
		}
		rows = append(rows, worst(ranks))
	}
	for pc := 0; pc < m.q; pc++ {
		var ranks []int
		for pr := 0; pr < m.p; pr++ {
			ranks = append(ranks, pr*m.q+pc)
		}
		cols = append(cols, worst(ranks))
	}
	return rows, cols
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
