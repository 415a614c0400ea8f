package swf_test

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/koala-emu/koala-emu/scenarios/swf"
)

// Read one day of the KTH excerpt, at most 32 processors per job.
func ExampleReadFile() {
	h, jobs, st, err := swf.ReadFile("testdata/kth-sp2-first300.swf",
		swf.Options{Start: 7 * 24 * time.Hour, Length: 24 * time.Hour, MaxProcs: 32})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("max procs:", h.MaxProcs, "zone:", h.TimeZoneString)
	fmt.Println("jobs:", st.Jobs, "kept:", st.Kept)
	for _, r := range swf.Reasons() {
		if n := st.Skipped[r]; n > 0 {
			fmt.Printf("skipped %s: %d\n", r, n)
		}
	}
	j := jobs[0]
	fmt.Printf("first: job %d at %v, %d procs, runs %v of %v\n", j.JobNumber, j.Submit, j.Procs, j.Runtime, j.Walltime)
	// Output:
	// max procs: 100 zone: Europe/Stockholm
	// jobs: 300 kept: 156
	// skipped before-window: 5
	// skipped after-window: 123
	// skipped wider-than-max-procs: 16
	// first: job 20 at 9m56s, 1 procs, runs 16s of 1m0s
}

// Stream a trace job by job.
func ExampleReader() {
	f, err := os.Open("testdata/ctc-sp2-first200.swf.gz")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	rd, err := swf.NewReader(f, "ctc-sp2-first200.swf.gz", swf.Options{Limit: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		j, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("line %d: job %d, %d procs, walltime %v\n", j.Line, j.JobNumber, j.Procs, j.Walltime)
	}
	fmt.Println("limit reached:", rd.Stats().LimitReached)
	// Output:
	// line 30: job 1, 306 procs, walltime 9h45m0s
	// line 31: job 2, 17 procs, walltime 5m0s
	// line 32: job 3, 306 procs, walltime 9h45m0s
	// limit reached: true
}
