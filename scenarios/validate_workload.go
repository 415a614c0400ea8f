package scenarios

// This file validates the workload: applications, requests, arrivals,
// background load, input files and explicit jobs.

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

func (v *validator) app(path, name string, env Env) {
	switch {
	case name == "":
		v.add(path, "is required")
	case !known(env.Apps, name):
		v.add(path, "unknown application %q (known: %s)", name, sortedList(env.Apps))
	}
}

func (v *validator) args(path string, args map[string]float64) {
	for _, k := range sortedKeys(args) {
		if k == "" {
			v.add(path, "argument names must not be empty")
		} else if !finite(args[k]) {
			v.add(path+"."+k, "must be a finite number")
		}
	}
}

// clusterRef checks a cluster name used by the workload: it must be listed
// and included. It returns the included index or -1.
func (v *validator) clusterRef(path, name string, s *Scenario, r *resolved) int {
	if name == "" {
		v.add(path, "is required")
		return -1
	}
	if i := r.topo.index(name); i >= 0 {
		return i
	}
	for _, c := range s.Topology.Clusters {
		if c.Name == name {
			v.add(path, "cluster %q is not included in this scenario", name)
			return -1
		}
	}
	v.add(path, "unknown cluster %q", name)
	return -1
}

func (v *validator) files(path string, fs []FileSpec, s *Scenario, r *resolved) []File {
	var out []File
	names := map[string]int{}
	for i, f := range fs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if f.Name == "" {
			v.add(p+".name", "is required")
		} else if first, dup := names[f.Name]; dup {
			v.add(p+".name", "duplicate file name %q (also %s[%d])", f.Name, path, first)
		} else {
			names[f.Name] = i
		}
		if !finite(f.SizeMB) || f.SizeMB <= 0 {
			v.add(p+".size_mb", "must be greater than 0, got %g", f.SizeMB)
		} else if f.SizeMB > MaxFileMB {
			v.add(p+".size_mb", "must be at most %g (1 TB), got %g", float64(MaxFileMB), f.SizeMB)
		}
		if len(f.Replicas) == 0 {
			v.add(p+".replicas", "must name at least one cluster holding the file")
		}
		seen := map[string]bool{}
		for j, c := range f.Replicas {
			rp := fmt.Sprintf("%s.replicas[%d]", p, j)
			v.clusterRef(rp, c, s, r)
			if seen[c] {
				v.add(rp, "cluster %q named twice", c)
			}
			seen[c] = true
		}
		out = append(out, File{Name: f.Name, Size: int64(math.Round(f.SizeMB * 1e6)), Replicas: slices.Clone(f.Replicas)})
	}
	return out
}

// fits checks that a job of the given size and request type can ever be
// placed on the included platform and returns the reason when not.
func (r *resolved) fits(size int, request string, components int) string {
	switch request {
	case Flexible:
		if most, on := r.topo.largest(); size > most {
			return fmt.Sprintf("%d exceeds the largest possible allocation (%d nodes on %s)", size, most, strings.Join(on, ", "))
		}
	default:
		parts := Split(size, components)
		if parts == nil {
			return fmt.Sprintf("%d nodes cannot be split into %d components", size, components)
		}
		if r.topo.assign(parts, r.topo.inOrder()) == nil {
			return fmt.Sprintf("%d exceeds the largest possible allocation: %d components of %s nodes fit no set of %d distinct clusters without an unavailable pair",
				size, components, joinInts(parts), components)
		}
	}
	return ""
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "+")
}

