package migrate

import (
	"fmt"
	"math"
	"time"
)

// The named parts of a migration's cost (SPEC §6's breakdown).
const (
	PartWriteCheckpoints = "write checkpoints"
	PartNetworkInfo      = "wait for network information"
	PartResourceInfo     = "get new resource information"
	PartSchedule         = "new schedule"
	PartOther            = "other"
	PartRestart          = "restart"
	PartReadRedistribute = "read checkpoints and redistribute"
)

// Part is one named share of a migration's cost.
type Part struct {
	Name     string
	Duration time.Duration
}

// Cost is a migration cost estimate: the parts in the order of a
// migration, and their total.
type Cost struct {
	Total time.Duration
	Parts []Part
}

func sum(parts []Part) Cost {
	c := Cost{Parts: parts}
	for _, p := range parts {
		c.Total += p.Duration
	}
	return c
}

// LinkFunc gives the one-way latency and the bandwidth (bytes/s; 0 means
// unlimited) from the node of old process i to the node of new process j.
type LinkFunc func(old, new int) (latency time.Duration, bandwidth float64)

// Move is what a cost model may look at: the redistribution's bytes per
// (old process, new process) pair, Bytes[i][j] (every row as long as the
// new process count), and the links between the old and the new nodes.
// The caller computes Bytes from the data's distributions (nodes/srs). An
// old and a new process on the same node should report latency 0 and
// bandwidth 0 (unlimited): their bytes do not cross a link.
type Move struct {
	Bytes [][]int64
	Links LinkFunc
}

// CostModel estimates the cost of a migration.
type CostModel interface {
	Name() string
	Estimate(Move) (Cost, error)
}

// WorstCase is the worst-case constant of SPEC §6: 900 s whatever the
// move, in its seven named parts.
type WorstCase struct{}

// Name is "worst-case".
func (WorstCase) Name() string { return "worst-case" }

// Estimate returns WorstCaseParts and their 900 s total.
func (WorstCase) Estimate(Move) (Cost, error) { return sum(WorstCaseParts()), nil }

// WorstCaseParts is SPEC §6's breakdown of the 900 s worst case.
func WorstCaseParts() []Part {
	return []Part{
		{PartWriteCheckpoints, 40 * time.Second},
		{PartNetworkInfo, 90 * time.Second},
		{PartResourceInfo, 120 * time.Second},
		{PartSchedule, 80 * time.Second},
		{PartOther, 10 * time.Second},
		{PartRestart, 60 * time.Second},
		{PartReadRedistribute, 500 * time.Second},
	}
}

// FixedParts is the worst case without its two data-movement parts
// (writing, reading and redistributing the checkpoint): 360 s of waiting
// for information, scheduling and restarting.
func FixedParts() []Part {
	var out []Part
	for _, p := range WorstCaseParts() {
		if p.Name != PartWriteCheckpoints && p.Name != PartReadRedistribute {
			out = append(out, p)
		}
	}
	return out
}

// Predicted predicts the data-movement parts of a migration from the
// bytes each (old, new) pair of processes exchanges and the links between
// them, and adds fixed parts for the rest.
//
// Model:
//   - write checkpoints: each old process writes what it holds (the sum of
//     its row of Bytes) to its own disk, all at once; the part is the
//     largest of those writes over DiskBandwidth, or zero when
//     DiskBandwidth is 0 (SPEC §6: writing to local disk was negligible).
//   - read checkpoints and redistribute: every pair's transfer starts at
//     once; an old node's outgoing transfers share its link, so old node i
//     finishes after the largest latency among its pairs plus the sum over
//     its pairs of bytes / bandwidth (each byte occupies the shared link
//     for 1/bandwidth of that pair). The part is the last old node to
//     finish. Receivers are not a bottleneck: as in the emulator's shaping
//     (per-node egress), a new node may take bytes from several old nodes
//     at once at each one's rate. A pair with no bytes costs nothing, not
//     even its latency; a bandwidth of 0 is unlimited.
//   - then Fixed, in order (FixedParts in the registry: SPEC §6's
//     non-data parts, 360 s; a caller that measures its own overheads
//     passes those instead).
type Predicted struct {
	Fixed         []Part
	DiskBandwidth float64 // bytes/s of writing a checkpoint locally; 0 negligible
}

// Name is "predicted".
func (Predicted) Name() string { return "predicted" }

// Estimate predicts the cost of mv.
func (p Predicted) Estimate(mv Move) (Cost, error) {
	if math.IsNaN(p.DiskBandwidth) || p.DiskBandwidth < 0 {
		return Cost{}, fmt.Errorf("migrate: predicted cost: DiskBandwidth must be >= 0, got %v", p.DiskBandwidth)
	}
	for k, f := range p.Fixed {
		if f.Duration < 0 {
			return Cost{}, fmt.Errorf("migrate: predicted cost: Fixed[%d] (%s) is negative: %v", k, f.Name, f.Duration)
		}
	}
	var write, read float64 // seconds
	width := -1
	for i, row := range mv.Bytes {
		if width >= 0 && len(row) != width {
			return Cost{}, fmt.Errorf("migrate: predicted cost: Bytes[%d] has %d new processes, Bytes[0] has %d", i, len(row), width)
		}
		width = len(row)
		var held int64
		var lat, busy float64
		for j, b := range row {
			if b < 0 {
				return Cost{}, fmt.Errorf("migrate: predicted cost: Bytes[%d][%d] is negative: %d", i, j, b)
			}
			if b == 0 {
				continue
			}
			if mv.Links == nil {
				return Cost{}, fmt.Errorf("migrate: predicted cost: Links is nil and Bytes[%d][%d] = %d", i, j, b)
			}
			l, bw := mv.Links(i, j)
			if l < 0 || math.IsNaN(bw) || bw < 0 {
				return Cost{}, fmt.Errorf("migrate: predicted cost: link (%d, %d) has latency %v and bandwidth %v", i, j, l, bw)
			}
			held += b
			lat = max(lat, l.Seconds())
			if bw > 0 {
				busy += float64(b) / bw
			}
		}
		if p.DiskBandwidth > 0 {
			write = max(write, float64(held)/p.DiskBandwidth)
		}
		if held > 0 {
			read = max(read, lat+busy)
		}
	}
	parts := []Part{{PartWriteCheckpoints, seconds(write)}}
	parts = append(parts, p.Fixed...)
	parts = append(parts, Part{PartReadRedistribute, seconds(read)})
	return sum(parts), nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
