package sim

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

var refFigures = LinkFigures{LatencyMS: apps.RefLatency.Seconds() * 1e3, BandwidthMBps: apps.RefBandwidth / 1e6}

// synthetic is the runs a job with iteration time it, rounds and crit
// bytes would give over links, iters iterations each.
func synthetic(iters, it, rounds, crit float64, links []LinkFigures) []Run {
	runs := make([]Run, len(links))
	for i, l := range links {
		t := apps.Traffic{Iteration: seconds(it), Rounds: rounds, CritBytes: crit}
		on := t.On(time.Duration(l.LatencyMS*float64(time.Millisecond)), l.BandwidthMBps*1e6)
		runs[i] = Run{Link: l, ExecS: iters * on.Seconds()}
	}
	return runs
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

func TestFitRecoversKnownParameters(t *testing.T) {
	three := []LinkFigures{refFigures, {LatencyMS: 1, BandwidthMBps: 560}, {LatencyMS: 0.03, BandwidthMBps: 50}}
	five := append(append([]LinkFigures{}, three...), LinkFigures{LatencyMS: 2.5, BandwidthMBps: 100}, LinkFigures{LatencyMS: 0.5, BandwidthMBps: 20})
	cases := []struct {
		name              string
		it, rounds, crit  float64
		links             []LinkFigures
		itTol, paramsTole float64
	}{
		{"wave-like, exact solve (the nanosecond rounding of On moves 16 bytes by 0.03)", 739e-6, 1, 16, three, 1e-6, 5e-3},
		{"poisson-like, least squares over five links", 10.8e-3, 5, 98304, five, 1e-6, 1e-4},
		{"compute-bound: no bandwidth term", 0.5, 3, 0, five, 1e-6, 1e-4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Fit(8, 1000, synthetic(1000, c.it, c.rounds, c.crit, c.links))
			if err != nil {
				t.Fatal(err)
			}
			if !near(s.IterationS, c.it, c.itTol) || !near(s.LatencyRounds, c.rounds, c.paramsTole) ||
				math.Abs(s.CritBytes-c.crit) > c.paramsTole*math.Max(c.crit, 1) {
				t.Fatalf("fit = iteration %g rounds %g crit %g, want %g %g %g", s.IterationS, s.LatencyRounds, s.CritBytes, c.it, c.rounds, c.crit)
			}
			if s.RMSRelative > 1e-6 {
				t.Fatalf("rms %g on exact data", s.RMSRelative)
			}
		})
	}
	// Noise that makes the bandwidth term negative: it is clamped to 0 and
	// the latency refitted, and the file says so.
	runs := synthetic(100, 1e-3, 2, 0, three)
	runs[2].ExecS *= 0.97
	s, err := Fit(8, 100, runs)
	if err != nil {
		t.Fatal(err)
	}
	if s.CritBytes != 0 || len(s.Clamped) != 1 || s.Clamped[0] != "crit_bytes" || s.LatencyRounds <= 0 {
		t.Fatalf("noisy fit = %+v, want crit_bytes clamped to 0", s)
	}
	// A run cut to its one iteration by time scale K pays that iteration's
	// communication once while scenario time multiplies it by K (prime's
	// final allreduce): the fit divides it out.
	const k = 16000
	once := synthetic(1, 0, 3, 8, three)
	for i := range once {
		once[i].ExecS = 480 + k*once[i].ExecS
		once[i].TimeScale, once[i].IterationsRun = k, 1
	}
	if s, err := Fit(8, 1, once); err != nil || !near(s.IterationS, 480, 1e-9) || !near(s.LatencyRounds, 3, 1e-3) {
		t.Fatalf("run cut to one iteration at time scale %d: fit %+v, %v; want 480 s and 3 rounds", k, s, err)
	}
	// The same runs when the job charged its one-off phase once
	// (apps.Params.Credit): nothing to divide out.
	for i := range once {
		once[i].ExecS = 480 + (once[i].ExecS-480)/k
		once[i].OneOffOnce = true
	}
	if s, err := Fit(8, 1, once); err != nil || !near(s.IterationS, 480, 1e-9) || !near(s.LatencyRounds, 3, 1e-3) {
		t.Fatalf("run that charged its one-off phase once: fit %+v, %v; want 480 s and 3 rounds", s, err)
	}
	if _, err := Fit(8, 100, synthetic(100, 1e-3, 2, 0, []LinkFigures{refFigures, refFigures, refFigures})); err == nil ||
		!strings.Contains(err.Error(), "latency") {
		t.Fatalf("runs on one link: err %v, want one naming the latency no run varies", err)
	}
	if _, err := Fit(8, 100, synthetic(100, 1e-3, 2, 0, three[:2])); err == nil {
		t.Fatal("two runs fitted three parameters")
	}
}

