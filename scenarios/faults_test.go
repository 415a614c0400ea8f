package scenarios

import (
	"errors"
	"strings"
	"testing"
)

// withFaults is base with a faults timeline and a failure policy appended.
func withFaults(policy, faults string) string {
	s := base
	if policy != "" {
		s += "  on_failure: " + policy + "\n"
	}
	if faults != "" {
		s += "faults:\n" + faults
	}
	return s
}

// Every malformed fault entry and failure policy is reported with its
// field path.
func TestFaultsMalformed(t *testing.T) {
	cases := []struct {
		name, policy, faults string
		want                 string // prefix of one error line
	}{
		{"on_failure unknown", "retry", "", `policy.on_failure: must be fail or resubmit(N) (N resubmissions per job), got "retry"`},
		{"on_failure zero", "resubmit(0)", "", "policy.on_failure: resubmit(N): N must be at least 1"},
		{"on_failure huge", "resubmit(99999999999999999999)", "", "policy.on_failure: resubmit(N): N must be at most 100"},
		{"at_s missing", "", "  - {kind: kill, target: vrije-n001}\n", "faults[0].at_s: is required"},
		{"at_s negative", "", "  - {at_s: -1, kind: kill, target: vrije-n001}\n", "faults[0].at_s: must not be negative, got -1"},
		{"at_s too large", "", "  - {at_s: 1e12, kind: kill, target: vrije-n001}\n", "faults[0].at_s: must be at most 1e+08 s"},
		{"kind missing", "", "  - {at_s: 1, target: vrije}\n", "faults[0].kind: is required"},
		{"kind unknown", "", "  - {at_s: 1, kind: flood, target: vrije}\n", `faults[0].kind: unknown kind "flood" (known: degrade, heal, kill, load, partition)`},
		{"target missing", "", "  - {at_s: 1, kind: partition}\n", "faults[0].target: is required"},
		{"kill a cluster", "", "  - {at_s: 1, kind: kill, target: vrije}\n", `faults[0].target: "vrije" is not a node name`},
		{"kill beyond the cluster", "", "  - {at_s: 1, kind: kill, target: leiden-n033}\n", "faults[0].target: cluster leiden has nodes leiden-n001 to leiden-n032, not leiden-n033"},
		{"kill node zero", "", "  - {at_s: 1, kind: kill, target: leiden-n000}\n", "faults[0].target: cluster leiden has nodes"},
		{"kill excluded cluster", "", "  - {at_s: 1, kind: kill, target: delft-n001}\n", "faults[0].target: node delft-n001 is not of an included cluster"},
		{"kill twice", "", "  - {at_s: 1, kind: kill, target: vrije-n001}\n  - {at_s: 2, kind: kill, target: vrije-n001}\n",
			"faults[1].target: node vrije-n001 is already killed by faults[0]"},
		{"kill with duration", "", "  - {at_s: 1, kind: kill, target: vrije-n001, duration_s: 5}\n", "faults[0].duration_s: only a partition, a degrade or a load has a duration"},
		{"partition unknown cluster", "", "  - {at_s: 1, kind: partition, target: delft}\n", `faults[0].target: "delft" is not an included cluster`},
		{"partition twice", "", "  - {at_s: 1, kind: partition, target: leiden, duration_s: 100}\n  - {at_s: 50, kind: partition, target: leiden}\n",
			"faults[1]: cluster leiden is already partitioned by faults[0]"},
		{"partition zero duration", "", "  - {at_s: 1, kind: partition, target: leiden, duration_s: 0}\n", "faults[0].duration_s: must be greater than 0"},
		{"heal without partition", "", "  - {at_s: 1, kind: heal, target: leiden}\n", "faults[0]: cluster leiden is not partitioned at 1s"},
		{"heal after the duration's heal", "", "  - {at_s: 1, kind: partition, target: leiden, duration_s: 10}\n  - {at_s: 50, kind: heal, target: leiden}\n",
			"faults[1]: cluster leiden is not partitioned at 50s"},
		{"heal within a duration", "", "  - {at_s: 1, kind: partition, target: leiden, duration_s: 100}\n  - {at_s: 50, kind: heal, target: leiden}\n",
			"faults[1]: cluster leiden heals by faults[0]'s duration_s"},
		{"degrade without peer", "", "  - {at_s: 1, kind: degrade, target: vrije, bandwidth_factor: 0.5}\n", "faults[0].peer: is required"},
		{"degrade without factors", "", "  - {at_s: 1, kind: degrade, target: vrije, peer: leiden}\n", "faults[0]: a degrade needs latency_factor or bandwidth_factor"},
		{"degrade factor zero", "", "  - {at_s: 1, kind: degrade, target: vrije, peer: leiden, bandwidth_factor: 0}\n", "faults[0].bandwidth_factor: must be in [0.001, 1000], got 0"},
		{"degrade factor huge", "", "  - {at_s: 1, kind: degrade, target: vrije, peer: leiden, latency_factor: 1e9}\n", "faults[0].latency_factor: must be in [0.001, 1000]"},
		{"degrade nothing", "", "  - {at_s: 1, kind: degrade, target: vrije, peer: leiden, latency_factor: 1}\n", "faults[0]: a degrade with both factors 1 changes nothing"},
		{"degrade unknown peer", "", "  - {at_s: 1, kind: degrade, target: vrije, peer: mars, latency_factor: 2}\n", `faults[0].peer: "mars" is not an included cluster`},
		{"peer on a partition", "", "  - {at_s: 1, kind: partition, target: vrije, peer: leiden}\n", "faults[0].peer: only a degrade has a peer"},
		{"factor on a kill", "", "  - {at_s: 1, kind: kill, target: vrije-n001, latency_factor: 2}\n", "faults[0]: latency_factor and bandwidth_factor belong to a degrade"},
		{"load without programs", "", "  - {at_s: 1, kind: load, target: vrije}\n", "faults[0].programs: is required"},
		{"load programs zero", "", "  - {at_s: 1, kind: load, target: vrije, programs: 0}\n", "faults[0].programs: must be in [1, 1000], got 0"},
		{"load programs huge", "", "  - {at_s: 1, kind: load, target: vrije, programs: 5000}\n", "faults[0].programs: must be in [1, 1000], got 5000"},
		{"load unknown cluster", "", "  - {at_s: 1, kind: load, target: mars, programs: 2}\n", `faults[0].target: "mars" is not an included cluster`},
		{"load beyond the cluster", "", "  - {at_s: 1, kind: load, target: leiden-n099, programs: 2}\n", "faults[0].target: cluster leiden has nodes leiden-n001 to leiden-n032, not leiden-n099"},
		{"load zero duration", "", "  - {at_s: 1, kind: load, target: vrije, programs: 2, duration_s: 0}\n", "faults[0].duration_s: must be greater than 0"},
		{"programs on a kill", "", "  - {at_s: 1, kind: kill, target: vrije-n001, programs: 2}\n", "faults[0].programs: only a load has programs, not a kill"},
		{"unknown field", "", "  - {at_s: 1, kind: kill, target: vrije-n001, loss: 0.1}\n", "faults[0].loss: line"},
	}
	// An out-of-range factor is one error, not also "changes nothing".
	s, _ := Parse([]byte(withFaults("", "  - {at_s: 1, kind: degrade, target: vrije, peer: leiden, bandwidth_factor: 0}\n")), "one")
	if err := s.Validate(fakeEnv()); err == nil || strings.Contains(err.Error(), "changes nothing") {
		t.Errorf("a factor out of range: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(withFaults(tc.policy, tc.faults)), tc.name)
			if err == nil {
				err = s.Validate(fakeEnv())
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %v (%T), want Errors", err, err)
			}
			for _, e := range es {
				if strings.HasPrefix(e.Error(), tc.want) {
					return
				}
			}
			t.Fatalf("want an error line starting %q, got:\n%v", tc.want, err)
		})
	}
}

