// Package scenarios is the scenario file of the emulator: the YAML schema,
// strict loading (unknown fields and wrong types are errors that name the
// field path and line), validation that collects every error with its full
// field path (for example "topology.clusters[2].nodes"), and expansion of a
// scenario into a Plan: the included clusters, the link matrix (preset plus
// pair overrides), the job list (explicit jobs plus Poisson arrivals at a
// target net utilisation, drawn from the scenario's seed), the background
// load bands and the scheduler policy settings.
//
// Every duration in a Plan is scenario time. The runtime converts to wall
// time with the scenario's time scale and dilation; Plan.Links is the
// undilated matrix (apply netem.Link.Dilate at run time).
//
// The built-in scenarios (*.yaml in this folder) are embedded; see Builtins
// and Open.
package scenarios
