//go:build linux

package ptimer

import "golang.org/x/sys/unix"

func newEventFD() (int, error) {
	return unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
}

func writeEventFD(fd int) {
	b := [8]byte{1}
	_, _ = unix.Write(fd, b[:]) // fails only when the counter would overflow: a wake-up is pending anyway
}
