package scenarios

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// badInputs are out-of-range values that once slipped through (a duration
// overflowing time.Duration validated as ok and the run replayed 0 jobs), or
// could: each edit of the base scenario and the error line it must get. They
// are also the fuzz test's malformed seeds.
var badInputs = []struct {
	name  string
	edits []edit
	want  string
}{
	{"duration beyond time.Duration", []edit{{"duration_s: 3600", "duration_s: 1e12"}},
		"workload.duration_s: must be at most 1e+08 s (about 3.2 years), got 1e+12"},
	{"duration infinite", []edit{{"duration_s: 3600", "duration_s: .inf"}}, "workload.duration_s: must be a finite number of seconds, got +Inf"},
	{"duration not a number", []edit{{"duration_s: 3600", "duration_s: .nan"}}, "workload.duration_s: must be a finite number of seconds, got NaN"},
	{"duration rounds to zero", []edit{{"duration_s: 3600", "duration_s: 1e-12"}},
		"workload.duration_s: generated arrivals need a duration greater than 0"},
	{"submission beyond time.Duration", []edit{{"  duration_s: 3600\n", ""}, {"request: flexible", "request: flexible\n  jobs: [{at_s: 1e300, size: 8}]"}},
		"workload.jobs[0].at_s: must be at most 1e+08 s"},
	{"mean inter-arrival beyond time.Duration", []edit{{"{net_utilization: 0.4}", "{mean_interarrival_s: 1e19}"}},
		"workload.arrivals.mean_interarrival_s: must be at most 1e+08 s"},
	{"mean inter-arrival rounds to zero", []edit{{"{net_utilization: 0.4}", "{mean_interarrival_s: 1e-300}"}},
		"workload.arrivals.mean_interarrival_s: must be at least 0.001 s, got 1e-300"},
	{"utilisation giving a gap beyond time.Duration", []edit{{"{net_utilization: 0.4}", "{net_utilization: 1e-300}"}},
		"workload.arrivals.net_utilization: 1e-300 gives a mean inter-arrival time of"},
	{"too many generated jobs", []edit{{"{net_utilization: 0.4}", "{mean_interarrival_s: 0.001}"}},
		"workload.arrivals: would generate about 3600000 jobs"},
	{"max_jobs beyond the generator's cap", []edit{{"duration_s: 3600", "duration_s: 3600\n  max_jobs: 9223372036854775807"}},
		"workload.max_jobs: must be at most 1000000, got 9223372036854775807"},
	{"max_jobs beyond int64", []edit{{"duration_s: 3600", "duration_s: 3600\n  max_jobs: 9223372036854775808"}},
		`workload.max_jobs: line 19: "9223372036854775808" is not an integer`},
	{"scan period beyond time.Duration", []edit{{"placement: fcm", "placement: fcm\n  scan_period_s: 1e300"}},
		"policy.scan_period_s: must be at most 1e+08 s"},
	{"scan period below a millisecond", []edit{{"placement: fcm", "placement: fcm\n  scan_period_s: 1e-9"}},
		"policy.scan_period_s: must be at least 0.001 s"},
	{"startup delay beyond time.Duration", []edit{{"placement: fcm", "placement: fcm\n  startup_delay_s: 1e10"}},
		"policy.startup_delay_s: must be at most 1e+08 s"},
	{"probe period beyond time.Duration", []edit{{"placement: fcm", "placement: fcm\n  probe_period_s: 1e10"}},
		"policy.probe_period_s: must be at most 1e+08 s"},
	{"placement tries beyond int32", []edit{{"placement: fcm", "placement: fcm\n  placement_tries: 4294967296"}},
		"policy.placement_tries: must be at most 1000000, got 4294967296"},
	{"max clusters beyond int32", []edit{{"placement: fcm", "placement: fcm\n  max_clusters: 4294967296"}},
		"policy.max_clusters: must be at most 64, got 4294967296"},
	{"nodes beyond int32", []edit{{"{name: leiden, nodes: 32", "{name: leiden, nodes: 4294967296"}},
		"topology.clusters[4].nodes: must be at most 100000, got 4294967296"},
	{"nodes adding up beyond int64", []edit{{"{name: vrije, nodes: 85", "{name: vrije, nodes: 9223372036854775807"}, {"{name: leiden, nodes: 32", "{name: leiden, nodes: 9223372036854775807"}},
		"topology.clusters[0].nodes: must be at most 100000"},
	{"processors beyond int32", []edit{{"{name: leiden, nodes: 32", "{name: leiden, nodes: 32, processors: 4294967296"}},
		"topology.clusters[4].processors: must be at most 1024, got 4294967296"},
	{"speed near zero", []edit{{"cpu_ghz: 2.6}", "cpu_ghz: 2.6, speed: 1e-300}"}},
		"topology.clusters[4].speed: must be in [0.001, 1000], got 1e-300"},
	{"latency beyond time.Duration", []edit{{"latency_ms: 0.5", "latency_ms: 1e13"}},
		"topology.links.pairs[0].latency_ms: must be at most 60000 (one minute), got 1e+13"},
	{"bandwidth near zero", []edit{{"latency_ms: 0.5", "bandwidth_mbps: 1e-300"}},
		"topology.links.pairs[0].bandwidth_mbps: must be in [0.001, 1e+06], got 1e-300"},
	{"time scale near zero", []edit{{"seed: 7", "seed: 7\ntime_scale: 1e-300"}},
		"time_scale: must be in [0.001, 1e+06], got 1e-300"},
	{"time scale infinite", []edit{{"seed: 7", "seed: 7\ntime_scale: .inf"}}, "time_scale: must be a finite number, got +Inf"},
	{"wall time beyond the limit", []edit{{"seed: 7", "seed: 7\ntime_scale: 0.001\ndilation: 10"}, {"duration_s: 3600", "duration_s: 1e7"}},
		"time_scale: the scenario's longest duration, 1e+07s, would take 1e+11s of wall time at dilation 10 and time scale 0.001"},
	{"dilation beyond the limit", []edit{{"seed: 7", "seed: 7\ndilation: 1e300"}}, "dilation: must be at most 10000"},
	{"wall budget beyond time.Duration", []edit{{"seed: 7", "seed: 7\nwall_budget: 1e300"}}, "wall_budget: must be at most 1e+08s"},
	{"background job beyond time.Duration", []edit{{"request: flexible", "request: flexible\n  background: {min: 0, max: 0.1, mean_job_s: 1e300}"}},
		"workload.background.mean_job_s: must be at most 1e+08 s"},
	{"background job nodes beyond int32", []edit{{"request: flexible", "request: flexible\n  background: {min: 0, max: 0.1, max_job_nodes: 4294967296}"}},
		"workload.background.max_job_nodes: must be at most 100000"},
	{"job size beyond int32", []edit{{"sizes: [8, 16, 32]", "sizes: [8, 4294967296]"}}, "workload.sizes[1]: must be at most 6400000, got 4294967296"},
	{"explicit size beyond int32", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 0, size: 4294967296}]"}},
		"workload.jobs[0].size: must be at most 6400000"},
	{"component sizes adding up beyond int64", []edit{{"request: flexible", "request: flexible\n  jobs: [{at_s: 0, request: non-fixed, components: [{size: 9223372036854775807}, {size: 9223372036854775807}]}]"}},
		"workload.jobs[0].components[0].size: must be at most 100000"},
	{"file beyond int64 bytes", []edit{{"application: wave", "application: wave\n  input_files: [{name: data, size_mb: 1e300, replicas: [vrije]}]"}},
		"workload.input_files[0].size_mb: must be at most 1e+06 (1 TB), got 1e+300"},
	{"too many clusters", []edit{{"  clusters:\n", "  clusters:\n" + strings.Repeat("    - {name: vrije, nodes: 1}\n", 65)}},
		"topology.clusters: must be at most 64, got 70"},
}

