package report

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/results"
	"github.com/koala-emu/koala-emu/sweep"
)

// update regenerates report/testdata: go test ./report -update
var update = flag.Bool("update", false, "regenerate the synthetic run, sweep and study directories under testdata/")

// runSpec describes a synthetic run directory.
type runSpec struct {
	scenario, policy string
	seed             uint64
	apps             []string
	jobs             int
	waitS            float64 // mean wait
	unplacedEvery    int     // every n-th job fails unplaced (0: none)
	malleable        bool
	verdict          string // fidelity verdict ("" : not measured)
	delft            bool   // include a GbE cluster in the manifest
	targetPct        float64
}

var baseExec = map[string]float64{"prime": 300, "wave": 600, "poisson": 450}

// genRun writes a run directory with the results package's own writers.
func genRun(dir string, s runSpec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(s.seed, 7))
	clusters := []string{"vrije", "amsterdam", "leiden"}
	if s.delft {
		clusters[2] = "delft"
	}
	var jobs []results.Job
	for i := 0; i < s.jobs; i++ {
		app := s.apps[i%len(s.apps)]
		k := 1 + i%3
		size := []int{8, 16, 32}[i%3]
		submit := float64(i) * 90
		wait := s.waitS * rng.ExpFloat64()
		penalty := 0.12
		if s.delft {
			penalty = 0.35
		}
		exec := baseExec[app] * (1 + penalty*float64(k-1)) * (0.9 + 0.2*rng.Float64())
		comps := ""
		for c := 0; c < k; c++ {
			if c > 0 {
				comps += "+"
			}
			comps += clusters[c] + ":" + strconv.Itoa(size/k)
		}
		j := results.Job{ID: fmt.Sprintf("j%04d", i+1), App: app, Size: size, Request: "flexible", Components: comps, Clusters: k,
			Submit: submit, Placement: submit + 0.8*wait, Start: submit + wait, End: submit + wait + exec, Tries: 1,
			Status: "completed", Nominal: baseExec[app]}
		if s.unplacedEvery > 0 && i%s.unplacedEvery == s.unplacedEvery-1 {
			j.Placement, j.Start, j.End, j.Status, j.Reason, j.Tries = -1, -1, submit+3600, "failed", reasonUnplaced, 240
			j.Components, j.Clusters = "", 0
		}
		if s.malleable {
			j.Malleable, j.AvgProcs, j.MaxProcs, j.Grows, j.Shrinks = true, float64(size)*1.4, float64(size)*2, 2, 1
		}
		jobs = append(jobs, j)
	}
	meta := results.Meta{Scenario: s.scenario, Backend: "inproc", Policy: s.policy, Shaper: "none", Seed: int64(s.seed),
		TimeScale: 96, Dilation: 4, WallS: 600, TotalNodes: 158, DurationS: float64(s.jobs) * 90, TargetNetUtilizationPct: s.targetPct}
	sum := results.Summarize(meta, jobs)
	if s.verdict != "" {
		sum.Fidelity = &fidelity.Report{Verdict: s.verdict, Jobs: s.jobs}
		if s.verdict == fidelity.Degraded {
			sum.Fidelity.Reasons = []string{"compute late p99 12.0% > 5.0%"}
		}
	}
	if s.malleable {
		var util []results.UtilSample
		var ops []results.ResizeOp
		for t := 0.0; t <= meta.DurationS; t += 120 {
			for ci, c := range clusters {
				capacity := []float64{170, 82, 64}[ci]
				local := capacity * (0.1 + 0.1*rng.Float64())
				koala := (capacity - local) * (0.3 + 0.5*rng.Float64()*t/meta.DurationS)
				util = append(util, results.UtilSample{T: t, Cluster: c, Capacity: capacity, Local: local, Koala: koala,
					Malleable: koala, Idle: capacity - local - koala})
			}
			if int(t)%600 == 0 {
				ops = append(ops, results.ResizeOp{T: t + 5, Job: "j0001", Op: "grow", Cluster: clusters[0], Initiator: "manager", From: 8, To: 16, ResizeS: 4, OpS: 1})
			}
			if int(t)%1440 == 0 {
				ops = append(ops, results.ResizeOp{T: t + 30, Job: "j0002", Op: "shrink", Cluster: clusters[1], Initiator: "manager",
					Mandatory: int(t)%2880 == 0, From: 16, To: 8, ResizeS: 2, OpS: 1})
			}
		}
		sum.Malleability = results.SummarizeMalleability(jobs, util, ops, map[string]int{"capacity": 10}, map[string]int{}, nil)
		if err := results.WriteSeries(dir, util, ops); err != nil {
			return err
		}
	}
	if err := sum.WriteJSON(dir); err != nil {
		return err
	}
	if err := results.WriteJobsCSV(dir, jobs); err != nil {
		return err
	}
	// A manifest in the shape netem writes: every ordered pair.
	bw := map[[2]string]float64{{"vrije", "amsterdam"}: 185, {"vrije", "leiden"}: 77, {"amsterdam", "leiden"}: 115,
		{"vrije", "delft"}: 45, {"amsterdam", "delft"}: 53}
	type link struct {
		LatencyMs     float64 `json:"latency_ms"`
		BandwidthMBps float64 `json:"bandwidth_mbps"`
	}
	type entry struct {
		Src       string `json:"src"`
		Dst       string `json:"dst"`
		Requested link   `json:"requested"`
		Mechanism string `json:"mechanism"`
	}
	var m struct {
		Backend string  `json:"backend"`
		Entries []entry `json:"entries"`
	}
	m.Backend = "inproc"
	for _, a := range clusters {
		for _, b := range clusters {
			l := link{LatencyMs: 0.03, BandwidthMBps: 560}
			if a != b {
				v, ok := bw[[2]string{a, b}]
				if !ok {
					v = bw[[2]string{b, a}]
				}
				l = link{LatencyMs: 1, BandwidthMBps: v}
			}
			m.Entries = append(m.Entries, entry{Src: a, Dst: b, Requested: l, Mechanism: "inproc"})
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestJSON), b, 0o644)
}

