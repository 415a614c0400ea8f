package results

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/koala-emu/koala-emu/internal/csvtest"
)

// batsimJobs covers every final state and the node numbering: j2 ends
// before j4 and j5 start (they reuse its nodes), j4 is killed (keeps its
// node to the end), j6 starts after j1 ended and gets j1's nodes plus two
// new ones, so its set has two intervals.
func batsimJobs() []Job {
	return []Job{
		{ID: "j1", App: "wave", Size: 12, Request: "flexible", Components: "amsterdam:8+vrije:4", Clusters: 2,
			Submit: 0, Placement: 5, Start: 10, End: 110, Status: "completed", Nominal: 90},
		{ID: "j2", App: "prime", Size: 2, Request: "fixed", Components: "vrije:2", Clusters: 1,
			Submit: 5, Placement: 18, Start: 20, End: 50, Status: "failed", Reason: "app crashed, rank 3"},
		{ID: "j3", App: "wave", Size: 32, Request: "flexible", Submit: 30, Placement: -1, Start: -1, End: -1,
			Status: "failed", Reason: "placement tries exceeded the threshold", Nominal: 200.5},
		{ID: "j4", App: "poisson", Size: 1, Request: "flexible", Components: "vrije:1", Clusters: 1,
			Submit: 40, Placement: 55, Start: 60, End: -1, Status: "failed", Reason: "interrupted", Nominal: 10},
		{ID: "j5", App: "wave", Size: 4, Request: "flexible", Components: "vrije:4", Clusters: 1,
			Submit: 55, Placement: 65, Start: 70, End: 170, Status: "completed", Nominal: 100},
		{ID: "j6", App: "wave", Size: 6, Request: "flexible", Components: "vrije:6", Clusters: 1,
			Submit: 100, Placement: 112, Start: 115, End: 135.25, Status: "completed", Nominal: 20},
		{ID: "j7", App: "wave", Size: 8, Request: "flexible", Submit: -1, Placement: -1, Start: -1, End: -1,
			Status: "failed", Reason: "interrupted (never submitted)"},
	}
}

func TestBatsimCSV(t *testing.T) {
	dir := t.TempDir()
	if err := WriteBatsimCSV(dir, batsimJobs(), "das3-coalloc"); err != nil {
		t.Fatalf("WriteBatsimCSV: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "jobs_batsim.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,consumed_energy,allocated_resources,metadata",
		"j1,das3-coalloc,wave,0,12,90,1,COMPLETED_SUCCESSFULLY,10,100,110,10,110,1.1,-1,0-11,request=flexible;components=amsterdam:8+vrije:4",
		`j2,das3-coalloc,prime,5,2,-1,0,COMPLETED_FAILED,20,30,50,15,45,1.5,-1,12-13,"request=fixed;components=vrije:2;reason=app crashed, rank 3"`,
		"j3,das3-coalloc,wave,30,32,200.5,0,REJECTED,,,,,,,-1,,request=flexible;reason=placement tries exceeded the threshold",
		"j4,das3-coalloc,poisson,40,1,10,0,COMPLETED_KILLED,60,,,20,,,-1,12,request=flexible;components=vrije:1;reason=interrupted",
		"j5,das3-coalloc,wave,55,4,100,1,COMPLETED_SUCCESSFULLY,70,100,170,15,115,1.15,-1,13-16,request=flexible;components=vrije:4",
		"j6,das3-coalloc,wave,100,6,20,1,COMPLETED_SUCCESSFULLY,115,20.25,135.25,15,35.25,1.740741,-1,8-11 17-18,request=flexible;components=vrije:6",
		"j7,das3-coalloc,wave,,8,-1,0,REJECTED,,,,,,,-1,,request=flexible;reason=interrupted (never submitted)",
	}
	got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), data)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, got[i], want[i])
		}
	}
	// The file is valid CSV with 17 fields on every row.
	rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	for i, r := range rows {
		if len(r) != len(BatsimColumns) {
			t.Errorf("row %d has %d fields, want %d", i, len(r), len(BatsimColumns))
		}
	}
}

func TestBatsimState(t *testing.T) {
	for _, c := range []struct {
		job  Job
		want string
	}{
		{Job{Status: "completed", Start: 1, End: 2}, BatsimSuccess},
		{Job{Status: "failed", Start: 1, End: 2}, BatsimFailed},
		{Job{Status: "failed", Start: 1, End: -1}, BatsimKilled},
		{Job{Status: "running", Start: 1, End: -1}, BatsimKilled},
		{Job{Status: "failed", Start: -1, End: -1}, BatsimRejected},
		{Job{Status: "queued", Start: -1, End: -1}, BatsimRejected},
	} {
		if got := BatsimState(&c.job); got != c.want {
			t.Errorf("status %s start %v end %v: %s, want %s", c.job.Status, c.job.Start, c.job.End, got, c.want)
		}
	}
}