// TestBadInputs runs every bad input through Parse, Validate and Expand:
// each gets its error, and Validate and Expand agree.
func TestBadInputs(t *testing.T) {
	for _, tc := range badInputs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := expandDoc(t, mutate(t, tc.edits...), Overrides{})
			wantError(t, err, tc.want)
		})
	}
}

// A duration out of range is said once: not also as the zero duration its
// rejection leaves behind.
func TestDurationOutOfRangeSaidOnce(t *testing.T) {
	for _, d := range []string{"1e12", ".inf", "-5"} {
		_, err := expandDoc(t, mutate(t, edit{"duration_s: 3600", "duration_s: " + d}), Overrides{})
		if err == nil || strings.Count(err.Error(), "workload.duration_s") != 1 {
			t.Errorf("duration_s %s: %v, want one error on workload.duration_s", d, err)
		}
	}
}

// TestMalleabilityRanges covers the fields of the malleability blocks, on a
// built-in malleable scenario.
func TestMalleabilityRanges(t *testing.T) {
	src, err := BuiltinSource("das3-malleable-pwa")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"poll_period_s: 30", "poll_period_s: 1e300", "policy.malleability.poll_period_s: must be at most 1e+08 s"},
		{"poll_period_s: 30", "poll_period_s: 1e-6", "policy.malleability.poll_period_s: must be at least 0.001 s"},
		{"poll_period_s: 30", "poll_period_s: 30\n    op_timeout_s: 1e12", "policy.malleability.op_timeout_s: must be at most 1e+08 s"},
		{"poll_period_s: 30", "poll_period_s: 30\n    max_tries: 4294967296", "policy.malleability.max_tries: must be at most 1000000"},
		{"nbody: {min: 2, max: 46}", "nbody: {min: 2, max: 4294967296}", "workload.malleable.bounds.nbody.max: must be at most 100000"},
	} {
		doc := string(src)
		if !strings.Contains(doc, tc.old) {
			t.Fatalf("test bug: %q not in das3-malleable-pwa", tc.old)
		}
		_, err := expandDoc(t, strings.Replace(doc, tc.old, tc.new, 1), Overrides{})
		wantError(t, err, tc.want)
	}
}

