package migrate

import (
	"math"
	"testing"
	"time"
)

// step is one call on a Monitor: observe a ratio (against a 1000 s
// prediction), or decline, or reset; with the expected answer.
type step struct {
	ratio    float64 // observe measured = ratio x 1000 s; ignored for declined/reset
	declined bool
	reset    bool
	kind     ActionKind
	reason   string
	avg      float64 // expected average when > 0
	lo, hi   float64 // expected limits when hi > 0
}

func obs(r float64, k ActionKind, reason string) step { return step{ratio: r, kind: k, reason: reason} }

func ones(n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = obs(1, Continue, ReasonWithinLimits)
	}
	return out
}

func TestMonitor(t *testing.T) {
	cases := []struct {
		name  string
		m     Monitor
		steps []step
	}{
		{"single spike above 2.0, average not", Monitor{Upper: 2.0, Lower: 0.7}, append(ones(3),
			step{ratio: 2.5, kind: Continue, reason: ReasonSpikeAbove, avg: 1.375})},
		{"ratio exactly at upper is within", Monitor{Upper: 2.0, Lower: 0.7}, []step{
			obs(2.0, Continue, ReasonWithinLimits)}},
		{"average exactly at upper stays, then above asks", Monitor{Upper: 2.0, Lower: 0.7}, []step{
			obs(1, Continue, ReasonWithinLimits),
			step{ratio: 3, kind: Continue, reason: ReasonSpikeAbove, avg: 2.0},
			step{ratio: 3, kind: RequestMigration, reason: ReasonAverageAbove, avg: 7.0 / 3},
			obs(3, Continue, ReasonRequestPending),
			step{declined: true, kind: Continue, reason: ReasonLimitsRaised, lo: 0.7, hi: 14.0 / 3},
		}},
		{"zero value has the SPEC limits", Monitor{}, []step{
			step{ratio: 2.5, kind: RequestMigration, reason: ReasonAverageAbove, lo: 0.7, hi: 2.0},
		}},
		{"ratio exactly at lower is within", Monitor{Upper: 2.0, Lower: 0.7}, []step{
			obs(0.7, Continue, ReasonWithinLimits)}},
		{"single spike below, average not", Monitor{Upper: 2.0, Lower: 0.7}, append(ones(3),
			step{ratio: 0.3, kind: Continue, reason: ReasonSpikeBelow, avg: 0.825})},
		{"persistently fast: limits follow the pace", Monitor{Upper: 2.0, Lower: 0.7}, []step{
			step{ratio: 0.5, kind: LimitsLowered, reason: ReasonAverageBelow, lo: 0.35, hi: 1.0},
			obs(0.5, Continue, ReasonWithinLimits),
			step{ratio: 1.2, kind: Continue, reason: ReasonSpikeAbove, avg: 2.2 / 3},
			step{ratio: 2.0, kind: RequestMigration, reason: ReasonAverageAbove, avg: 1.05},
		}},
		{"invalid samples are not averaged", Monitor{}, []step{
			{ratio: -1, kind: Continue, reason: ReasonInvalidSample},
			step{ratio: 1, kind: Continue, reason: ReasonWithinLimits, avg: 1},
		}},
		{"declined without a request changes nothing", Monitor{}, []step{
			{declined: true, kind: Continue, reason: ReasonNothingDeclined, lo: 0.7, hi: 2.0},
		}},
		{"reset after a migration starts a new contract", Monitor{}, []step{
			obs(5, RequestMigration, ReasonAverageAbove),
			{reset: true, lo: 0.7, hi: 2.0},
			step{ratio: 1.5, kind: Continue, reason: ReasonWithinLimits, avg: 1.5},
		}},
		{"custom limits", Monitor{Upper: 3, Lower: 0.5}, []step{
			obs(2.5, Continue, ReasonWithinLimits),
			obs(0.6, Continue, ReasonWithinLimits),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.m
			for k, st := range c.steps {
				var a Action
				switch {
				case st.reset:
					m.Reset()
					if m.Pending() {
						t.Fatalf("step %d: pending after Reset", k)
					}
				case st.declined:
					a = m.Declined()
				case st.ratio < 0:
					a = m.Observe(time.Second, 0)
				default:
					a = m.Observe(time.Duration(st.ratio*1000)*time.Second, 1000*time.Second)
				}
				if !st.reset && (a.Kind != st.kind || a.Reason != st.reason) {
					t.Fatalf("step %d: action %+v, want kind %d reason %q", k, a, st.kind, st.reason)
				}
				if st.avg > 0 && math.Abs(a.Average-st.avg) > 1e-12 {
					t.Fatalf("step %d: average %v, want %v", k, a.Average, st.avg)
				}
				if st.hi > 0 {
					lo, hi := m.Limits()
					if math.Abs(lo-st.lo) > 1e-12 || math.Abs(hi-st.hi) > 1e-12 {
						t.Fatalf("step %d: limits [%v, %v], want [%v, %v]", k, lo, hi, st.lo, st.hi)
					}
				}
			}
		})
	}
}

// TestMonitorLoadScenario follows SPEC §6's run (1): ten phases on
// prediction, then 10 loading programs make every phase 11 times slower.
// The first slow phase is a spike (average 21/11); the second asks
// (32/12 = 2.67). Declined, the upper limit becomes 2 x 2.67 = 5.33; the
// monitor asks again when the average passes it, at the eighth slow phase
// (98/18 = 5.44).
func TestMonitorLoadScenario(t *testing.T) {
	m := Monitor{Upper: 2.0, Lower: 0.7}
	for i := 0; i < 10; i++ {
		if a := m.Observe(100*time.Second, 100*time.Second); a.Kind != Continue {
			t.Fatalf("phase %d on prediction: %+v", i, a)
		}
	}
	var asked []int
	for k := 1; k <= 30; k++ {
		a := m.Observe(1100*time.Second, 100*time.Second)
		if a.Kind == RequestMigration {
			asked = append(asked, k)
		}
		if k == 3 {
			m.Declined()
			if _, hi := m.Limits(); math.Abs(hi-2*32.0/12) > 1e-12 {
				t.Fatalf("upper limit after decline %v, want %v", hi, 2*32.0/12)
			}
		}
	}
	// Pending from the 8th slow phase on: no third request.
	if len(asked) != 2 || asked[0] != 2 || asked[1] != 8 {
		t.Fatalf("requests at slow phases %v, want [2 8]", asked)
	}
}

func TestMonitorValidate(t *testing.T) {
	for _, m := range []Monitor{{}, {Upper: 2, Lower: 0.7}, {Upper: 1.5}} {
		if err := m.Validate(); err != nil {
			t.Errorf("%+v: %v", m, err)
		}
	}
	for _, m := range []Monitor{{Upper: 0.5}, {Lower: -1}, {Upper: 1, Lower: 1}, {Upper: math.NaN()}} {
		if err := m.Validate(); err == nil {
			t.Errorf("%+v accepted", m)
		}
	}
}