func validFile() *File {
	return &File{Version: FileVersion, Provenance: Provenance{Backend: "inproc"}, Reference: refFigures,
		Apps: map[string]*AppModel{"wave": {Sizes: []SizeModel{
			{Ranks: 8, Iterations: 1000, IterationS: 2e-3, LatencyRounds: 3, CritBytes: 1000},
			{Ranks: 32, Iterations: 1000, IterationS: 0.5e-3, LatencyRounds: 5, CritBytes: 3000},
		}}}}
}

func TestParseFileNamesTheField(t *testing.T) {
	cases := map[string]struct {
		edit func(map[string]any)
		want string
	}{
		"version":      {func(m map[string]any) { m["version"] = 7 }, "version: 7"},
		"backend":      {func(m map[string]any) { m["provenance"].(map[string]any)["backend"] = "" }, "provenance.backend"},
		"reference":    {func(m map[string]any) { m["reference"].(map[string]any)["latency_ms"] = 1 }, "reference:"},
		"unknown app":  {func(m map[string]any) { m["apps"].(map[string]any)["tetris"] = m["apps"].(map[string]any)["wave"] }, "apps.tetris"},
		"crit bytes":   {func(m map[string]any) { size(m, 1)["crit_bytes"] = -1 }, "apps.wave.sizes[1].crit_bytes"},
		"iteration":    {func(m map[string]any) { size(m, 0)["iteration_s"] = 0 }, "apps.wave.sizes[0].iteration_s"},
		"order":        {func(m map[string]any) { size(m, 1)["ranks"] = 8 }, "apps.wave.sizes[1].ranks"},
		"unknown key":  {func(m map[string]any) { size(m, 0)["rounds"] = 1 }, `unknown field "rounds"`},
		"wrong type":   {func(m map[string]any) { size(m, 0)["ranks"] = "eight" }, "SizeModel.apps.sizes.ranks"},
		"no iteration": {func(m map[string]any) { size(m, 0)["iterations"] = -1 }, "apps.wave.sizes[0].iterations"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			data, _ := json.Marshal(validFile())
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			data, _ = json.Marshal(m)
			_, err := ParseFile(data, "bad.json")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.json") {
				t.Fatalf("err %v, want one naming bad.json and %q", err, c.want)
			}
		})
	}
	data, _ := json.Marshal(validFile())
	if _, err := ParseFile(data, "good.json"); err != nil {
		t.Fatalf("valid file: %v", err)
	}
}

func size(m map[string]any, i int) map[string]any {
	return m["apps"].(map[string]any)["wave"].(map[string]any)["sizes"].([]any)[i].(map[string]any)
}

func TestShippedModelParses(t *testing.T) {
	f, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if f.Provenance.Backend != "inproc" || len(f.Apps) == 0 {
		t.Fatalf("shipped model: backend %q, %d applications", f.Provenance.Backend, len(f.Apps))
	}
	for name, a := range f.Apps {
		for _, s := range a.Sizes {
			if len(s.Runs) < 3 {
				t.Errorf("%s on %d ranks fitted from %d runs", name, s.Ranks, len(s.Runs))
			}
		}
	}
}