// FuzzLoad feeds the loader arbitrary documents, seeded with every built-in
// scenario and the bad inputs above: nothing panics, Validate and Expand
// agree, and every plan that comes out holds durations and counts that are
// in range.
func FuzzLoad(f *testing.F) {
	for _, name := range Builtins() {
		src, err := BuiltinSource(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte(base))
	for _, tc := range badInputs {
		s := base
		for _, e := range tc.edits {
			s = strings.Replace(s, e.old, e.new, 1)
		}
		f.Add([]byte(s))
	}
	f.Add([]byte(base + "  on_failure: resubmit(2)\nfaults:\n  - {at_s: 60, kind: kill, target: vrije-n003}\n" +
		"  - {at_s: 90, kind: partition, target: leiden}\n  - {at_s: 200, kind: heal, target: leiden}\n" +
		"  - {at_s: 100, kind: degrade, target: vrije, peer: amsterdam, bandwidth_factor: 0.5, duration_s: 300}\n"))
	for _, s := range []string{"", "---", "name: [", "a: &a [*a]", "name: x\ndilation: auto\nwall_budget: 10m", "{}", "- 1", "name: !!binary AAAA"} {
		f.Add([]byte(s))
	}
	env := fakeEnv()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		s, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		verr := s.Validate(env)
		p, err := s.Expand(env, Overrides{})
		if (verr == nil) != (err == nil) {
			t.Fatalf("Validate and Expand disagree:\nvalidate: %v\nexpand: %v", verr, err)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("an invalid scenario's error is %T, want Errors: %v", err, err)
			}
			return
		}
		checkPlanInRange(t, p)
	})
}

