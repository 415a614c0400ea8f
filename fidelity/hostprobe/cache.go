package hostprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/koala-emu/koala-emu/fidelity"
)

// Version is the probe's version: figures measured by another version of
// it are measured again. 4: the delay line wakes its sleepers through the
// netpoller (ptimer.WakeWithin), which changes the lateness floor measured.
// 5: the figures say how busy other processes kept the machine (figures of
// 4 may hold a busy moment for a week). 6: netns and docker are measured
// through the kernel shaper (package kernelprobe), no longer in process.
const Version = 6

// MaxAge is how long kept figures are trusted before a run measures again.
const MaxAge = 7 * 24 * time.Hour

// MachineID names this machine for the cache: host name, kernel release,
// CPUs and memory. A machine that changes any of them is measured again.
func MachineID() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	var si unix.Sysinfo_t
	_ = unix.Sysinfo(&si)
	host, _ := os.Hostname()
	rel := strings.TrimRight(string(u.Release[:]), "\x00")
	mem := uint64(si.Totalram) * uint64(si.Unit) >> 30
	return fmt.Sprintf("%s/%s/%dcpu/%dGiB", host, rel, runtime.NumCPU(), mem)
}

// CacheFile is where the figures of backend are kept:
// $XDG_CACHE_HOME/koala-emu/host-BACKEND.json (or ~/.cache/...);
// KOALA_EMU_CACHE overrides the directory.
func CacheFile(backend string) (string, error) {
	dir := os.Getenv("KOALA_EMU_CACHE")
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("host figures: no cache directory: %w", err)
		}
		dir = filepath.Join(d, "koala-emu")
	}
	return filepath.Join(dir, "host-"+backend+".json"), nil
}

// Load returns the kept figures of backend when they exist, belong to this
// machine and are younger than MaxAge.
func Load(backend string) (fidelity.Capacity, bool) {
	path, err := CacheFile(backend)
	if err != nil {
		return fidelity.Capacity{}, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fidelity.Capacity{}, false
	}
	var c fidelity.Capacity
	if json.Unmarshal(b, &c) != nil || c.Machine != MachineID() || c.Backend != backend || c.Probe != Version ||
		time.Since(c.Measured) > MaxAge || c.Busy() || c.MsgsPerSec <= 0 || c.BytesPerSec <= 0 {
		return fidelity.Capacity{}, false
	}
	return c, true
}

// Save keeps the figures (written to a temporary file, then renamed).
func Save(c fidelity.Capacity) error {
	path, err := CacheFile(c.Backend)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("host figures: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("host figures: %w", err)
	}
	return os.Rename(tmp, path)
}

// Measurer measures one backend's capacity.
type Measurer func(ctx context.Context, opts Options) (fidelity.Capacity, error)

// Get returns the kept figures of backend, or measures them with m (and
// keeps them) when there are none or refresh is set. measured says which.
func Get(ctx context.Context, backend string, m Measurer, refresh bool) (c fidelity.Capacity, measured bool, err error) {
	if !refresh {
		if c, ok := Load(backend); ok {
			return c, false, nil
		}
	}
	c, err = measureAlone(ctx, m)
	if err != nil {
		return c, true, err
	}
	c.Backend, c.Probe = backend, Version
	if c.Busy() {
		return c, true, nil
	}
	if err := Save(c); err != nil && !errors.Is(err, fs.ErrPermission) {
		return c, true, err
	}
	return c, true, nil
}

// measureAlone runs m and records in the figures how much of the machine
// other processes used meanwhile (fidelity.Capacity.OthersCPU; 0 where
// /proc/stat cannot be read).
func measureAlone(ctx context.Context, m Measurer) (fidelity.Capacity, error) {
	busy0, total0, cpuErr := machineCPU()
	self0, start := selfCPU(), time.Now()
	c, err := m(ctx, Options{})
	if err != nil || cpuErr != nil {
		return c, err
	}
	busy1, total1, err := machineCPU()
	if err != nil || total1 <= total0 {
		return c, nil
	}
	c.OthersCPU = fidelity.OthersShare(busy1-busy0, total1-total0, selfCPU()-self0, time.Since(start), runtime.NumCPU())
	return c, nil
}

// machineCPU and selfCPU read the machine's and this process's CPU time
// (variables: the tests make the machine busy or quiet).
var (
	machineCPU = fidelity.MachineCPU
	selfCPU    = processCPU
)

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