func TestPredictUsesTheFile(t *testing.T) {
	links, err := netem.Preset("das3", []string{netem.Vrije, netem.Leiden})
	if err != nil {
		t.Fatal(err)
	}
	f := validFile()
	m := NewModel(map[string]float64{netem.Vrije: 0.5}, links).WithFile(f)
	typed := NewModel(map[string]float64{netem.Vrije: 0.5}, links)
	ranks := func(n int, c string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = c
		}
		return out
	}
	// 8 ranks on leiden: the file's size 8 on leiden's own link, speed 1.
	got, err := m.Predict("wave", nil, ranks(8, netem.Leiden))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := links.Link(netem.Leiden, netem.Leiden)
	want := time.Duration(1000 * float64(f.Apps["wave"].Sizes[0].Traffic().On(l.Latency, l.Bandwidth)))
	if got != want {
		t.Fatalf("file prediction %v, want %v", got, want)
	}
	if ty, _ := typed.Predict("wave", nil, ranks(8, netem.Leiden)); ty == got {
		t.Fatalf("the file's prediction equals the typed one (%v)", ty)
	}
	// Co-allocated over vrije (speed 0.5) and leiden: the inter-cluster link
	// and the slower speed.
	co := append(ranks(4, netem.Vrije), ranks(4, netem.Leiden)...)
	got, err = m.Predict("wave", nil, co)
	if err != nil {
		t.Fatal(err)
	}
	lat, bw, _ := m.slowest([]string{netem.Vrije, netem.Leiden})
	if want := time.Duration(1000 * float64(f.Apps["wave"].Sizes[0].Traffic().On(lat, bw)) / 0.5); got != want {
		t.Fatalf("co-allocated file prediction %v, want %v", got, want)
	}
	// 16 ranks: between the sizes; 64: outside, typed; with args: typed;
	// poisson: not in the file, typed.
	mid, _ := m.Predict("wave", nil, ranks(16, netem.Leiden))
	lo, _ := m.Predict("wave", nil, ranks(8, netem.Leiden))
	hi, _ := m.Predict("wave", nil, ranks(32, netem.Leiden))
	if !(mid < lo && mid > hi) {
		t.Fatalf("16 ranks %v not between 8 ranks %v and 32 ranks %v", mid, lo, hi)
	}
	for _, c := range []struct {
		app  string
		n    int
		args map[string]float64
	}{{"wave", 64, nil}, {"wave", 8, map[string]float64{"steps": 10}}, {"poisson", 8, nil}} {
		a, err1 := m.Predict(c.app, c.args, ranks(c.n, netem.Leiden))
		b, err2 := typed.Predict(c.app, c.args, ranks(c.n, netem.Leiden))
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("%s on %d ranks, args %v: %v (%v), typed %v (%v)", c.app, c.n, c.args, a, err1, b, err2)
		}
	}
	src := m.Sources()
	want2 := map[string]string{"wave/8": "both", "wave/16": "file", "wave/32": "file", "wave/64": "typed", "poisson/8": "typed"}
	for k, v := range want2 {
		if src[k] != v {
			t.Errorf("source of %s = %q, want %q (all: %v)", k, src[k], v, src)
		}
	}
}

func TestLookupInterpolates(t *testing.T) {
	f := validFile()
	s, ok := f.Lookup("wave", 16)
	if !ok {
		t.Fatal("16 ranks between 8 and 32 not found")
	}
	// Halfway in log2: rounds and bytes the mean, the iteration time the
	// geometric mean.
	if !near(s.LatencyRounds, 4, 1e-9) || !near(s.CritBytes, 2000, 1e-9) || !near(s.IterationS, 1e-3, 1e-9) {
		t.Fatalf("interpolated %+v", s)
	}
	for _, n := range []int{4, 33} {
		if _, ok := f.Lookup("wave", n); ok {
			t.Errorf("%d ranks outside the measured sizes found", n)
		}
	}
}
