//go:build !linux

package ptimer

import (
	"context"
	"errors"
	"time"
)

// ProbeStalls needs Linux (CPU affinity and realtime scheduling).
func ProbeStalls(context.Context, time.Duration) ([]Stalls, error) {
	return nil, errors.New("stall probe: needs Linux")
}
