package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/launch"
)

// TestRunCPUProfile: run --cpuprofile writes a CPU profile of the run (a
// gzipped protocol buffer of CPU nanoseconds, as pprof reads it); a
// profile path that cannot be created fails the run before it starts,
// naming the flag.
func TestRunCPUProfile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	ta := newTestApp()
	ta.backends = launch.Backends()
	if code := ta.exec("run", "das3-smoke", "--backend", "sim", "--quiet", "--out", filepath.Join(dir, "run"), "--cpuprofile", prof); code != exitOK {
		t.Fatalf("exit %d: %s", code, ta.errOut.String())
	}
	raw, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	pb, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the profile does not decompress: %v", err)
	}
	if !bytes.Contains(pb, []byte("cpu")) || !bytes.Contains(pb, []byte("nanoseconds")) {
		t.Fatalf("not a CPU profile of the run (%d bytes)", len(pb))
	}
	ta = newTestApp()
	ta.backends = launch.Backends()
	if code := ta.exec("run", "das3-smoke", "--backend", "sim", "--quiet", "--out", filepath.Join(dir, "run2"), "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")); code == exitOK {
		t.Fatal("a profile in a missing directory was accepted")
	}
	if !strings.Contains(ta.errOut.String(), "--cpuprofile") {
		t.Fatalf("error does not name --cpuprofile: %s", ta.errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "run2")); err == nil {
		t.Error("the refused run left a results directory")
	}
}
