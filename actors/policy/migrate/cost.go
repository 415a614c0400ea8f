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
//
// Busy says the new nodes are not all idle in the information service's
// last status: the restart, submitted to the scheduler, cannot be placed
// at once (Predicted.Busy).
type Move struct {
	Bytes [][]int64
	Links LinkFunc
	Busy  bool
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
// for information, scheduling and restarting on SPEC §6's testbed. The
// emulated grid pays none of it but the restart (see Grid).
func FixedParts() []Part {
	var out []Part
	for _, p := range WorstCaseParts() {
		if p.Name != PartWriteCheckpoints && p.Name != PartReadRedistribute {
			out = append(out, p)
		}
	}
	return out
}

// Grid is what a migration pays on the emulated grid besides moving its
// checkpoint, from the configuration the rescheduler is given (the plan's
// policy block). Its parts, in the order of a move:
//   - new schedule: the runner submits the restart to the scheduler,
//     which tries a submitted job at once; a job it cannot place waits
//     for its next scan of the queue, ScanPeriod later (policy.scan_period_s);
//   - restart: once the job is placed, the runner waits StartupDelay (the
//     local resource managers' start latency, policy.startup_delay_s)
//     before it starts the new ranks; their start and their connections
//     are messages and loopback connections, not shaped.
//
// SPEC §6's other fixed parts are not paid here: the information service
// pushes every cluster status and link measurement to the rescheduler as
// it changes (no wait for network or resource information), and the
// checkpoint is written to the old node's memory (negligible, as SPEC §6
// measured writing to local disk).
type Grid struct {
	StartupDelay time.Duration
	ScanPeriod   time.Duration
}

// Parts are the grid's parts of a move whose new nodes are idle (busy
// false) or not: new schedule (0, or ScanPeriod) then restart
// (StartupDelay).
func (g Grid) Parts(busy bool) []Part {
	sched := time.Duration(0)
	if busy {
		sched = g.ScanPeriod
	}
	return []Part{{PartSchedule, sched}, {PartRestart, g.StartupDelay}}
}

// Predicted predicts the data-movement parts of a migration from the
// bytes each (old, new) pair of processes exchanges and the links between
// them, and adds the parts that do not move data.
//
// Model:
//   - write checkpoints: each old process writes what it holds (the sum of
//     its row of Bytes) to its own disk, all at once; the part is the
//     largest of those writes over DiskBandwidth, or zero when
//     DiskBandwidth is 0 (SPEC §6: writing to local disk was negligible).
//   - then Grid's parts (new schedule, from Move.Busy, and restart) when
//     Grid is set, and Fixed, in order (parts paid whatever the move; the
//     registry's "predicted" has none: FixedParts are SPEC §6's testbed's
//     360 s, for a caller that models that testbed).
//   - read checkpoints and redistribute: every pair's transfer starts at
//     once; an old node's outgoing transfers share its link, so old node i
//     finishes after the largest latency among its pairs plus the sum over
//     its pairs of bytes / bandwidth (each byte occupies the shared link
//     for 1/bandwidth of that pair). The part is the last old node to
//     finish. Receivers are not a bottleneck: as in the emulator's shaping
//     (per-node egress), a new node may take bytes from several old nodes
//     at once at each one's rate. A pair with no bytes costs nothing, not
//     even its latency; a bandwidth of 0 is unlimited.
type Predicted struct {
	Grid          *Grid
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
	if g := p.Grid; g != nil && (g.StartupDelay < 0 || g.ScanPeriod < 0) {
		return Cost{}, fmt.Errorf("migrate: predicted cost: Grid's StartupDelay (%v) and ScanPeriod (%v) must be >= 0", g.StartupDelay, g.ScanPeriod)
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
	if p.Grid != nil {
		parts = append(parts, p.Grid.Parts(mv.Busy)...)
	}
	parts = append(parts, p.Fixed...)
	parts = append(parts, Part{PartReadRedistribute, seconds(read)})
	return sum(parts), nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
