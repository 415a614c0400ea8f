package kernelprobe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/netns/netnstest"
)

// TestMeasureThroughTheKernel runs a small probe through the kernel
// shaper: every figure is measured (none is zero), the path names the
// kernel mechanism, and the namespaces are gone afterwards.
func TestMeasureThroughTheKernel(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := netns.RandomRunID()
	f, err := Open(ctx, netem.Auto, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hostprobe.Measure(ctx, f, hostprobe.Options{Rings: 2, Ranks: 4, Span: 200 * time.Millisecond,
		Pairs: 2, Tries: 1, BurstRanks: 8, BurstSteps: 10})
	if cerr := f.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
	if c.MsgsPerSec <= 0 || c.BytesPerSec <= 0 || c.BurstPerMsg <= 0 || c.Floor <= 0 {
		t.Errorf("figures not measured: %+v", c)
	}
	if !strings.Contains(c.Path, "kernel shaper") {
		t.Errorf("path %q does not say the kernel shaper carried the messages", c.Path)
	}
	// 8-byte messages over 200 µs links: a ring of 4 exchanging both ways
	// cannot beat two messages per rank per 200 µs round.
	if bound := 2.0 * 2 * 4 / 200e-6; c.MsgsPerSec > bound {
		t.Errorf("%.0f messages/s over 200 µs links, more than the %.0f the latency allows: the links were not delayed", c.MsgsPerSec, bound)
	}
	netnstest.AssertNoLeftovers(t, netns.NamePrefix+id+"-")
}