// checkPlanInRange checks what the runtime relies on: durations not
// negative and within range also in wall time, counts within int32, jobs
// within the submission window and the platform.
func checkPlanInRange(t *testing.T, p *Plan) {
	t.Helper()
	if !(p.TimeScale >= MinTimeScale && p.TimeScale <= MaxTimeScale && p.Dilation >= MinDilation && p.Dilation <= MaxDilation) {
		t.Fatalf("time scale %g or dilation %g out of range", p.TimeScale, p.Dilation)
	}
	for _, d := range []time.Duration{p.Duration, p.MeanInterarrival, p.WallBudget, p.Policy.ScanPeriod, p.Policy.StartupDelay, p.Policy.ProbePeriod} {
		if d < 0 || d.Seconds() > MaxScenarioSeconds {
			t.Fatalf("duration %v out of range", d)
		}
	}
	if p.WallBudget == 0 {
		if wall := p.longest().Seconds() * p.Dilation / p.TimeScale; wall > MaxWallSeconds {
			t.Fatalf("wall time %gs out of range", wall)
		}
	}
	total := p.TotalNodes()
	if total < 1 || total > math.MaxInt32 {
		t.Fatalf("total nodes %d", total)
	}
	for _, j := range p.Jobs {
		if j.Submit < 0 || j.Submit > p.Duration {
			t.Fatalf("job %s submitted at %v outside [0, %v]", j.ID, j.Submit, p.Duration)
		}
		if j.Size < 1 || j.Size > total {
			t.Fatalf("job %s of %d nodes on %d", j.ID, j.Size, total)
		}
		if j.Malleable && (j.Min < 1 || j.Max < j.Min || j.Max > math.MaxInt32) {
			t.Fatalf("job %s bounds [%d, %d]", j.ID, j.Min, j.Max)
		}
		for _, f := range j.Files {
			if f.Size <= 0 {
				t.Fatalf("job %s file %s of %d bytes", j.ID, f.Name, f.Size)
			}
		}
	}
	for i, f := range p.Faults {
		if f.At < 0 || f.At.Seconds() > 2*MaxScenarioSeconds || (i > 0 && f.At < p.Faults[i-1].At) {
			t.Fatalf("fault %d at %v out of range or order", i, f.At)
		}
		if (f.Kind == FaultDegrade || f.Kind == FaultRestore) && !(f.LatencyFactor >= MinFaultFactor && f.LatencyFactor <= MaxFaultFactor &&
			f.BandwidthFactor >= MinFaultFactor && f.BandwidthFactor <= MaxFaultFactor) {
			t.Fatalf("fault %d factors %g, %g", i, f.LatencyFactor, f.BandwidthFactor)
		}
		if (f.Kind == FaultLoad || f.Kind == FaultUnload) && (f.Programs < 1 || f.Programs > MaxLoadPrograms) {
			t.Fatalf("fault %d puts %d programs", i, f.Programs)
		}
		if f.Kind == FaultKill {
			if _, ok := p.NodeCluster(f.Target); !ok {
				t.Fatalf("fault %d kills %q, not a node of the plan", i, f.Target)
			}
		}
	}
	if p.Policy.Resubmits < 0 || p.Policy.Resubmits > MaxResubmits {
		t.Fatalf("resubmits %d", p.Policy.Resubmits)
	}
	if m := p.Policy.Malleability; m != nil && (m.PollPeriod <= 0 || m.OpTimeout <= 0) {
		t.Fatalf("malleability periods %v, %v", m.PollPeriod, m.OpTimeout)
	}
	for _, b := range p.Background {
		if b.MeanJob < 0 || b.MaxJobNodes < 0 {
			t.Fatalf("background %+v", b)
		}
	}
	for i, row := range p.Links.Links {
		for j, l := range row {
			if !l.Unavailable && i != j && (l.Latency < 0 || l.Bandwidth <= 0) {
				t.Fatalf("link %d-%d: %+v", i, j, l)
			}
		}
	}
}

