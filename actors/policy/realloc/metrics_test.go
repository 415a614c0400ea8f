package realloc

import (
	"math"
	"strings"
	"testing"
	"time"
)

func rec(id string, submit, completion int) Record {
	return Record{ID: id, Submit: sec(submit), Completion: sec(completion)}
}

func TestCompare(t *testing.T) {
	ref := []Record{rec("a", 0, 100), rec("b", 0, 200), rec("c", 50, 150), rec("d", 100, 400)}
	// a unchanged; b 50 s earlier; c 100 s later; d 100 s earlier. Impacted
	// 3 of 4; 2 of 3 earlier; responses of the impacted: run 150 + 200 +
	// 200 = 550, reference 200 + 100 + 300 = 600.
	run := []Record{rec("d", 100, 300), rec("c", 50, 250), rec("b", 0, 150), rec("a", 0, 100)}
	tests := []struct {
		name    string
		ref     []Record
		run     []Record
		reallos int
		tol     time.Duration
		want    Metrics
	}{
		{"four jobs", ref, run, 5, 0, Metrics{Jobs: 4, Impacted: 3, ImpactedShare: 0.75, Reallocations: 5,
			ReallocationsPerJob: 1.25, Earlier: 2, EarlierShare: 2.0 / 3, RelativeResponse: 550.0 / 600}},
		// A tolerance of 50 s: b (exactly 50 s) is no longer impacted;
		// c and d are: responses 200 + 200 against 100 + 300.
		{"tolerance", ref, run, 0, sec(50), Metrics{Jobs: 4, Impacted: 2, ImpactedShare: 0.5,
			Earlier: 1, EarlierShare: 0.5, RelativeResponse: 1}},
		{"tolerance just below", ref, run, 0, sec(50) - 1, Metrics{Jobs: 4, Impacted: 3, ImpactedShare: 0.75,
			Earlier: 2, EarlierShare: 2.0 / 3, RelativeResponse: 550.0 / 600}},
		{"identical", ref, ref, 0, 0, Metrics{Jobs: 4, RelativeResponse: 1}},
		{"empty", nil, nil, 0, 0, Metrics{RelativeResponse: 1}},
	}
	for _, tc := range tests {
		got, err := Compare(tc.ref, tc.run, tc.reallos, tc.tol)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !metricsEqual(got, tc.want) {
			t.Errorf("%s: Compare = %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func metricsEqual(a, b Metrics) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }
	return a.Jobs == b.Jobs && a.Impacted == b.Impacted && a.Reallocations == b.Reallocations && a.Earlier == b.Earlier &&
		near(a.ImpactedShare, b.ImpactedShare) && near(a.ReallocationsPerJob, b.ReallocationsPerJob) &&
		near(a.EarlierShare, b.EarlierShare) && near(a.RelativeResponse, b.RelativeResponse)
}

func TestCompareErrors(t *testing.T) {
	ref := []Record{rec("a", 0, 100), rec("b", 0, 200)}
	tests := []struct {
		name    string
		ref     []Record
		run     []Record
		reallos int
		tol     time.Duration
		want    string
	}{
		{"missing in run", ref, ref[:1], 0, 0, `reference: job "b" is not in the run`},
		{"missing in reference", ref[:1], ref, 0, 0, `run[1]: job "b" is not in the reference`},
		{"duplicate run", ref, []Record{ref[0], ref[0]}, 0, 0, `run[1]: duplicate job ID "a"`},
		{"duplicate reference", []Record{ref[0], ref[0]}, ref, 0, 0, `reference[1]: duplicate job ID "a"`},
		{"submit differs", ref, []Record{rec("a", 1, 100), ref[1]}, 0, 0, `run[0] (job "a"): submit 1s differs`},
		{"negative reallocations", ref, ref, -1, 0, "reallocations -1"},
		{"negative tolerance", ref, ref, 0, -1, "tolerance -1ns"},
	}
	for _, tc := range tests {
		if _, err := Compare(tc.ref, tc.run, tc.reallos, tc.tol); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
