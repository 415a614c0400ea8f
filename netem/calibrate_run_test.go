package netem

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// TestCalibrateInprocDAS3 is a measurement, not a unit test: it runs only
// with KOALA_CALIBRATE set to a comma-separated list of DAS-3 clusters (for
// example "vrije,amsterdam,multimedian,leiden") and prints the table.
func TestCalibrateInprocDAS3(t *testing.T) {
	spec := os.Getenv("KOALA_CALIBRATE")
	if spec == "" {
		t.Skip("set KOALA_CALIBRATE=vrije,amsterdam,multimedian,leiden to run the in-process calibration")
	}
	m, err := Preset("das3", strings.Split(spec, ","))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var opts CalibrateOptions
	t.Logf("default line: %s, realtime %v", ptimer.Default().Mode(), ptimer.Default().Realtime())
	t.Logf("overhead curve: %v (err %v)", DefaultOverhead(), DefaultOverheadErr())
	rows, err := CalibrateInproc(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeCalibration(rows)
	var b strings.Builder
	PrintCalibration(&b, rows, s)
	t.Log("\n" + b.String())
	if s.Failed {
		t.Errorf("calibration failed: %s", s.Reason)
	}
}
