// Package cachetest keeps a test binary's host figures out of the user's
// cache: a test that runs the launcher with auto dilation probes the host
// while the tests themselves load it, and the figures it keeps
// (fidelity/hostprobe, KOALA_EMU_CACHE) would then choose the dilation of
// the user's next real run.
package cachetest

import (
	"fmt"
	"os"
	"testing"
)

// Run runs the tests with KOALA_EMU_CACHE set to a directory of their own
// (unless the caller set it already), removes it, and returns m.Run's exit
// code: `func TestMain(m *testing.M) { os.Exit(cachetest.Run(m)) }`.
func Run(m *testing.M) int {
	if os.Getenv("KOALA_EMU_CACHE") != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "koala-emu-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachetest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("KOALA_EMU_CACHE", dir); err != nil {
		fmt.Fprintln(os.Stderr, "cachetest:", err)
		return 1
	}
	return m.Run()
}
