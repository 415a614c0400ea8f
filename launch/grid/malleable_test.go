package grid

import (
	"testing"

	"github.com/koala-emu/koala-emu/launch/wiring"
)

// A malleable scenario on the grid runs the malleability manager on the
// scheduler host and a malleable runner on a runner site: the job grows
// and shrinks, every job completes, the invariants hold (checked on the
// hosts, whose counters the launcher collects) and the series are written.
func TestRunMalleableInProcess(t *testing.T) {
	p := newProcTest(t, "malleable.yaml")
	dir := t.TempDir()
	res, err := p.run(dir, Config{})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s\nhosts:\n%s", err, p.progress.String(), p.logs.String())
	}
	for _, j := range res.Jobs {
		if j.Status != "completed" {
			t.Errorf("job %s: %s %q", j.ID, j.Status, j.Reason)
		}
	}
	m := res.Summary.Malleability
	if m == nil {
		t.Fatal("no malleability summary")
	}
	if m.Grows == 0 || m.Shrinks == 0 || m.MandatoryShrinks == 0 {
		t.Errorf("grows %d, shrinks %d (mandatory %d): want each at least once", m.Grows, m.Shrinks, m.MandatoryShrinks)
	}
	if !m.InvariantsHold || len(m.Violations) != 0 || len(m.Checks) == 0 {
		t.Errorf("invariants: checks %v violations %v %v", m.Checks, m.Violations, m.Details)
	}
	if !res.Jobs[0].Malleable || res.Jobs[0].MaxProcs <= 2 {
		t.Errorf("j0001 malleable %v max processors %v, want malleable above its initial 2", res.Jobs[0].Malleable, res.Jobs[0].MaxProcs)
	}
	if missing := wiring.MissingResults(dir, true); len(missing) > 0 {
		t.Errorf("results directory lacks %v", missing)
	}
	t.Logf("grows %d shrinks %d (mandatory %d); progress:\n%s", m.Grows, m.Shrinks, m.MandatoryShrinks, p.progress.String())
}
