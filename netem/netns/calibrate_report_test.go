package netns_test

import (
	"os"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/netns"
	"github.com/koala-emu/koala-emu/netem/netns/netnstest"
)

// TestCalibrateReport prints a calibration table over the das3 matrix. It
// measures timings, so it only runs when asked:
//
//	KOALA_CALIBRATE=vrije,amsterdam,multimedian,leiden KOALA_SHAPER=auto go test -run TestCalibrateReport -v ./netem/netns/
func TestCalibrateReport(t *testing.T) {
	clusters := os.Getenv("KOALA_CALIBRATE")
	if clusters == "" {
		t.Skip("set KOALA_CALIBRATE=cluster,cluster,... to run a calibration")
	}
	netnstest.RequireRoot(t)
	want := os.Getenv("KOALA_SHAPER")
	if want == "" {
		want = netem.Auto
	}
	m, err := netem.Preset("das3", strings.Split(clusters, ","))
	if err != nil {
		t.Fatal(err)
	}
	id := netns.RandomRunID()
	rows, sum, info, err := netns.CalibrateNetns(t.Context(), m, want, netns.CalibrateOptions{RunID: id, Log: os.Stdout, NoRealtime: os.Getenv("KOALA_NORT") != ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("info: %+v", info)
	netem.PrintCalibration(os.Stdout, rows, sum)

	netnstest.AssertNoLeftovers(t, netns.NamePrefix+id+"-")
}
