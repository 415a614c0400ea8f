// Package scenarios is the scenario file of the emulator: the YAML schema,
// strict loading (unknown fields and wrong types are errors that name the
// field path and line), validation that collects every error with its full
// field path (for example "topology.clusters[2].nodes"), and expansion of a
// scenario into a Plan: the included clusters, the link matrix (preset plus
// pair overrides), the job list (explicit jobs plus Poisson arrivals at a
// target net utilisation, drawn from the scenario's seed), the background
// load bands and the scheduler policy settings.
//
// Malleability (SPEC §4): workload.applications mixes the generated jobs'
// applications uniformly, workload.malleable makes a seeded share of them
// malleable within per-application bounds (explicit jobs take malleable, min
// and max), and policy.malleability configures the malleability manager
// (approach, policy, thresholds), which then replaces the co-allocating
// scheduler. Such scenarios model every processor as a single-processor node
// (processors: 1), so job sizes count processors. What the package must know
// of the applications' profiles comes in through Env, so that it depends on
// no actor package.
//
// dilation is a factor >= 1 or auto, and wall_budget (a Go duration or
// seconds) may replace time_scale: what the scenario leaves to the launcher
// shows in Plan.DilationAuto and Plan.WallBudget, and the launcher fixes it
// with Plan.Resolve. Every duration and count is range-checked (the Max*
// constants) so that nothing overflows time.Duration or int32, and what
// Validate accepts Expand turns into a Plan.
//
// Every duration in a Plan is scenario time. The runtime converts to wall
// time with the scenario's time scale and dilation; Plan.Links is the
// undilated matrix (apply netem.Link.Dilate at run time).
//
// A batch grid (SPEC §5, batch.go) is a scenario with a batch section in
// place of topology, workload, policy and faults: batch clusters, the SWF
// traces that feed them (read and checked by package swf when the scenario
// is validated, a malformed trace being one error naming its file, line and
// field), the local share and the reallocation; Plan.Batch carries it.
//
// The built-in scenarios (*.yaml in this folder) are embedded, with the
// trace excerpts they replay (traces/); see Builtins and Open.
package scenarios
