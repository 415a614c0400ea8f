package sim

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/koala-emu/koala-emu/nodes/apps"
)

// FileVersion is the version of the model file format this package reads
// and writes.
const FileVersion = 1

// File is a learnt model: per application and job size, the parameters of
// an iteration fitted from emulated runs (`koala-emu model learn`), from
// which any link gives a time. See docs/simulation.md.
type File struct {
	Version    int        `json:"version"`
	Provenance Provenance `json:"provenance"`
	// Reference is the link the per-iteration times are at (apps.RefLatency,
	// apps.RefBandwidth): the intra-cluster link of a DAS-3 Myri-10G cluster.
	Reference LinkFigures `json:"reference"`
	// Apps are the applications measured, by name.
	Apps map[string]*AppModel `json:"apps"`
}

// Provenance says where and how a model file was measured.
type Provenance struct {
	Backend string `json:"backend"`
	Host    string `json:"host"`
	Date    string `json:"date"`
	// Commit is the koala-emu commit of the binary that measured ("" when
	// the build did not record it).
	Commit string `json:"commit,omitempty"`
	// Command is the command line that wrote the file.
	Command string `json:"command,omitempty"`
	// MinIterations, MaxDilation and WallPerRunS are the settings that chose
	// each run's time scale and dilation (every run records its own).
	MinIterations float64 `json:"min_iterations"`
	MaxDilation   float64 `json:"max_dilation"`
	WallPerRunS   float64 `json:"wall_per_run_s"`
	// LearnWallS is the wall time of the whole measurement.
	LearnWallS float64 `json:"learn_wall_s"`
	// Degraded counts the runs whose fidelity verdict was degraded.
	Degraded int `json:"runs_degraded"`
}

// LinkFigures is a link in the units of scenario files.
type LinkFigures struct {
	LatencyMS     float64 `json:"latency_ms"`
	BandwidthMBps float64 `json:"bandwidth_mbps"`
}

// AppModel is one application's model: one entry per job size measured,
// in increasing order of ranks.
type AppModel struct {
	Sizes []SizeModel `json:"sizes"`
}

// SizeModel is the fitted model of one application on one job size, with
// its default arguments.
type SizeModel struct {
	Ranks int `json:"ranks"`
	// Iterations is the job's iteration count at time scale 1 (1 for an
	// application that does not count iterations: the whole run is one).
	Iterations float64 `json:"iterations"`
	// IterationS is the fitted time of an iteration on the reference link.
	IterationS float64 `json:"iteration_s"`
	// LatencyRounds is the latency sensitivity: seconds per iteration per
	// second of one-way latency above the reference's (the effective
	// message rounds on an iteration's critical path).
	LatencyRounds float64 `json:"latency_rounds"`
	// CritBytes is the bandwidth sensitivity: seconds per iteration per
	// second-per-byte above the reference's (the bytes that cross the
	// slowest link one after the other in an iteration).
	CritBytes float64 `json:"crit_bytes"`
	// Clamped names the parameters the fit found negative and set to 0.
	Clamped []string `json:"clamped,omitempty"`
	// RMSRelative is the fit's root-mean-square error over its runs,
	// relative to each run's per-iteration time.
	RMSRelative float64 `json:"rms_relative"`
	Runs        []Run   `json:"runs"`
}

