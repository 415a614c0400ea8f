package scenarios

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/koala-emu/koala-emu/netem"
)

// Independent random streams per concern, all from the scenario's seed, so
// that changing one part of a scenario (say, the request type) does not move
// the arrival times or the job sizes.
const (
	streamArrivals uint64 = 0x6172726976616c73 // "arrivals"
	streamSizes    uint64 = 0x73697a6573000000 // "sizes"
	streamClusters uint64 = 0x636c757374657273 // "clusters"
	streamApps     uint64 = 0x6170707300000000 // "apps"
	// streamMalleable decides which generated jobs are malleable, so that
	// workload.malleable.fraction moves nothing else.
	streamMalleable uint64 = 0x6d616c6c6561626c // "malleabl"
)

func newRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// Expand applies the overrides, validates (returning Errors on failure) and
// builds the Plan: included clusters, link matrix, background bands, policy
// settings, and the job list (explicit jobs plus generated Poisson arrivals
// over [0, duration)).
//
// Generated jobs: sizes are drawn uniformly from workload.sizes; fixed and
// non-fixed requests are split into workload.components near-equal parts
// (Split). A fixed request without fixed_clusters gets, per job, a seeded
// choice of distinct clusters that can each hold their part and form no
// unavailable pair.
//
// With workload.applications, each generated job draws its application
// uniformly from the list. With workload.malleable, each generated job is
// malleable with probability fraction (one uniform draw per job from a
// stream of its own, so a job malleable at fraction f stays malleable at any
// larger fraction), bounded by the application's resolved bounds; the others
// are rigid jobs of the same size. Changing the fraction does not move the
// arrivals, the sizes or the applications.
func (s *Scenario) Expand(env Env, o Overrides) (*Plan, error) {
	sc, oerrs := s.apply(o)
	r, errs := sc.resolve(env)
	if errs = append(oerrs, errs...); len(errs) > 0 {
		return nil, errs
	}
	p := &Plan{
		Name:             sc.Name,
		Seed:             r.seed,
		TimeScale:        r.timeScale,
		Dilation:         r.dilation,
		DilationAuto:     r.dilationAuto,
		WallBudget:       r.wallBudget,
		Clusters:         slices.Clone(r.clusters),
		Links:            cloneMatrix(r.links),
		Background:       slices.Clone(r.background),
		Policy:           r.policy,
		Duration:         r.duration,
		NetUtilization:   r.netUtil,
		MeanInterarrival: r.meanGap,
		Faults:           slices.Clone(r.faults),
	}
	if r.batch != nil {
		p.Batch = r.batch
		p.Jobs, p.Duration, p.Clusters = r.batch.planJobs(), r.batch.horizon(), r.batch.planClusters()
		return p, nil
	}
	jobs := slices.Clone(r.explicit)
	if r.duration == 0 {
		for _, j := range jobs {
			p.Duration = max(p.Duration, j.Submit)
		}
	}
	if r.generate {
		gen, err := r.generateJobs()
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, gen...)
	} else {
		p.MeanInterarrival, p.NetUtilization = 0, 0
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("j%04d", i+1)
	}
	p.Jobs = jobs
	return p, nil
}

// generateJobs draws the Poisson arrivals of the workload.
func (r *resolved) generateJobs() ([]Job, error) {
	arr := newRand(r.seed, streamArrivals)
	siz := newRand(r.seed, streamSizes)
	pick := newRand(r.seed, streamClusters)
	apps := newRand(r.seed, streamApps)
	mall := newRand(r.seed, streamMalleable)
	// Under the malleability manager a fixed job's cluster must hold the
	// job within KOALA's share of it.
	place := r.topo
	if r.policy.Malleability != nil {
		place.nodes = make([]int, len(r.topo.nodes))
		for i := range place.nodes {
			place.nodes[i] = r.capOf(i)
		}
	}
	mean := r.meanGap.Seconds()
	end := r.duration.Seconds()
	var jobs []Job
	t := 0.0
	for {
		t += arr.ExpFloat64() * mean
		if t >= end || (r.maxJobs > 0 && len(jobs) >= r.maxJobs) {
			break
		}
		if len(jobs) >= maxGenerated {
			return nil, fmt.Errorf("workload generates more than %d jobs", maxGenerated)
		}
		size := r.sizes[siz.IntN(len(r.sizes))]
		app := r.app
		if len(r.apps) > 0 {
			app = r.apps[apps.IntN(len(r.apps))]
		}
		j := Job{
			Submit:  secs(t),
			App:     app,
			Args:    cloneArgs(r.args),
			Size:    size,
			Request: r.request,
			Files:   cloneFiles(r.files),
		}
		if r.malleable && mall.Float64() < r.fraction {
			b := r.bounds[app] // validation resolved the bounds of every generated application
			j.Malleable, j.Min, j.Max = true, b.Min, b.Max
		}
		if r.request != Flexible {
			parts := Split(size, r.components)
			var at []int
			switch {
			case r.request == Fixed && r.fixed != nil:
				at = r.fixed
			case r.request == Fixed:
				at = place.assign(parts, pick.Perm(len(r.topo.names)))
				if at == nil { // validation guarantees a choice exists
					return nil, fmt.Errorf("workload: no cluster choice for a fixed job of %d nodes in %d components", size, r.components)
				}
			}
			for k, part := range parts {
				c := Component{Size: part}
				if at != nil {
					c.Cluster = r.topo.names[at[k]]
				}
				j.Components = append(j.Components, c)
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func cloneArgs(a map[string]float64) map[string]float64 {
	if a == nil {
		return nil
	}
	out := make(map[string]float64, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

func cloneMatrix(m netem.Matrix) netem.Matrix {
	out := netem.Matrix{Clusters: slices.Clone(m.Clusters), Links: make([][]netem.Link, len(m.Links))}
	for i := range m.Links {
		out.Links[i] = slices.Clone(m.Links[i])
	}
	return out
}