// handSweep is the hand-made sweep: AJRT (s) per policy and application at
// 10..50 % net utilisation, and the unplaced jobs per 100 submitted.
var handSweep = map[[2]string]struct {
	ajrt     [5]float64
	unplaced [5]int
}{
	{"wf", "prime"}:  {ajrt: [5]float64{100, 110, 130, 190, 400}},                                   // 190 <= 200 < 400: 40-50 %
	{"fcm", "prime"}: {ajrt: [5]float64{100, 120, 150, 250, 600}},                                   // 250 > 200: 30-40 %
	{"wf", "wave"}:   {ajrt: [5]float64{200, 210, 220, 230, 240}},                                   // never: > 50 %
	{"fcm", "wave"}:  {ajrt: [5]float64{200, 210, 220, 260, 300}, unplaced: [5]int{0, 1, 5, 9, 20}}, // 5 % unplaced at 30: 20-30 %
}

// handIntervals are the saturation intervals handSweep must give.
var handIntervals = map[[2]string]string{
	{"wf", "prime"}:  "40-50 %",
	{"fcm", "prime"}: "30-40 %",
	{"wf", "wave"}:   "> 50 % (not reached)",
	{"fcm", "wave"}:  "20-30 %",
}

const handSweepYAML = `base: das3-coalloc
backend: sim
grid:
  - name: policy
    variants:
      - {name: wf, set: {policy.placement: wf}}
      - {name: fcm, set: {policy.placement: fcm}}
  - path: workload.arrivals.net_utilization
    values: [0.1, 0.2, 0.3, 0.4, 0.5]
  - name: app
    path: workload.application
    values: [prime, wave]
`

