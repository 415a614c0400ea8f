//go:build !linux

package ptimer

import (
	"runtime"
	"time"
)

func lockThread() { runtime.LockOSThread() }

func setupThread(bool) bool { return false }

func newWaiter() (waiter, time.Time, string) {
	base := time.Now()
	return newChanWaiter(base), base, "gotimer"
}

func requestWakeLatency() (func(), bool) { return func() {}, false }
