package swf

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	kthExcerpt = "testdata/kth-sp2-first300.swf"
	ctcExcerpt = "testdata/ctc-sp2-first200.swf.gz"
)

// plainJob is a job line counted independently of the reader: the fields
// split with strings.Fields and parsed with strconv.
type plainJob struct {
	line                          int
	submit, wait, run, reqTime    float64
	alloc, req, status, jobNumber int64
}

func plainJobs(t *testing.T, data []byte) []plainJob {
	t.Helper()
	var out []plainJob
	for i, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], ";") {
			continue
		}
		if len(f) != 18 {
			t.Fatalf("line %d: %d fields", i+1, len(f))
		}
		num := func(k int) float64 {
			x, err := strconv.ParseFloat(f[k-1], 64)
			if err != nil {
				t.Fatalf("line %d field %d: %v", i+1, k, err)
			}
			return x
		}
		out = append(out, plainJob{line: i + 1, jobNumber: int64(num(1)), submit: num(2), wait: num(3), run: num(4),
			alloc: int64(num(5)), req: int64(num(8)), reqTime: num(9), status: int64(num(11))})
	}
	return out
}

func readFile(t *testing.T, path string, opts Options) (Header, []Job, Stats) {
	t.Helper()
	h, jobs, st, err := ReadFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Jobs != st.Kept+st.SkippedTotal() || st.Kept != len(jobs) {
		t.Fatalf("stats do not add up: %+v for %d jobs", st, len(jobs))
	}
	return h, jobs, st
}

