package fidelity

import "github.com/koala-emu/koala-emu/netem/ptimer"

// Mono returns CLOCK_MONOTONIC in nanoseconds, the clock every process on
// this kernel shares (ptimer.Mono).
func Mono() int64 { return ptimer.Mono() }
