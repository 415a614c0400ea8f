// Package netem is the network model of the emulator: links (latency,
// bandwidth, optional jitter and loss), the presets myri10g, gbe and das3, the
// per-node egress plans derived from a cluster-pair matrix, the shapers that
// apply them, the probes that decide which shaper can run here, the manifest
// of what is in effect, and the ping-pong used to calibrate links.
package netem
