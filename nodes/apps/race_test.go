//go:build race

package apps

// raceOn: the race detector slows packing and the shaper several times.
const raceOn = true