// Run is one measured run of a single job.
type Run struct {
	Link LinkFigures `json:"link"`
	// ExecS is the job's execution time in scenario seconds.
	ExecS     float64 `json:"exec_s"`
	TimeScale float64 `json:"time_scale"`
	// IterationsRun is the iterations the run did: the size's iterations
	// divided by the time scale, at least 1 (apps.Params).
	IterationsRun float64 `json:"iterations_run"`
	Dilation      float64 `json:"dilation"`
	// OneOffOnce: the run charged its job's one-off phase once, not time
	// scale times (apps.Params.Credit), so its scenario time counts its
	// communication once however few iterations it ran (commScale 1).
	// Runs learnt before the credit do not say.
	OneOffOnce bool    `json:"one_off_once,omitempty"`
	WallS      float64 `json:"wall_s"`
	// Fidelity is the run's verdict (faithful, degraded, unmeasured) and
	// Reasons why it is not faithful.
	Fidelity string   `json:"fidelity"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Traffic is the size's parameters as an apps.Traffic, whose On gives an
// iteration's time on any link.
func (s SizeModel) Traffic() apps.Traffic {
	return apps.Traffic{Iteration: seconds(s.IterationS), Iterations: s.Iterations,
		Rounds: s.LatencyRounds, CritBytes: s.CritBytes}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Fit fits an iteration's time t = I + f (R (lat - RefLatency) + C (1/bw -
// 1/RefBandwidth)) to runs by least squares (an exact solve with three runs
// at independent links), where t is a run's ExecS / iterations, f its
// commScale, and a bandwidth at or above the reference's counts as the
// reference's (apps.Traffic.On).
// A parameter fitted negative (measurement noise on a link it does not
// feel) is set to 0 and the others fitted again without it.
func Fit(ranks int, iterations float64, runs []Run) (SizeModel, error) {
	s := SizeModel{Ranks: ranks, Iterations: iterations, Runs: runs}
	if iterations <= 0 {
		return s, fmt.Errorf("fit: %d ranks: iterations must be > 0 (got %v)", ranks, iterations)
	}
	if len(runs) < 3 {
		return s, fmt.Errorf("fit: %d ranks: %d runs, need at least 3 (reference, added latency, reduced bandwidth)", ranks, len(runs))
	}
	x := make([][3]float64, len(runs))
	y := make([]float64, len(runs))
	for i, r := range runs {
		x[i] = regressors(r.Link)
		f := commScale(r, iterations)
		x[i][1] *= f
		x[i][2] *= f
		y[i] = r.ExecS / iterations
	}
	free := [3]bool{true, true, true}
	var b [3]float64
	for {
		var err error
		if b, err = leastSquares(x, y, free); err != nil {
			return s, fmt.Errorf("fit: %d ranks: %w", ranks, err)
		}
		neg := -1
		for k := 1; k < 3; k++ {
			if free[k] && b[k] < 0 && (neg < 0 || b[k] < b[neg]) {
				neg = k
			}
		}
		if neg < 0 {
			break
		}
		free[neg] = false
		s.Clamped = append(s.Clamped, [3]string{"iteration_s", "latency_rounds", "crit_bytes"}[neg])
	}
	if b[0] <= 0 {
		return s, fmt.Errorf("fit: %d ranks: fitted iteration time %g s is not positive", ranks, b[0])
	}
	s.IterationS, s.LatencyRounds, s.CritBytes = b[0], b[1], b[2]
	ss := 0.0
	for i := range runs {
		e := (b[0] + b[1]*x[i][1] + b[2]*x[i][2] - y[i]) / y[i]
		ss += e * e
	}
	s.RMSRelative = math.Sqrt(ss / float64(len(runs)))
	return s, nil
}

// commScale is how many times a run's scenario time counts each
// iteration's communication, relative to a run at time scale 1: its time
// scale times the iterations it did, over the size's iterations. 1 when
// the time scale divides the iterations (every application with many
// iterations); the time scale for a run cut to one iteration whose
// communication the time scale does not cut (prime's final allreduce: its
// emulated run pays it once, but scenario time multiplies it by the time
// scale). 1 for a run that does not say, and for a run that charged its
// one-off phase once (Run.OneOffOnce).
func commScale(r Run, iterations float64) float64 {
	if r.OneOffOnce || r.TimeScale <= 0 || r.IterationsRun <= 0 {
		return 1
	}
	return r.TimeScale * r.IterationsRun / iterations
}

// regressors are a run's columns of the fit: 1, the latency above the
// reference's in seconds, the seconds per byte above the reference's.
func regressors(l LinkFigures) [3]float64 {
	lat := l.LatencyMS/1e3 - apps.RefLatency.Seconds()
	inv := 0.0
	if bw := l.BandwidthMBps * 1e6; bw > 0 && bw < apps.RefBandwidth {
		inv = 1/bw - 1/apps.RefBandwidth
	}
	return [3]float64{1, lat, inv}
}

// leastSquares solves the normal equations of y = x b over the free
// columns (the others' coefficients are 0), by Gaussian elimination with
// partial pivoting; columns are scaled to unit norm first, as latency and
// seconds per byte differ by orders of magnitude.
func leastSquares(x [][3]float64, y []float64, free [3]bool) ([3]float64, error) {
	var cols []int
	for k := range free {
		if free[k] {
			cols = append(cols, k)
		}
	}
	n := len(cols)
	scale := make([]float64, n)
	for j, k := range cols {
		for i := range x {
			scale[j] += x[i][k] * x[i][k]
		}
		scale[j] = math.Sqrt(scale[j])
		if scale[j] == 0 {
			return [3]float64{}, fmt.Errorf("no run varies %s", [3]string{"the constant", "the latency", "the bandwidth"}[k])
		}
	}
	a := make([][]float64, n)
	for r := range a {
		a[r] = make([]float64, n+1)
		for c := 0; c <= n; c++ {
			for i := range x {
				xr := x[i][cols[r]] / scale[r]
				if c == n {
					a[r][c] += xr * y[i]
				} else {
					a[r][c] += xr * x[i][cols[c]] / scale[c]
				}
			}
		}
	}
	for p := 0; p < n; p++ {
		best := p
		for r := p + 1; r < n; r++ {
			if math.Abs(a[r][p]) > math.Abs(a[best][p]) {
				best = r
			}
		}
		a[p], a[best] = a[best], a[p]
		if math.Abs(a[p][p]) < 1e-12 {
			return [3]float64{}, errors.New("the runs' links do not separate latency from bandwidth")
		}
		for r := p + 1; r < n; r++ {
			f := a[r][p] / a[p][p]
			for c := p; c <= n; c++ {
				a[r][c] -= f * a[p][c]
			}
		}
	}
	sol := make([]float64, n)
	for p := n - 1; p >= 0; p-- {
		v := a[p][n]
		for c := p + 1; c < n; c++ {
			v -= a[p][c] * sol[c]
		}
		sol[p] = v / a[p][p]
	}
	var b [3]float64
	for j, k := range cols {
		b[k] = sol[j] / scale[j]
	}
	return b, nil
}

//go:embed models/inproc.json
var shipped []byte

// Shipped is the model file measured on the inproc backend that ships with
// koala-emu (launch/sim/models/inproc.json).
func Shipped() (*File, error) {
	return ParseFile(shipped, "shipped model launch/sim/models/inproc.json")
}

// LoadFile reads a model file.
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	return ParseFile(data, path)
}

// ParseFile decodes and checks a model file; an error names the file and
// the field at fault.
func ParseFile(data []byte, name string) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("model file %s: %w", name, err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("model file %s: %w", name, err)
	}
	return &f, nil
}

// Validate checks a model file's fields; the error names the first one at
// fault by its JSON path.
func (f *File) Validate() error {
	if f.Version != FileVersion {
		return fmt.Errorf("version: %d is not supported (this koala-emu reads version %d)", f.Version, FileVersion)
	}
	if f.Provenance.Backend == "" {
		return errors.New("provenance.backend: is required")
	}
	if !same(f.Reference.LatencyMS, apps.RefLatency.Seconds()*1e3) || !same(f.Reference.BandwidthMBps, apps.RefBandwidth/1e6) {
		return fmt.Errorf("reference: {latency_ms %v, bandwidth_mbps %v} is not the applications' reference link {%v, %v}",
			f.Reference.LatencyMS, f.Reference.BandwidthMBps, apps.RefLatency.Seconds()*1e3, apps.RefBandwidth/1e6)
	}
	if len(f.Apps) == 0 {
		return errors.New("apps: no application")
	}
	for _, name := range sortedNames(f.Apps) {
		a := f.Apps[name]
		p := "apps." + name
		if _, err := apps.Lookup(name); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if a == nil || len(a.Sizes) == 0 {
			return fmt.Errorf("%s.sizes: no size", p)
		}
		for i, s := range a.Sizes {
			q := fmt.Sprintf("%s.sizes[%d]", p, i)
			switch {
			case s.Ranks <= 0:
				return fmt.Errorf("%s.ranks: must be > 0 (got %d)", q, s.Ranks)
			case i > 0 && s.Ranks <= a.Sizes[i-1].Ranks:
				return fmt.Errorf("%s.ranks: %d does not follow %d (sizes go in increasing order)", q, s.Ranks, a.Sizes[i-1].Ranks)
			case !(s.Iterations > 0) || math.IsInf(s.Iterations, 0):
				return fmt.Errorf("%s.iterations: must be > 0 (got %v)", q, s.Iterations)
			case !(s.IterationS > 0) || math.IsInf(s.IterationS, 0):
				return fmt.Errorf("%s.iteration_s: must be > 0 (got %v)", q, s.IterationS)
			case !(s.LatencyRounds >= 0) || math.IsInf(s.LatencyRounds, 0):
				return fmt.Errorf("%s.latency_rounds: must be >= 0 (got %v)", q, s.LatencyRounds)
			case !(s.CritBytes >= 0) || math.IsInf(s.CritBytes, 0):
				return fmt.Errorf("%s.crit_bytes: must be >= 0 (got %v)", q, s.CritBytes)
			}
		}
	}
	return nil
}

// same: equal to a part in a billion (figures written in decimal).
func same(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func sortedNames(m map[string]*AppModel) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lookup is the model of app on n ranks: a measured size's, or between
// two measured sizes interpolated in log2(ranks): the iteration time as a
// power law (linear in log-log: compute divided over the ranks), the
// latency rounds and critical bytes linearly (collectives' rounds grow with
// log2 of the ranks), the iteration count linearly in ranks. ok is false for an application the file lacks or a
// size outside its measured range: the typed Traffic applies there.
func (f *File) Lookup(app string, n int) (SizeModel, bool) {
	if f == nil {
		return SizeModel{}, false
	}
	a := f.Apps[app]
	if a == nil {
		return SizeModel{}, false
	}
	for i, s := range a.Sizes {
		if s.Ranks == n {
			return s, true
		}
		if s.Ranks > n {
			if i == 0 {
				return SizeModel{}, false
			}
			lo := a.Sizes[i-1]
			w := (math.Log2(float64(n)) - math.Log2(float64(lo.Ranks))) / (math.Log2(float64(s.Ranks)) - math.Log2(float64(lo.Ranks)))
			wi := float64(n-lo.Ranks) / float64(s.Ranks-lo.Ranks)
			mix := func(a, b, w float64) float64 { return a + w*(b-a) }
			return SizeModel{Ranks: n, Iterations: mix(lo.Iterations, s.Iterations, wi),
				IterationS: math.Exp(mix(math.Log(lo.IterationS), math.Log(s.IterationS), w)), LatencyRounds: mix(lo.LatencyRounds, s.LatencyRounds, w),
				CritBytes: mix(lo.CritBytes, s.CritBytes, w)}, true
		}
	}
	return SizeModel{}, false
}
