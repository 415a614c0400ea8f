package report

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func batchRun(t *testing.T, moves int, csv string) string {
	t.Helper()
	dir := t.TempDir()
	res := `{"scenario": "x", "extra": {"batch": {"reallocations": ` + strconv.Itoa(moves) + `}}}`
	if err := os.WriteFile(filepath.Join(dir, ResultsJSON), []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, JobsCSV), []byte("id,request,submit_s,end_s,status\n"+csv), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Hand-computed: of four middleware jobs, a gains 50 s, b loses 100 s, c
// and d are unchanged; the local job is left out. Impacted 2/4, one
// earlier, 3 moves over 4 jobs, responses (50+300)/(100+200).
func TestCompareRealloc(t *testing.T) {
	ref := batchRun(t, 0, "a,grid,0,100,completed\nb,grid,0,200,completed\nc,grid,10,50,completed\nd,grid,0,70,failed\nl,local,0,10,completed\n")
	run := batchRun(t, 3, "a,grid,0,50,completed\nb,grid,0,300,completed\nc,grid,10,50,completed\nd,grid,0,70,failed\nl,local,0,99,completed\n")
	c, err := CompareRealloc(run, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Jobs != 4 || c.Impacted != 2 || c.ImpactedShare != 0.5 || c.Earlier != 1 || c.EarlierShare != 0.5 ||
		c.Reallocations != 3 || c.ReallocationsPerJob != 0.75 || c.RelativeResponse != 350.0/300.0 {
		t.Errorf("metrics %+v", c)
	}
	other := batchRun(t, 0, "a,grid,0,100,completed\n")
	if _, err := CompareRealloc(run, other, 0); err == nil || !strings.Contains(err.Error(), "job") {
		t.Errorf("runs of different jobs: %v", err)
	}
	notBatch := t.TempDir()
	_ = os.WriteFile(filepath.Join(notBatch, ResultsJSON), []byte(`{"scenario": "x"}`), 0o644)
	if _, err := CompareRealloc(notBatch, ref, 0); err == nil || !strings.Contains(err.Error(), "not a batch grid run") {
		t.Errorf("a run without batch books: %v", err)
	}
}