func TestKTHExcerpt(t *testing.T) {
	data, err := os.ReadFile(kthExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	plain := plainJobs(t, data)
	h, jobs, st := readFile(t, kthExcerpt, Options{})

	if h.MaxProcs != 100 || h.MaxNodes != 100 || h.UnixStartTime != 843480031 || h.TimeZoneString != "Europe/Stockholm" ||
		h.MaxJobs != 28490 || h.MaxRecords != 28476 || h.Lines != 24 {
		t.Errorf("header %+v", h)
	}
	if got := h.Fields["Information"]; !reflect.DeepEqual(got, []string{"http://www.pdc.kth.se/\nhttp://www.cs.huji.ac.il/labs/parallel/workload/"}) {
		t.Errorf("Information %q: want the continuation line joined", got)
	}
	if got := h.Fields["Note"]; len(got) != 2 || got[0] != "uses the EASY scheduler" ||
		got[1] != "THIS IS A CLEANED VERSION OF THE LOG!\nThe filter used to produce it was\njob<=14 (14 jobs removed)" {
		t.Errorf("Note %q", got)
	}
	if got := h.Fields["EndTime"]; len(got) != 1 || got[0] != "Fri Aug 29 10:55:01 CEST 1997" {
		t.Errorf("EndTime %q", got)
	}
	if want := time.Date(1996, 9, 23, 12, 0, 31, 0, time.UTC); !h.Start().Equal(want) {
		t.Errorf("start %v, want %v", h.Start(), want)
	}

	// The excerpt has no job to skip: every count is computed from the
	// lines, so a wrong rule (or a changed file) fails here.
	var noProcs, noRun, cancelled, over int
	for _, p := range plain {
		switch {
		case p.status == 5 && (p.run <= 0 || p.wait == -1):
			cancelled++
		case p.alloc <= 0 && p.req <= 0:
			noProcs++
		case p.run <= 0:
			noRun++
		case p.run > p.reqTime && p.reqTime > 0:
			over++
		}
	}
	want := Stats{Lines: 324, Jobs: 300, Kept: 300 - cancelled - noProcs - noRun, OverWalltime: over, Skipped: map[Reason]int{}}
	for r, n := range map[Reason]int{ReasonCancelled: cancelled, ReasonNoProcs: noProcs, ReasonNoRuntime: noRun} {
		if n > 0 {
			want.Skipped[r] = n
		}
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if len(plain) != 300 || over != 5 {
		t.Errorf("independent count: %d jobs, %d over their requested time; the excerpt has 300 and 5", len(plain), over)
	}

	// Every kept job against its line.
	for i, j := range jobs {
		p := plain[i]
		procs := p.alloc
		if procs <= 0 {
			procs = p.req
		}
		if j.Line != p.line || j.JobNumber != p.jobNumber || j.Submit != sec(p.submit) || j.Runtime != sec(p.run) ||
			j.Walltime != sec(p.reqTime) || int64(j.Procs) != procs || j.Status != p.status {
			t.Fatalf("job %d: %+v, want line %+v", i, j, p)
		}
	}
	first := Record{JobNumber: 15, SubmitTime: 599850, WaitTime: 192180, RunTime: 3477, AllocatedProcs: 4, AvgCPUTime: -1, UsedMemory: -1,
		RequestedProcs: 4, RequestedTime: 53940, RequestedMemory: -1, Status: 1, UserID: 12, GroupID: 12,
		Executable: -1, Queue: -1, Partition: -1, PrecedingJob: -1, ThinkTime: -1}
	if jobs[0].Record != first || jobs[0].Line != 25 || jobs[0].Submit != 599850*time.Second {
		t.Errorf("first job %+v, want %+v on line 25", jobs[0], first)
	}
}

func sec(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func TestCTCExcerpt(t *testing.T) {
	h, jobs, st := readFile(t, ctcExcerpt, Options{})
	if h.MaxNodes != 338 || h.MaxProcs != 338 || h.UnixStartTime != 835823160 || h.TimeZoneString != "US/Eastern" || h.Lines != 29 {
		t.Errorf("header %+v", h)
	}
	if got := h.Fields["MaxNodes"]; len(got) != 1 || got[0] != "338 (batch partition; 512 total)" {
		t.Errorf("MaxNodes as written: %q", got)
	}
	if got := h.Fields["Queue"]; len(got) != 4 || got[3] != "4 informix" {
		t.Errorf("Queue %q", got)
	}
	if st.Lines != 229 || st.Jobs != 200 || st.Kept != 200 || st.OverWalltime != 19 {
		t.Errorf("stats %+v", st)
	}
	// CTC has no requested processor count and fractional CPU times.
	if j := jobs[0]; j.RequestedProcs != Unknown || j.Procs != 306 || j.AvgCPUTime != 142 || j.GroupID != Unknown {
		t.Errorf("first job %+v", j)
	}
}

// TestGzipAndPlainAgree: the same content read plain and gzip-compressed
// gives the same header, jobs and stats, whatever the file name says.
func TestGzipAndPlainAgree(t *testing.T) {
	kth, err := os.ReadFile(kthExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	ctcGz, err := os.ReadFile(ctcExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(ctcGz))
	if err != nil {
		t.Fatal(err)
	}
	ctc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for name, plain := range map[string][]byte{"kth": kth, "ctc": ctc} {
		for _, opts := range []Options{{}, {Start: 7 * 24 * time.Hour, Length: 24 * time.Hour, MaxProcs: 32}} {
			h1, j1, s1, err1 := ReadAll(bytes.NewReader(plain), "x.swf.gz", opts)
			h2, j2, s2, err2 := ReadAll(bytes.NewReader(gzipBytes(t, plain)), "x.swf", opts)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %v, %v", name, err1, err2)
			}
			if len(j1) == 0 && opts == (Options{}) {
				t.Fatalf("%s: no jobs", name)
			}
			if !reflect.DeepEqual(h1, h2) || !reflect.DeepEqual(j1, j2) || !reflect.DeepEqual(s1, s2) {
				t.Errorf("%s %+v: plain and gzip differ: %d and %d jobs, %+v and %+v", name, opts, len(j1), len(j2), s1, s2)
			}
		}
	}
}

func TestWindow(t *testing.T) {
	data, err := os.ReadFile(kthExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	plain := plainJobs(t, data)
	day := 24 * time.Hour
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"from day 7 for one day", Options{Start: 7 * day, Length: day}},
		{"from day 8 to the end", Options{Start: 8 * day}},
		{"half a day from 7.5 days, at most 16 processors", Options{Start: 7*day + 12*time.Hour, Length: 12 * time.Hour, MaxProcs: 16}},
		{"the whole log, at most 8 processors", Options{MaxProcs: 8}},
		{"before the first job", Options{Length: 6 * day}},
		{"after the last job", Options{Start: 30 * day}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, jobs, st := readFile(t, kthExcerpt, c.opts)
			want := Stats{Lines: 324, Jobs: 300, Skipped: map[Reason]int{}}
			var kept []plainJob
			for _, p := range plain {
				s := sec(p.submit)
				switch {
				case s < c.opts.Start:
					want.Skipped[ReasonBeforeWindow]++
				case c.opts.Length > 0 && s >= c.opts.Start+c.opts.Length:
					want.Skipped[ReasonAfterWindow]++
				case c.opts.MaxProcs > 0 && p.alloc > int64(c.opts.MaxProcs):
					want.Skipped[ReasonTooWide]++
				default:
					kept = append(kept, p)
					if p.run > p.reqTime {
						want.OverWalltime++
					}
				}
			}
			want.Kept = len(kept)
			if !reflect.DeepEqual(st, want) {
				t.Errorf("stats %+v, want %+v", st, want)
			}
			if len(jobs) != len(kept) {
				t.Fatalf("%d jobs, want %d", len(jobs), len(kept))
			}
			for i, j := range jobs {
				if j.Line != kept[i].line || j.Submit != sec(kept[i].submit)-c.opts.Start || j.Submit < 0 ||
					(c.opts.Length > 0 && j.Submit >= c.opts.Length) {
					t.Fatalf("job %d: line %d submit %v, want line %d submit %v", i, j.Line, j.Submit, kept[i].line, sec(kept[i].submit)-c.opts.Start)
				}
			}
		})
	}
}

func TestLimit(t *testing.T) {
	_, jobs, st := readFile(t, kthExcerpt, Options{Start: 7 * 24 * time.Hour, Limit: 10})
	if len(jobs) != 10 || !st.LimitReached || jobs[9].Line != st.Lines {
		t.Fatalf("%d jobs, stats %+v: want 10 and reading stopped at the 10th", len(jobs), st)
	}
	_, jobs, st = readFile(t, kthExcerpt, Options{Limit: 1000})
	if len(jobs) != 300 || st.LimitReached {
		t.Errorf("limit above the job count: %d jobs, stats %+v", len(jobs), st)
	}
}

// TestSkipRules: each rule on its own line, in the order the reasons are
// tested, and the derivations of a kept job.
func TestSkipRules(t *testing.T) {
	// fields: 1 job, 2 submit, 3 wait, 4 run, 5 alloc, 8 req procs, 9 req time, 11 status
	line := func(submit, wait, run, alloc, req, reqTime, status string) string {
		return "9 " + submit + " " + wait + " " + run + " " + alloc + " -1 -1 " + req + " " + reqTime + " -1 " + status + " 1 1 -1 -1 -1 -1 -1"
	}
	cases := []struct {
		name   string
		line   string
		opts   Options
		reason Reason
		procs  int
		run    time.Duration
		wall   time.Duration
	}{
		{"completed", line("100", "5", "60", "4", "8", "120", "1"), Options{}, "", 4, 60 * time.Second, 120 * time.Second},
		{"failed jobs are replayed", line("100", "5", "60", "4", "8", "120", "0"), Options{}, "", 4, 60 * time.Second, 120 * time.Second},
		{"requested processors when allocated unknown", line("100", "5", "60", "-1", "8", "120", "1"), Options{}, "", 8, 60 * time.Second, 120 * time.Second},
		{"requested processors when allocated 0", line("100", "5", "60", "0", "8", "120", "1"), Options{}, "", 8, 60 * time.Second, 120 * time.Second},
		{"walltime defaults to the run time", line("100", "5", "60.4", "4", "-1", "-1", "1"), Options{}, "", 4, 60400 * time.Millisecond, 60400 * time.Millisecond},
		{"walltime 0 defaults to the run time", line("100", "5", "60", "4", "-1", "0", "1"), Options{}, "", 4, 60 * time.Second, 60 * time.Second},
		{"run time over the walltime is kept", line("100", "5", "600", "4", "-1", "60", "1"), Options{}, "", 4, 600 * time.Second, 60 * time.Second},
		{"cancelled after running is kept", line("100", "5", "60", "4", "4", "120", "5"), Options{}, "", 4, 60 * time.Second, 120 * time.Second},
		{"unknown submit time", line("-1", "5", "60", "4", "4", "120", "1"), Options{}, ReasonNoSubmitTime, 0, 0, 0},
		{"unknown submit time written -1.0", line("-1.0", "5", "60", "4", "4", "120", "1"), Options{}, ReasonNoSubmitTime, 0, 0, 0},
		{"before the window", line("100", "5", "60", "4", "4", "120", "1"), Options{Start: 101 * time.Second}, ReasonBeforeWindow, 0, 0, 0},
		{"at the window's end", line("100", "5", "60", "4", "4", "120", "1"), Options{Start: 50 * time.Second, Length: 50 * time.Second}, ReasonAfterWindow, 0, 0, 0},
		{"cancelled with run time 0", line("100", "5", "0", "4", "4", "120", "5"), Options{}, ReasonCancelled, 0, 0, 0},
		{"cancelled with run time unknown", line("100", "5", "-1", "-1", "-1", "120", "5"), Options{}, ReasonCancelled, 0, 0, 0},
		{"cancelled with wait unknown", line("100", "-1", "60", "4", "4", "120", "5"), Options{}, ReasonCancelled, 0, 0, 0},
		{"no processor count", line("100", "5", "60", "-1", "-1", "120", "1"), Options{}, ReasonNoProcs, 0, 0, 0},
		{"zero processors", line("100", "5", "60", "0", "0", "120", "1"), Options{}, ReasonNoProcs, 0, 0, 0},
		{"run time 0", line("100", "5", "0", "4", "4", "120", "1"), Options{}, ReasonNoRuntime, 0, 0, 0},
		{"run time unknown", line("100", "5", "-1", "4", "4", "120", "0"), Options{}, ReasonNoRuntime, 0, 0, 0},
		{"run time negative", line("100", "5", "-7", "4", "4", "120", "1"), Options{}, ReasonNoRuntime, 0, 0, 0},
		{"wider than MaxProcs", line("100", "5", "60", "9", "4", "120", "1"), Options{MaxProcs: 8}, ReasonTooWide, 0, 0, 0},
		{"as wide as MaxProcs", line("100", "5", "60", "8", "4", "120", "1"), Options{MaxProcs: 8}, "", 8, 60 * time.Second, 120 * time.Second},
		{"requested wider than MaxProcs", line("100", "5", "60", "-1", "9", "120", "1"), Options{MaxProcs: 8}, ReasonTooWide, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, jobs, st, err := ReadAll(strings.NewReader("; MaxProcs: 8\n\n"+c.line+"\n\n"), "s.swf", c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.Lines != 4 || st.Jobs != 1 {
				t.Fatalf("stats %+v", st)
			}
			if c.reason != "" {
				if len(jobs) != 0 || st.Skipped[c.reason] != 1 || st.SkippedTotal() != 1 {
					t.Fatalf("got %d jobs, skipped %v, want skipped for %q", len(jobs), st.Skipped, c.reason)
				}
				return
			}
			if len(jobs) != 1 || st.SkippedTotal() != 0 {
				t.Fatalf("got %d jobs, skipped %v, want the job kept", len(jobs), st.Skipped)
			}
			j := jobs[0]
			if j.Line != 3 || j.Procs != c.procs || j.Runtime != c.run || j.Walltime != c.wall || j.Submit != 100*time.Second-c.opts.Start {
				t.Errorf("job %+v, want procs %d run %v wall %v", j, c.procs, c.run, c.wall)
			}
			if over := j.Runtime > j.Walltime; (st.OverWalltime == 1) != over {
				t.Errorf("over walltime %d for run %v wall %v", st.OverWalltime, j.Runtime, j.Walltime)
			}
		})
	}
}

func TestReasonsAreDistinct(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons() {
		if r == "" || seen[r] {
			t.Errorf("reason %q empty or repeated", r)
		}
		seen[r] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d reasons, want 7", len(seen))
	}
}

func TestHeaderOnly(t *testing.T) {
	for _, content := range []string{"", "\n\n", "; MaxProcs: 4\n;\n", "; MaxProcs: 4 ; Note: not a key\n; http://x: not a continuation\n"} {
		h, jobs, st, err := ReadAll(strings.NewReader(content), "h.swf", Options{})
		if err != nil || len(jobs) != 0 || st.Jobs != 0 {
			t.Errorf("%q: %v, %d jobs", content, err, len(jobs))
		}
		if strings.Contains(content, "MaxProcs") && h.MaxProcs != 4 {
			t.Errorf("%q: max procs %d", content, h.MaxProcs)
		}
		if strings.Contains(content, "http") && len(h.Fields) != 1 {
			t.Errorf("%q: fields %q", content, h.Fields)
		}
	}
}

func TestCommentsAndCRLF(t *testing.T) {
	content := "; MaxProcs: 8\r\n" + good + "\r\n; a comment between jobs\r\n   \r\n\t" + good + "\t\r\n"
	h, jobs, st, err := ReadAll(strings.NewReader(content), "c.swf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxProcs != 8 || len(jobs) != 2 || jobs[1].Line != 5 || st.Lines != 5 || h.Lines != 1 {
		t.Errorf("header %+v, %d jobs, stats %+v", h, len(jobs), st)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{{Start: -1}, {Length: -1}, {MaxProcs: -1}, {Limit: -1}, {Start: math.MaxInt64, Length: 1}} {
		if _, err := NewReader(strings.NewReader(good), "o.swf", o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestReadFileMissing(t *testing.T) {
	if _, _, _, err := ReadFile("testdata/no-such-file.swf", Options{}); err == nil || !strings.Contains(err.Error(), "no-such-file.swf") {
		t.Errorf("error %v, want one naming the file", err)
	}
}