func readBatsimColumn(t *testing.T, dir, col string) []string {
	t.Helper()
	rows := csvtest.Read(t, filepath.Join(dir, BatsimFile))
	k := -1
	for i, h := range rows[0] {
		if h == col {
			k = i
		}
	}
	if k < 0 {
		t.Fatalf("no column %s", col)
	}
	var out []string
	for _, r := range rows[1:] {
		out = append(out, r[k])
	}
	return out
}

func TestBatsimPlatformNumbering(t *testing.T) {
	dir := t.TempDir()
	platform := []BatsimCluster{{"vrije", 12}, {"amsterdam", 8}}
	if err := WriteBatsimCSVPlatform(dir, batsimJobs(), "w", platform); err != nil {
		t.Fatalf("WriteBatsimCSVPlatform: %v", err)
	}
	got := readBatsimColumn(t, dir, "allocated_resources")
	want := []string{"0-3 12-19", "4-5", "", "4", "5-8", "0-3 9-10", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("allocated_resources %q, want %q", got, want)
	}
}

func TestBatsimErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		jobs     []Job
		workload string
		platform []BatsimCluster
		want     string
	}{
		{"no workload", batsimJobs(), "", nil, "workload name"},
		{"platform too small", batsimJobs(), "w", []BatsimCluster{{"vrije", 10}, {"amsterdam", 8}}, "cluster vrije: jobs held 11 of its 10 nodes"},
		{"cluster not in platform", batsimJobs(), "w", []BatsimCluster{{"vrije", 20}}, "cluster amsterdam"},
		{"bad components", []Job{{ID: "x", Components: "vrije-4", Start: 1, End: 2}}, "w", nil, `job x: components "vrije-4"`},
		{"bad count", []Job{{ID: "y", Components: "vrije:four", Start: 1, End: 2}}, "w", nil, "job y"},
		{"missing dir", nil, "w", nil, "write"},
	} {
		d := dir
		if c.name == "missing dir" {
			d = filepath.Join(dir, "absent", "deeper")
		}
		err := WriteBatsimCSVPlatform(d, c.jobs, c.workload, c.platform)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestBatsimIntervals(t *testing.T) {
	for _, c := range []struct {
		ids  []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{5, 0, 1, 2, 7, 8, 10}, "0-2 5 7-8 10"},
	} {
		if got := string(batsimIntervals(nil, c.ids)); got != c.want {
			t.Errorf("%v: %q, want %q", c.ids, got, c.want)
		}
	}
}

// The replay's order decides the numbering: at equal times ends come before
// starts (b reuses the nodes a frees at 10), simultaneous starts go in job
// order (b before c), a job naming a cluster twice takes nodes for each
// component, and a killed job (d) keeps its node. Clusters without a
// platform are numbered in name order (amsterdam first).
func TestBatsimNumberingOrder(t *testing.T) {
	jobs := []Job{
		{ID: "a", Components: "vrije:2", Start: 0, End: 10, Status: "completed"},
		{ID: "b", Components: "vrije:2", Start: 10, End: 20, Status: "completed"},
		{ID: "c", Components: "vrije:1+vrije:1", Start: 10, End: 30, Status: "completed"},
		{ID: "d", Components: "amsterdam:1", Start: 5, End: -1, Status: "failed"},
		{ID: "e", Components: "vrije:1", Start: 20, End: 25, Status: "completed"},
		{ID: "f", Components: "vrije:3", Start: -1, End: -1, Status: "failed"},
	}
	dir := t.TempDir()
	if err := WriteBatsimCSV(dir, jobs, "w"); err != nil {
		t.Fatalf("WriteBatsimCSV: %v", err)
	}
	got := readBatsimColumn(t, dir, "allocated_resources")
	want := []string{"1-2", "1-2", "3-4", "0", "1", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("allocated_resources %q, want %q", got, want)
	}
}

// A migrated job is replayed on the nodes where it ended from its
// placement there: it moved onto the nodes another job had just freed, so
// the cluster never holds more than its nodes.
func TestBatsimMovedJob(t *testing.T) {
	dir := t.TempDir()
	jobs := []Job{
		{ID: "p", App: "prime", Size: 4, Request: "fixed", Components: "vrije:4", Clusters: 1, Submit: 0, Placement: 0, Start: 10,
			End: 200, Status: "completed"},
		{ID: "q", App: "qr", Size: 4, Request: "fixed", Components: "vrije:4", Clusters: 1, Submit: 0, Placement: 0, Start: 10,
			End: 350, Status: "completed", Moved: 230},
	}
	if err := WriteBatsimCSVPlatform(dir, jobs, "w", []BatsimCluster{{"vrije", 4}, {"leiden", 4}}); err != nil {
		t.Fatalf("WriteBatsimCSVPlatform: %v", err)
	}
	if got := readBatsimColumn(t, dir, "allocated_resources"); strings.Join(got, "|") != "0-3|0-3" {
		t.Fatalf("allocated_resources %q", got)
	}
	if got := readBatsimColumn(t, dir, "starting_time"); got[1] != "10" {
		t.Errorf("the moved job's start %q, want its first start", got[1])
	}
}
