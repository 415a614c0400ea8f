// Package hostprobe measures what this machine carries through a backend's
// shaper in real time: small messages per second, payload bytes per second
// and the delay line's wake-up lateness (fidelity.Capacity). The figures
// are kept per machine and backend in the user's cache directory, so later
// runs reuse them; `koala-emu host` shows them and measures them again.
package hostprobe
