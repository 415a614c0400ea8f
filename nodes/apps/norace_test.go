//go:build !race

package apps

const raceOn = false