// A valid timeline expands into the plan's actions in time order, with the
// heals and restores the durations imply; on_failure gives Resubmits.
func TestFaultsExpand(t *testing.T) {
	doc := withFaults("resubmit(2)", `  - {at_s: 300, kind: heal, target: amsterdam}
  - {at_s: 60, kind: kill, target: vrije-n003}
  - {at_s: 100, kind: partition, target: leiden, duration_s: 120}
  - {at_s: 90, kind: degrade, target: vrije, peer: amsterdam, bandwidth_factor: 0.5, duration_s: 300}
  - {at_s: 200, kind: partition, target: amsterdam}
  - {at_s: 30, kind: load, target: vrije, programs: 10, duration_s: 20}
  - {at_s: 40, kind: load, target: leiden-n002, programs: 3}
`)
	s, err := Parse([]byte(doc), "faults")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Expand(fakeEnv(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy.Resubmits != 2 {
		t.Errorf("resubmits %d, want 2", p.Policy.Resubmits)
	}
	var got []string
	for _, f := range p.Faults {
		got = append(got, f.At.String()+" "+f.Kind+" "+f.Target+" "+f.Peer)
	}
	want := []string{"30s load vrije ", "40s load leiden-n002 ", "50s unload vrije ", "1m0s kill vrije-n003 ", "1m30s degrade vrije amsterdam", "1m40s partition leiden ",
		"3m20s partition amsterdam ", "3m40s heal leiden ", "5m0s heal amsterdam ", "6m30s restore vrije amsterdam"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("timeline\n got %q\nwant %q", got, want)
	}
	for _, f := range p.Faults {
		if f.Kind == FaultDegrade && (f.BandwidthFactor != 0.5 || f.LatencyFactor != 1) {
			t.Errorf("degrade factors %g/%g", f.LatencyFactor, f.BandwidthFactor)
		}
		if (f.Kind == FaultLoad || f.Kind == FaultUnload) && f.Programs != map[string]int{"vrije": 10, "leiden-n002": 3}[f.Target] {
			t.Errorf("%s %s: programs %d", f.Kind, f.Target, f.Programs)
		}
		if f.Kind == FaultRestore && (f.BandwidthFactor != 1 || f.LatencyFactor != 1) {
			t.Errorf("restore factors %g/%g", f.LatencyFactor, f.BandwidthFactor)
		}
	}
	if c, ok := p.NodeCluster("vrije-n003"); !ok || c != "vrije" {
		t.Errorf("NodeCluster: %q %v", c, ok)
	}
	// fail (or nothing) resubmits nothing.
	s, _ = Parse([]byte(withFaults("fail", "")), "fail")
	if p, err := s.Expand(fakeEnv(), Overrides{}); err != nil || p.Policy.Resubmits != 0 || len(p.Faults) != 0 {
		t.Errorf("fail: %v %+v", err, p)
	}
}

// policy.migration is validated field by field and expands with its
// defaults.
func TestMigrationPolicy(t *testing.T) {
	bad := []struct{ block, want string }{
		{"{cost_model: guess}", `policy.migration.cost_model: unknown cost model "guess" (known: predicted, worst-case)`},
		{"{threshold: 1}", "policy.migration.threshold: must be in [0, 1), got 1"},
		{"{force: always}", `policy.migration.force: must be opposite (or absent: the rule decides), got "always"`},
		{"{upper: 0.5}", "policy.migration.upper: must be in (1, 1000], got 0.5"},
		{"{lower: 0}", "policy.migration.lower: must be in (0, 1), got 0"},
	}
	for _, tc := range bad {
		doc := strings.Replace(base, "policy:\n", "policy:\n  migration: "+tc.block+"\n", 1)
		s, err := Parse([]byte(doc), "m")
		if err == nil {
			err = s.Validate(fakeEnv())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.block, tc.want, err)
		}
	}
	doc := strings.Replace(base, "policy:\n", "policy:\n  migration: {force: opposite}\n", 1)
	s, err := Parse([]byte(doc), "m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Expand(fakeEnv(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Policy.Migration; m == nil || m.CostModel != "predicted" || m.Threshold != 0.3 || !m.Invert || m.Upper != 2 || m.Lower != 0.7 {
		t.Errorf("migration %+v", p.Policy.Migration)
	}
}
