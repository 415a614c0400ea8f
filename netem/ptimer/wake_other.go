//go:build !linux

package ptimer

import "errors"

func newEventFD() (int, error) { return -1, errors.New("ptimer: no eventfd on this platform") }

func writeEventFD(int) {}
