//go:build simonly

package launch

import "github.com/koala-emu/koala-emu/fidelity/hostprobe"

// multihostBackends are none: this binary (koala-sim) was built with the
// simonly tag, without the netns and docker backends (multihost.go).
func multihostBackends() []Backend { return nil }

// LeftOut is what this binary was built without, for the unknown-backend
// error.
const LeftOut = "; netns and docker are not in this binary (built with -tags simonly): use koala-emu"

// unreachable: without netns and docker, every backend's Clean can look.
func unreachable(error) bool { return false }

// measurer is how a backend's capacity is measured: in process, through
// the userspace shaper (the only shaper of inproc).
func measurer(string) hostprobe.Measurer { return hostprobe.MeasureInproc }

// probeTime is about how long measurer takes.
func probeTime(string) string { return "about 10 s" }
