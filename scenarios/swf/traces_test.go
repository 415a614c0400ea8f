package swf

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

// The full traces of ../shared/traces are not in the repository (they are
// megabytes); these tests and BenchmarkReadCTC run when the files are there
// and skip, saying so, only when a file is absent.
const tracesDir = "../../../shared/traces/"

func needTrace(tb testing.TB, name string) string {
	tb.Helper()
	path := tracesDir + name
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		tb.Skipf("%s is absent (the full traces live outside the repository, in /work/shared/traces)", path)
	} else if err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestFullTraces checks the counts the traces' README states (job lines,
// header) and the skip counts of the reader's rules, counted with awk over
// the decompressed files when this test was written.
func TestFullTraces(t *testing.T) {
	for _, c := range []struct {
		file         string
		jobs         int
		maxProcs     int
		skipped      map[Reason]int
		overWalltime int
		widest       int
		lastSubmit   time.Duration
	}{
		{"CTC-SP2-1996-3.1-cln.swf.gz", 77222, 338, map[Reason]int{ReasonNoRuntime: 17}, 7174, 336, 29299062 * time.Second},
		{"SDSC-SP2-1998-4.2-cln.swf.gz", 59715, 128, map[Reason]int{ReasonCancelled: 5681}, 4134, 128, 63582293 * time.Second},
		{"KTH-SP2-1996-2.1-cln.swf.gz", 28476, 100, map[Reason]int{ReasonNoProcs: 1, ReasonNoRuntime: 8}, 475, 100, 29363618 * time.Second},
	} {
		t.Run(c.file, func(t *testing.T) {
			h, jobs, st := readFile(t, needTrace(t, c.file), Options{})
			if st.Jobs != c.jobs || h.MaxProcs != c.maxProcs || st.OverWalltime != c.overWalltime {
				t.Errorf("%d jobs, max procs %d, %d over walltime; want %d, %d, %d", st.Jobs, h.MaxProcs, st.OverWalltime, c.jobs, c.maxProcs, c.overWalltime)
			}
			for _, r := range Reasons() {
				if st.Skipped[r] != c.skipped[r] {
					t.Errorf("skipped %q: %d, want %d", r, st.Skipped[r], c.skipped[r])
				}
			}
			widest := 0
			for i, j := range jobs {
				widest = max(widest, j.Procs)
				if i > 0 && j.Submit < jobs[i-1].Submit {
					t.Fatalf("line %d: submit time goes back", j.Line)
				}
			}
			if widest != c.widest || jobs[len(jobs)-1].Submit != c.lastSubmit {
				t.Errorf("widest job %d, last submit %v; want %d, %v", widest, jobs[len(jobs)-1].Submit, c.widest, c.lastSubmit)
			}
		})
	}
}

// BenchmarkReadCTC reads the whole CTC trace (77,222 job lines, gzip).
func BenchmarkReadCTC(b *testing.B) {
	path := needTrace(b, "CTC-SP2-1996-3.1-cln.swf.gz")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, st, err := ReadFile(path, Options{}); err != nil || st.Jobs != 77222 {
			b.Fatalf("%v, %d jobs", err, st.Jobs)
		}
	}
}
