// Package sweep runs a scenario over a grid of overrides: the research
// workflow's "how does policy P behave as the load or the network changes".
//
// A sweep file (YAML) names a base scenario (a file, relative to the sweep
// file, or a built-in name), a backend, how many cells run at once, fixed
// overrides for every cell (set) and the grid: a list of axes, each a
// scenario field by its path with a list of values or a range, or a list of
// named variants that set several fields at once; seeds is a shorthand for
// an axis on the seed. See testdata/*.yaml.
//
// Paths are dotted field names of the scenario file
// (workload.arrivals.net_utilization); list elements are picked by index
// (topology.links.pairs[0].latency_ms) or by a field's value
// (topology.clusters[name=leiden].speed). An override replaces the value in
// the base scenario's YAML tree; a path the base does not hold is an error
// naming it, unless the scenario schema (scenarios.Scenario, by reflection
// over its yaml tags) says the field is optional (omitempty, a pointer, or
// a key of a map): then it is created. Every cell's scenario is re-read
// with scenarios.Parse, so a wrong type ("two" for a number) is reported
// with the cell and the field path.
//
// The cells are the cartesian product of the axes, the first axis varying
// slowest, seeds last; a cell's ID joins "axis=value" in grid order and
// names its directory. Run executes the cells with a fixed number of
// workers, prints progress, keeps each cell's full results in its own
// directory, marks a finished cell with cell.json (written atomically once
// the cell succeeded), and on a rerun skips marked cells and reruns the
// others from an empty directory. It writes sweep.csv and sweep.json with a
// row per cell: the grid values, then the cell's metrics.
package sweep
