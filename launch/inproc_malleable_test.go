package launch

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/scenarios"
)

// TestMalleableEndToEnd runs real malleable applications through the
// malleability manager, the MRunners and the node actors: the jobs grow and
// shrink (a mandatory shrink honoured at the first safe point, as the run's
// own invariant checks require), every job completes (each rank checked its
// data byte for byte), and the data of every resize crossed the network.
func TestMalleableEndToEnd(t *testing.T) {
	plan := expand(t)(scenarios.Load(filepath.Join("testdata", "malleable-e2e.yaml")))
	res, dir := runInTemp(t, plan, Options{}, 2*time.Minute)
	for _, j := range res.Jobs {
		if j.Status != "completed" {
			t.Errorf("job %s (%s): %s %s", j.ID, j.App, j.Status, j.Reason)
		}
	}
	m := res.Summary.Malleability
	if m == nil {
		t.Fatal("no malleability section")
	}
	t.Logf("grows %d, shrinks %d (%d mandatory), resize %.1f s, checks %v", m.Grows, m.Shrinks, m.MandatoryShrinks, m.ResizeTimeS, m.Checks)
	if m.Grows == 0 || m.Shrinks == 0 || m.MandatoryShrinks == 0 {
		t.Errorf("want grows and mandatory shrinks: %d grows, %d shrinks, %d mandatory", m.Grows, m.Shrinks, m.MandatoryShrinks)
	}
	if !m.InvariantsHold {
		t.Errorf("invariants violated: %v %v", m.Violations, m.Details)
	}
	for _, inv := range []string{invariant.Mandatory, invariant.Bounds, invariant.Pow2, invariant.Capacity} {
		if m.Checks[inv] == 0 {
			t.Errorf("invariant %s never checked", inv)
		}
	}

	// The ranks' own accounts of every resize: the bytes handed over were
	// received, over the network, for grows and shrinks alike.
	type acc struct{ sent, recv float64 }
	byOp := map[string]*acc{"grow": {}, "shrink": {}}
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ftSizes := map[float64]bool{}
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev["kind"] {
		case "rank_resized":
			op := "grow"
			if ev["new_size"].(float64) < ev["old_size"].(float64) {
				op = "shrink"
			}
			byOp[op].sent += ev["bytes_sent"].(float64)
			byOp[op].recv += ev["bytes_recv"].(float64)
		case "procs":
			if ev["job"] == "j0002" {
				ftSizes[ev["size"].(float64)] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for op, a := range byOp {
		if a.sent == 0 || a.sent != a.recv {
			t.Errorf("%s: ranks sent %.0f bytes and received %.0f", op, a.sent, a.recv)
		}
	}
	for n := range ftSizes {
		if k := int(n); k&(k-1) != 0 {
			t.Errorf("FT ran on %d processors", k)
		}
	}
}