// numericFields are the numeric fields of the two base documents (the base
// scenario of the tests and the built-in das3-malleable-pwa), each as the
// text that FuzzFields replaces with a fuzzed number.
var numericFields = []struct {
	malleable bool
	old, new  string // new holds one %s for the number
}{
	{false, "seed: 7", "seed: %s"},
	{false, "seed: 7", "seed: 7\ntime_scale: %s"},
	{false, "seed: 7", "seed: 7\ndilation: %s"},
	{false, "seed: 7", "seed: 7\nwall_budget: %s"},
	{false, "{name: vrije, nodes: 85", "{name: vrije, nodes: %s"},
	{false, "{name: leiden, nodes: 32", "{name: leiden, nodes: 32, processors: %s"},
	{false, "cpu_ghz: 2.4, speed: 0.9375}", "cpu_ghz: 2.4, speed: %s}"},
	{false, "latency_ms: 0.5", "latency_ms: %s"},
	{false, "latency_ms: 0.5", "bandwidth_mbps: %s"},
	{false, "{net_utilization: 0.4}", "{net_utilization: %s}"},
	{false, "{net_utilization: 0.4}", "{mean_interarrival_s: %s}"},
	{false, "duration_s: 3600", "duration_s: %s"},
	{false, "duration_s: 3600", "duration_s: 3600\n  max_jobs: %s"},
	{false, "sizes: [8, 16, 32]", "sizes: [8, %s]"},
	{false, "placement: fcm", "placement: fcm\n  scan_period_s: %s"},
	{false, "placement: fcm", "placement: fcm\n  placement_tries: %s"},
	{false, "placement: fcm", "placement: fcm\n  startup_delay_s: %s"},
	{false, "placement: fcm", "placement: fcm\n  probe_period_s: %s"},
	{false, "placement: fcm", "placement: fcm\n  max_clusters: %s"},
	{false, "request: flexible", "request: flexible\n  background: {min: 0, max: 0.1, mean_job_s: %s}"},
	{false, "request: flexible", "request: flexible\n  background: {min: 0, max: 0.1, max_job_nodes: %s}"},
	{false, "request: flexible", "request: flexible\n  jobs: [{at_s: %s, size: 8}]"},
	{false, "request: flexible", "request: flexible\n  jobs: [{at_s: 10, size: %s}]"},
	{false, "application: wave", "application: wave\n  input_files: [{name: d, size_mb: %s, replicas: [vrije]}]"},
	{false, "request: flexible", "request: non-fixed\n  components: %s"},
	{false, "placement: fcm", "placement: fcm\nfaults: [{at_s: %s, kind: kill, target: vrije-n001}]"},
	{false, "placement: fcm", "placement: fcm\nfaults: [{at_s: 10, kind: partition, target: leiden, duration_s: %s}]"},
	{false, "placement: fcm", "placement: fcm\nfaults: [{at_s: 10, kind: degrade, target: vrije, peer: leiden, latency_factor: %s, duration_s: 60}]"},
	{false, "placement: fcm", "placement: fcm\nfaults: [{at_s: 10, kind: degrade, target: vrije, peer: vrije, bandwidth_factor: %s}]"},
	{false, "placement: fcm", "placement: fcm\n  on_failure: resubmit(%s)"},
	{true, "threshold: 0.9", "threshold: %s"},
	{true, "poll_period_s: 30", "poll_period_s: %s"},
	{true, "poll_period_s: 30", "poll_period_s: 30\n    op_timeout_s: %s"},
	{true, "poll_period_s: 30", "poll_period_s: 30\n    max_tries: %s"},
	{true, "fraction: 1.0", "fraction: %s"},
	{true, "nbody: {min: 2, max: 46}", "nbody: {min: %s, max: 46}"},
	{true, "nbody: {min: 2, max: 46}", "nbody: {min: 2, max: %s}"},
	{true, "mean_interarrival_s: 30", "mean_interarrival_s: %s"},
	{true, "max_jobs: 300", "max_jobs: %s"},
	{true, "time_scale: 20", "time_scale: %s"},
}

// FuzzFields puts fuzzed numbers, as integers and as floats, in every
// numeric field: nothing panics, Validate and Expand agree, and every plan
// is in range.
func FuzzFields(f *testing.F) {
	for i := range numericFields {
		for _, x := range []float64{0, -1, 1, 0.5, 7, 1e3, 1e8, 1e12, 1e300, 9.3e18, math.Inf(1), math.NaN()} {
			f.Add(uint8(i), x, false)
		}
		f.Add(uint8(i), 2.0, true)
		f.Add(uint8(i), float64(math.MaxInt64), true)
	}
	mall, err := BuiltinSource("das3-malleable-pwa")
	if err != nil {
		f.Fatal(err)
	}
	env := fakeEnv()
	f.Fuzz(func(t *testing.T, field uint8, x float64, asInt bool) {
		fd := numericFields[int(field)%len(numericFields)]
		doc := base
		if fd.malleable {
			doc = string(mall)
		}
		num := strconv.FormatFloat(x, 'g', -1, 64)
		switch {
		case math.IsNaN(x):
			num = ".nan"
		case math.IsInf(x, 1):
			num = ".inf"
		case math.IsInf(x, -1):
			num = "-.inf"
		case asInt && math.Abs(x) < 1e19:
			num = strconv.FormatFloat(math.Trunc(x), 'f', 0, 64)
		}
		doc = strings.Replace(doc, fd.old, fmt.Sprintf(fd.new, num), 1)
		s, err := Parse([]byte(doc), "fuzz")
		if err != nil {
			return
		}
		verr := s.Validate(env)
		p, err := s.Expand(env, Overrides{})
		if (verr == nil) != (err == nil) {
			t.Fatalf("%s: Validate and Expand disagree:\nvalidate: %v\nexpand: %v", fmt.Sprintf(fd.new, num), verr, err)
		}
		if err == nil {
			checkPlanInRange(t, p)
		}
	})
}