func (v *validator) workload(s *Scenario, env Env, r *resolved, topoOK bool) {
	w := &s.Workload
	mall := r.policy.Malleability != nil
	// The applications of generated jobs: application or applications.
	var genApps []string // known names only
	var genPaths []string
	switch {
	case w.Application != "" && w.Applications != nil:
		v.add("workload.applications", "give application or applications, not both")
	case w.Applications != nil:
		if len(w.Applications) == 0 {
			v.add("workload.applications", "must name at least one application (leave it out to use application)")
		}
		if w.Arrivals == nil {
			v.add("workload.applications", "applies to generated jobs (give arrivals); explicit jobs name their application")
		}
		seen := map[string]int{}
		for i, a := range w.Applications {
			ap := fmt.Sprintf("workload.applications[%d]", i)
			if first, dup := seen[a]; dup {
				v.add(ap, "application %q named twice (also workload.applications[%d]); the mix is uniform", a, first)
				continue
			}
			seen[a] = i
			n0 := len(v.errs)
			if v.app(ap, a, env); len(v.errs) == n0 {
				genApps, genPaths = append(genApps, a), append(genPaths, ap)
			}
		}
		r.apps = w.Applications
	case w.Application != "":
		n0 := len(v.errs)
		v.app("workload.application", w.Application, env)
		if len(v.errs) == n0 {
			genApps, genPaths = []string{w.Application}, []string{"workload.application"}
		}
	case w.Arrivals != nil:
		v.add("workload.application", "is required for generated jobs (or give applications)")
	}
	r.app = w.Application
	v.args("workload.args", w.Args)
	r.args = w.Args
	r.files = v.files("workload.input_files", w.InputFiles, s, r)

	r.request = w.Request
	if r.request == "" {
		r.request = Flexible
	} else if !slices.Contains(requestKinds, r.request) {
		v.add("workload.request", "unknown request type %q (known: %s)", r.request, strings.Join(requestKinds, ", "))
	}
	r.components = 1
	if w.Components != nil {
		r.components = *w.Components
		switch {
		case r.request == Flexible:
			v.add("workload.components", "applies to fixed and non-fixed requests only; a flexible request gives its total size")
		case r.components < 1:
			v.add("workload.components", "must be at least 1, got %d", r.components)
		case topoOK && r.components > len(r.topo.names):
			v.add("workload.components", "%d components need %d distinct clusters; %d included", r.components, r.components, len(r.topo.names))
		case r.topo.cap > 0 && r.components > r.topo.cap:
			v.add("workload.components", "%d components exceed policy.max_clusters %d", r.components, r.topo.cap)
		}
	}
	if mall && r.components > 1 && r.request != Flexible {
		v.add("workload.components", "must be 1 with policy.malleability: the malleability manager does not co-allocate, got %d", r.components)
	}
	componentsOK := r.components >= 1 && (!topoOK || r.components <= len(r.topo.names)) &&
		(r.topo.cap == 0 || r.components <= r.topo.cap) && (!mall || r.components == 1)

	fixedOK := true
	if w.FixedClusters != nil {
		if r.request != Fixed {
			v.add("workload.fixed_clusters", "applies to fixed requests only (workload.request is %s)", r.request)
			fixedOK = false
		} else if len(w.FixedClusters) != r.components {
			v.add("workload.fixed_clusters", "names %d clusters for %d components (workload.components)", len(w.FixedClusters), r.components)
			fixedOK = false
		}
		seen := map[string]bool{}
		for i, c := range w.FixedClusters {
			p := fmt.Sprintf("workload.fixed_clusters[%d]", i)
			j := v.clusterRef(p, c, s, r)
			if j < 0 {
				fixedOK = false
			}
			if seen[c] {
				v.add(p, "cluster %q named twice; components go to distinct clusters", c)
				fixedOK = false
			}
			seen[c] = true
			r.fixed = append(r.fixed, j)
		}
		if fixedOK && topoOK {
			if msg := r.unavailablePair(r.fixed); msg != "" {
				v.add("workload.fixed_clusters", "%s", msg)
				fixedOK = false
			}
		}
		if !fixedOK || r.request != Fixed {
			r.fixed = nil
		}
	}

	// Generated arrivals.
	if w.Arrivals == nil && len(w.Jobs) == 0 {
		v.add("workload", "give arrivals (generated jobs), jobs (an explicit list), or both")
	}
	before := len(v.errs)
	r.duration = v.seconds(r, "workload.duration_s", w.DurationS, false)
	durationBad := len(v.errs) > before // said already: no second word on it
	if w.MaxJobs < 0 {
		v.add("workload.max_jobs", "must not be negative (0 means no cap), got %d", w.MaxJobs)
	} else {
		v.atMost("workload.max_jobs", w.MaxJobs, maxGenerated)
	}
	r.maxJobs = w.MaxJobs
	sizesOK := true
	for i, size := range w.Sizes {
		p := fmt.Sprintf("workload.sizes[%d]", i)
		if size < 1 {
			v.add(p, "must be at least 1, got %d", size)
			sizesOK = false
			continue
		}
		if !v.atMost(p, size, MaxNodes*MaxClusters) {
			sizesOK = false
			continue
		}
		if !topoOK || !componentsOK || !slices.Contains(requestKinds, r.request) {
			continue
		}
		if mall {
			at := -1
			if r.fixed != nil {
				at = r.fixed[0]
			}
			if msg := r.capFits(size, at); msg != "" {
				v.add(p, "%s", msg)
				sizesOK = false
			}
		} else if r.fixed != nil {
			for k, part := range Split(size, r.components) {
				if part > r.topo.nodes[r.fixed[k]] {
					v.add(p, "%d exceeds the largest possible allocation: component %d (%d nodes) does not fit %s (%d nodes)",
						size, k, part, r.topo.names[r.fixed[k]], r.topo.nodes[r.fixed[k]])
					sizesOK = false
					break
				}
			}
		} else if msg := r.fits(size, r.request, r.components); msg != "" {
			v.add(p, "%s", msg)
			sizesOK = false
		}
	}
	r.sizes = w.Sizes
	v.malleableWorkload(s, env, r, genApps, genPaths)
	if a := w.Arrivals; a != nil {
		r.generate = true
		if len(w.Sizes) == 0 {
			v.add("workload.sizes", "generated arrivals need at least one job size")
			sizesOK = false
		}
		if r.duration <= 0 && !durationBad {
			v.add("workload.duration_s", "generated arrivals need a duration greater than 0")
		}
		switch {
		case (a.NetUtilization == nil) == (a.MeanInterarrivalS == nil):
			v.add("workload.arrivals", "give exactly one of net_utilization or mean_interarrival_s")
		case a.MeanInterarrivalS != nil:
			r.meanGap = v.seconds(r, "workload.arrivals.mean_interarrival_s", *a.MeanInterarrivalS, true)
		default:
			rho := *a.NetUtilization
			if !finite(rho) || rho <= 0 || rho > 1 {
				v.add("workload.arrivals.net_utilization", "must be in (0, 1], got %g", rho)
				break
			}
			r.netUtil = rho
			if env.Nominal == nil {
				v.add("workload.arrivals.net_utilization", "needs the applications' nominal execution times, which this environment does not provide")
				break
			}
			if !sizesOK || !topoOK || len(genApps) == 0 || len(genApps) != max(len(w.Applications), 1) {
				break // reported elsewhere
			}
			// M = E[size x T(app, size)] / (rho x total nodes), E over the
			// uniform application and size sets (malleable jobs at their
			// initial size).
			var work float64 // node-seconds
			good := true
			for _, app := range genApps {
				for i, size := range w.Sizes {
					d, err := env.Nominal(app, size)
					if err != nil {
						v.add(fmt.Sprintf("workload.sizes[%d]", i), "nominal time of %s on %d nodes: %v", app, size, err)
						good = false
						continue
					}
					if d <= 0 {
						v.add(fmt.Sprintf("workload.sizes[%d]", i), "nominal time of %s on %d nodes is %v; it must be positive", app, size, d)
						good = false
						continue
					}
					work += float64(size) * d.Seconds()
				}
			}
			if good {
				work /= float64(len(w.Sizes) * len(genApps))
				switch gap := work / (rho * float64(r.topo.total())); {
				case !finite(gap) || gap > MaxScenarioSeconds:
					v.add("workload.arrivals.net_utilization", "%g gives a mean inter-arrival time of %.3g s (at most %g s): raise it", rho, gap, float64(MaxScenarioSeconds))
				case secs(gap) <= 0:
					v.add("workload.arrivals.net_utilization", "gives a mean inter-arrival time of 0")
				default:
					r.meanGap = secs(gap)
					r.longest = max(r.longest, r.meanGap)
				}
			}
		}
		if r.meanGap > 0 && r.duration > 0 && w.MaxJobs == 0 {
			if expect := r.duration.Seconds() / r.meanGap.Seconds(); expect > maxGenerated/2 {
				v.add("workload.arrivals", "would generate about %.0f jobs (at most %d): lengthen the inter-arrival time or set max_jobs", expect, maxGenerated/2)
			}
		}
	}

	// Background load.
	r.background = make([]Background, len(r.clusters))
	if b := w.Background; b != nil {
		bg := Background{Min: b.Min, Max: b.Max, MeanJob: DefaultBackgroundJob, MaxJobNodes: DefaultBackgroundMax}
		if !finite(b.Min) || b.Min < 0 {
			v.add("workload.background.min", "must not be negative, got %g", b.Min)
		}
		if !finite(b.Max) || b.Max >= 1 {
			v.add("workload.background.max", "must be below 1, got %g", b.Max)
		} else if b.Max < b.Min {
			v.add("workload.background.max", "must not be below min (%g), got %g", b.Min, b.Max)
		}
		if b.MeanJobS != nil {
			bg.MeanJob = v.seconds(r, "workload.background.mean_job_s", *b.MeanJobS, true)
		}
		if b.MaxJobNodes != nil {
			if *b.MaxJobNodes < 1 {
				v.add("workload.background.max_job_nodes", "must be at least 1, got %d", *b.MaxJobNodes)
			} else {
				v.atMost("workload.background.max_job_nodes", *b.MaxJobNodes, MaxNodes)
			}
			bg.MaxJobNodes = *b.MaxJobNodes
		}
		for i := range r.background {
			r.background[i] = bg
		}
	}

	// Explicit jobs.
	for i, js := range w.Jobs {
		if j, ok := v.job(fmt.Sprintf("workload.jobs[%d]", i), js, s, env, r, topoOK); ok {
			r.explicit = append(r.explicit, j)
		}
	}
}

