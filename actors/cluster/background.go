package cluster

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Background keeps the load of local users inside a band [Min, Max] of the
// cluster's nodes, as on DAS-3 where local users bypass KOALA. Every decision
// is drawn from a seeded generator, so runs replay.
//
// Rule: at each tick the generator draws a target in [Min, Max]; while the
// nodes held or wanted by local jobs are below the target it submits local
// jobs of 1..MaxJobNodes nodes with exponential durations of mean MeanJob.
// Above the band it submits nothing and lets jobs end.
type Background struct {
	Min, Max    float64
	MeanJob     time.Duration
	MaxJobNodes int
	rng         *rand.Rand
	next        int
}

// NewBackground returns a generator; a zero band disables it.
func NewBackground(minFrac, maxFrac float64, meanJob time.Duration, maxJobNodes int, seed uint64) *Background {
	if maxJobNodes < 1 {
		maxJobNodes = 1
	}
	if meanJob <= 0 {
		meanJob = 15 * time.Minute
	}
	return &Background{Min: minFrac, Max: maxFrac, MeanJob: meanJob, MaxJobNodes: maxJobNodes,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Enabled reports whether the band asks for any load.
func (b *Background) Enabled() bool { return b != nil && b.Max > 0 }

// Tick returns the local jobs to submit now, given the cluster's capacity and
// the nodes local jobs hold or wait for, each with its duration.
func (b *Background) Tick(capacity, localNodes int) []TimedLocalJob {
	if !b.Enabled() || capacity <= 0 {
		return nil
	}
	target := b.Min + b.rng.Float64()*(b.Max-b.Min)
	want := int(math.Round(target * float64(capacity)))
	var out []TimedLocalJob
	for localNodes < want {
		size := 1 + b.rng.IntN(b.MaxJobNodes)
		if size > want-localNodes {
			size = want - localNodes
		}
		b.next++
		d := time.Duration(b.rng.ExpFloat64() * float64(b.MeanJob))
		if d < time.Second {
			d = time.Second
		}
		out = append(out, TimedLocalJob{LocalJob: LocalJob{ID: "l" + strconv.Itoa(b.next), Nodes: size}, Duration: d})
		localNodes += size
	}
	return out
}

// TimedLocalJob is a local job with its run time.
type TimedLocalJob struct {
	LocalJob
	Duration time.Duration
}
