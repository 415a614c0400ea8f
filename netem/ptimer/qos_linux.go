//go:build linux

package ptimer

import (
	"encoding/binary"
	"os"
)

// requestWakeLatency writes 0 (µs) to /dev/cpu_dma_latency; the request
// lasts while the file stays open.
func requestWakeLatency() (func(), bool) {
	f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
	if err != nil {
		return func() {}, false
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], 0)
	if _, err := f.Write(b[:]); err != nil {
		_ = f.Close()
		return func() {}, false
	}
	return func() { _ = f.Close() }, true
}