// genSweep runs the hand-made sweep with package sweep, each cell writing
// the results.json handSweep gives it.
func genSweep(dir string) error {
	sw, err := sweep.Parse([]byte(handSweepYAML), filepath.Join(dir, "sweep.yaml"))
	if err != nil {
		return err
	}
	levels := map[string]int{"0.1": 0, "0.2": 1, "0.3": 2, "0.4": 3, "0.5": 4}
	runCell := func(_ context.Context, c sweep.Cell, cd string) (sweep.Row, error) {
		var pol, util, app string
		for _, v := range c.Values {
			switch v.Axis {
			case "policy":
				pol = v.Value
			case "net_utilization":
				util = v.Value
			case "app":
				app = v.Value
			}
		}
		h, ok := handSweep[[2]string{pol, app}]
		i, ok2 := levels[util]
		if !ok || !ok2 {
			return nil, fmt.Errorf("cell %s not in the hand-made table", c.ID)
		}
		f, _ := strconv.ParseFloat(util, 64)
		s := results.Summary{Meta: results.Meta{Scenario: "das3-coalloc", Backend: "sim", Policy: pol, Seed: 42, TimeScale: 1,
			Dilation: 1, TotalNodes: 204, DurationS: 86400, TargetNetUtilizationPct: 100 * f}}
		s.Jobs = results.Counts{Submitted: 100, Completed: 100 - h.unplaced[i], Failed: h.unplaced[i]}
		if h.unplaced[i] > 0 {
			s.FailReasons = map[string]int{reasonUnplaced: h.unplaced[i]}
		}
		s.AJRTS, s.AvgExecS, s.AvgWaitS = h.ajrt[i], 0.8*h.ajrt[0], h.ajrt[i]-0.8*h.ajrt[0]
		s.NetUtilizationPct, s.ObservedUtilizationPct = 95*f, 110*f
		s.CoallocatedPct = 30
		s.ExecByApp = map[string]results.Stat{app: {N: s.Jobs.Completed, MeanS: s.AvgExecS}}
		if err := s.WriteJSON(cd); err != nil {
			return nil, err
		}
		return sweep.Row{"ajrt_s": s.AJRTS, "net_utilization_pct": s.NetUtilizationPct}, nil
	}
	_, err = sweep.Run(context.Background(), sw, runCell, sweep.Options{Dir: dir})
	return err
}

// genStudy writes a study.json as study cluster-count --out does.
func genStudy(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rows []studyRow
	sets := map[string][][]string{
		"myri10g": {{"vrije"}, {"vrije", "amsterdam"}, {"vrije", "amsterdam", "leiden"}, {"vrije", "amsterdam", "leiden", "multimedian"}},
		"gbe":     {{"delft"}, {"delft", "vrije"}, {"delft", "vrije", "amsterdam"}, {"delft", "vrije", "amsterdam", "multimedian"}},
	}
	for _, ic := range []string{"myri10g", "gbe"} {
		for _, app := range []string{"wave", "poisson"} {
			for k, cs := range sets[ic] {
				f := 0.1
				if ic == "gbe" {
					f = 0.6
				}
				rows = append(rows, studyRow{Interconnect: ic, App: app, Clusters: cs, ExecS: baseExec[app] * (1 + f*float64(k)), Status: "completed"})
			}
		}
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, StudyJSON), b, 0o644)
}

// testRuns are the synthetic run directories.
var testRuns = map[string]runSpec{
	"run-wf": {scenario: "das3-coalloc", policy: "wf", seed: 1, apps: []string{"prime", "wave"}, jobs: 60, waitS: 40,
		verdict: fidelity.Faithful, targetPct: 40},
	"run-fcm": {scenario: "das3-coalloc", policy: "fcm", seed: 2, apps: []string{"prime", "wave"}, jobs: 60, waitS: 120,
		unplacedEvery: 20, verdict: fidelity.Degraded, targetPct: 40},
	"run-delft": {scenario: "das3-coalloc-delft", policy: "fcm", seed: 3, apps: []string{"prime", "wave"}, jobs: 45, waitS: 80,
		delft: true, targetPct: 40},
	"run-malleable": {scenario: "das3-malleable-pwa", policy: "wf", seed: 4, apps: []string{"poisson"}, jobs: 40, waitS: 20,
		malleable: true, targetPct: 30},
}

// generate writes every synthetic input under root: the runs, sweep/ and
// study/.
func generate(root string) error {
	for name, spec := range testRuns {
		if err := genRun(filepath.Join(root, name), spec); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "sweep")); err != nil {
		return err
	}
	if err := genSweep(filepath.Join(root, "sweep")); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return genStudy(filepath.Join(root, "study"))
}
