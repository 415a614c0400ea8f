package netns_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/netns/netnstest"
)

// TestCalibrateNetnsRuns checks the calibration's structure on a small
// matrix (verdicts depend on timing and are not asserted here; see
// TestCalibrateReport).
func TestCalibrateNetnsRuns(t *testing.T) {
	netnstest.RequireRoot(t)
	m, err := netem.Preset("gbe", []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	id := netns.RandomRunID()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rows, sum, info, err := netns.CalibrateNetns(ctx, m, netem.Auto, netns.CalibrateOptions{
		RunID:    id,
		PingPong: netem.PingPongOptions{LatencyRounds: 30, BandwidthRounds: 2},
	})
	netnstest.AssertNoLeftovers(t, netns.NamePrefix+id+"-")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || sum.Pairs != 3 {
		t.Fatalf("%d rows, summary %+v; want x-x, x-y, y-y", len(rows), sum)
	}
	want := kernel.NameNetem
	if strings.Contains(info.Reason, "skipped netem") {
		want = kernel.NameHTB
	}
	if info.Mechanism != want || !strings.Contains(info.Reason, "auto") {
		t.Errorf("mechanism %q (%s), want %q", info.Mechanism, info.Reason, want)
	}
	if info.Floor <= 0 || info.FloorBandwidth <= 0 {
		t.Errorf("floor not measured: %+v", info)
	}
	for _, r := range rows {
		if r.Mechanism != info.Mechanism || r.Target.Bandwidth != 115e6 || r.Measured.Bandwidth <= 0 || r.Measured.Latency <= 0 {
			t.Errorf("row %+v", r)
		}
		if r.Verdict != netem.VerdictPass && r.Verdict != netem.VerdictFloor && r.Verdict != netem.VerdictFail {
			t.Errorf("verdict %q", r.Verdict)
		}
	}
}

// TestCalibrateNetemExplicit: asking for netem where the kernel lacks it
// fails at once, naming the missing qdisc, and leaves nothing behind.
func TestCalibrateNetemExplicit(t *testing.T) {
	netnstest.RequireRoot(t)
	m, err := netem.Preset("gbe", []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	id := netns.RandomRunID()
	_, _, _, err = netns.CalibrateNetns(t.Context(), m, kernel.NameNetem, netns.CalibrateOptions{
		RunID:    id,
		PingPong: netem.PingPongOptions{LatencyRounds: 10, BandwidthRounds: 1},
	})
	netnstest.AssertNoLeftovers(t, netns.NamePrefix+id+"-")
	if err == nil {
		t.Skip("this kernel has netem: the explicit request succeeds")
	}
	if !errors.Is(err, kernel.ErrNoNetem) || !strings.Contains(err.Error(), "no netem qdisc") {
		t.Errorf("error %v, want one naming the missing netem qdisc", err)
	}
}

func TestCalibrateUnknownMechanism(t *testing.T) {
	netnstest.RequireRoot(t)
	m, _ := netem.Preset("gbe", []string{"x"})
	id := netns.RandomRunID()
	_, _, _, err := netns.CalibrateNetns(t.Context(), m, "carrier-pigeon", netns.CalibrateOptions{RunID: id})
	netnstest.AssertNoLeftovers(t, netns.NamePrefix+id+"-")
	if err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("error %v", err)
	}
}