func (v *validator) job(p string, js JobSpec, s *Scenario, env Env, r *resolved, topoOK bool) (Job, bool) {
	w := &s.Workload
	n0 := len(v.errs)
	j := Job{Submit: v.seconds(r, p+".at_s", js.AtS, false), App: js.Application, Request: js.Request, Size: js.Size}
	if len(v.errs) == n0 && w.DurationS > 0 && js.AtS >= w.DurationS {
		v.add(p+".at_s", "%g is outside the submission window [0, %g) of workload.duration_s", js.AtS, w.DurationS)
	}
	if j.App == "" {
		j.App = w.Application
	}
	if js.Application != "" {
		v.app(p+".application", js.Application, env)
	} else if j.App == "" {
		v.add(p+".application", "is required (workload.application gives no default)")
	}
	v.args(p+".args", js.Args)
	// Args: the workload's (only for one of the workload's applications)
	// overlaid by the job's.
	workloadApp := j.App != "" && (j.App == w.Application || slices.Contains(w.Applications, j.App))
	if workloadApp && len(w.Args) > 0 || len(js.Args) > 0 {
		j.Args = map[string]float64{}
		if workloadApp {
			for k, x := range w.Args {
				j.Args[k] = x
			}
		}
		for k, x := range js.Args {
			j.Args[k] = x
		}
	}
	if js.InputFiles != nil {
		j.Files = v.files(p+".input_files", js.InputFiles, s, r)
	} else {
		j.Files = cloneFiles(r.files)
	}
	if j.Request == "" {
		j.Request = r.request
	} else if !slices.Contains(requestKinds, j.Request) {
		v.add(p+".request", "unknown request type %q (known: %s)", j.Request, strings.Join(requestKinds, ", "))
		return j, false
	}

	sum := 0
	for k, c := range js.Components {
		cp := fmt.Sprintf("%s.components[%d]", p, k)
		if c.Size < 1 {
			v.add(cp+".size", "must be at least 1, got %d", c.Size)
		} else if !v.atMost(cp+".size", c.Size, MaxNodes) {
			continue
		}
		sum += c.Size
	}
	if js.Size < 0 {
		v.add(p+".size", "must be at least 1, got %d", js.Size)
	} else {
		v.atMost(p+".size", js.Size, MaxNodes*MaxClusters)
	}
	if j.Size == 0 {
		j.Size = sum
	}
	if j.Size < 1 && js.Size >= 0 {
		v.add(p+".size", "is required (or give components with sizes)")
	}
	if len(js.Components) > 0 && js.Size > 0 && sum != js.Size {
		v.add(p+".components", "sizes add up to %d, but size is %d", sum, js.Size)
	}
	if r.topo.cap > 0 && len(js.Components) > r.topo.cap {
		v.add(p+".components", "%d components exceed policy.max_clusters %d", len(js.Components), r.topo.cap)
	}

	v.malleableJob(p, js, &j, s, env, r)
	mall := r.policy.Malleability != nil
	if mall && len(js.Components) > 1 {
		v.add(p+".components", "the malleability manager places every job on one cluster (no co-allocation); give at most one component")
	}

	switch j.Request {
	case Flexible:
		if len(js.Components) > 0 {
			v.add(p+".components", "a flexible request gives only its total size; the scheduler chooses the components")
		}
		if mall {
			if topoOK && j.Size >= 1 {
				if msg := r.capFits(j.Size, -1); msg != "" {
					v.add(p+".size", "%s", msg)
				}
			}
		} else if topoOK && j.Size >= 1 {
			if msg := r.fits(j.Size, Flexible, 1); msg != "" {
				v.add(p+".size", "%s", msg)
			}
		}
	case NonFixed:
		for k, c := range js.Components {
			if c.Cluster != "" {
				v.add(fmt.Sprintf("%s.components[%d].cluster", p, k), "a non-fixed request leaves the clusters to the scheduler; use request: fixed to name them")
			}
			j.Components = append(j.Components, Component{Size: c.Size})
		}
		if len(js.Components) == 0 && j.Size >= 1 {
			j.Components = []Component{{Size: j.Size}}
		}
		parts := make([]int, len(j.Components))
		for k, c := range j.Components {
			parts[k] = c.Size
		}
		slices.SortFunc(parts, func(a, b int) int { return b - a })
		if mall {
			if topoOK && len(v.errs) == n0 {
				if msg := r.capFits(j.Size, -1); msg != "" {
					v.add(p+".size", "%s", msg)
				}
			}
		} else if topoOK && len(v.errs) == n0 && r.topo.assign(parts, r.topo.inOrder()) == nil {
			v.add(p+".size", "%d exceeds the largest possible allocation: components of %s nodes fit no set of %d distinct clusters without an unavailable pair",
				j.Size, joinInts(parts), len(parts))
		}
	case Fixed:
		if len(js.Components) == 0 {
			v.add(p+".components", "a fixed request names the cluster and size of every component")
		}
		idx := make([]int, len(js.Components))
		seen := map[string]bool{}
		for k, c := range js.Components {
			cp := fmt.Sprintf("%s.components[%d]", p, k)
			idx[k] = v.clusterRef(cp+".cluster", c.Cluster, s, r)
			if c.Cluster != "" && seen[c.Cluster] {
				v.add(cp+".cluster", "cluster %q named twice; components go to distinct clusters", c.Cluster)
			}
			seen[c.Cluster] = true
			if idx[k] >= 0 && c.Size > r.topo.nodes[idx[k]] {
				v.add(cp+".size", "%d exceeds the %d nodes of %s", c.Size, r.topo.nodes[idx[k]], c.Cluster)
			} else if idx[k] >= 0 && mall && len(js.Components) == 1 {
				if msg := r.capFits(c.Size, idx[k]); msg != "" {
					v.add(cp+".size", "%s", msg)
				}
			}
			j.Components = append(j.Components, Component{Cluster: c.Cluster, Size: c.Size})
		}
		if topoOK {
			if msg := r.unavailablePair(idx); msg != "" {
				v.add(p+".components", "%s", msg)
			}
		}
	}
	return j, len(v.errs) == n0
}

func cloneFiles(fs []File) []File {
	if fs == nil {
		return nil
	}
	out := make([]File, len(fs))
	for i, f := range fs {
		out[i] = File{Name: f.Name, Size: f.Size, Replicas: slices.Clone(f.Replicas)}
	}
	return out
}
