package scenarios

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// Defaults applied when a field is absent.
const (
	DefaultSeed           = 1
	DefaultTimeScale      = 1.0
	DefaultDilation       = 1.0
	DefaultProcessors     = 2
	DefaultSpeed          = 1.0
	DefaultScanPeriod     = 30 * time.Second
	DefaultPlacementTries = 30
	DefaultStartupDelay   = 10 * time.Second
	DefaultProbePeriod    = 300 * time.Second
	DefaultCAMetric       = "latency"
	DefaultBackgroundJob  = 900 * time.Second
	DefaultBackgroundMax  = 8 // nodes per local job

	// Malleability (policy.malleability, workload.malleable).
	DefaultThreshold         = 1.0
	DefaultPollPeriod        = 30 * time.Second
	DefaultOpTimeout         = time.Hour
	DefaultMalleableFraction = 1.0
)

// MalleabilityPlacement is the only placement policy the malleability
// manager uses: Worst Fit on one cluster.
const MalleabilityPlacement = "wf"

// maxGenerated bounds the number of generated jobs of one scenario, so that
// a mistyped rate fails instead of exhausting memory.
const maxGenerated = 1_000_000

var (
	scenarioName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	clusterName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	das3Names    = []string{netem.Vrije, netem.Amsterdam, netem.Delft, netem.MultimediaN, netem.Leiden}
	requestKinds = []string{Fixed, NonFixed, Flexible}
	caMetrics    = []string{"latency", "bandwidth"}
)

// resolved is a scenario after validation: defaults filled in, names turned
// into indices, the link matrix built. Expand turns it into a Plan.
type resolved struct {
	seed                int64
	timeScale, dilation float64
	dilationAuto        bool
	wallBudget          time.Duration
	// longest is the longest duration of the scenario, for the wall check.
	longest    time.Duration
	topo       topo
	clusters   []Cluster
	links      netem.Matrix
	policy     Policy
	background []Background
	faults     []Fault

	app        string
	apps       []string // workload.applications, or nil
	args       map[string]float64
	files      []File
	request    string
	components int
	fixed      []int // cluster index per component, or nil
	sizes      []int
	generate   bool
	netUtil    float64
	meanGap    time.Duration
	duration   time.Duration
	maxJobs    int
	explicit   []Job // IDs not yet assigned

	malleable bool    // workload.malleable given
	fraction  float64 // malleable share of generated jobs
	// bounds of malleable jobs per application: workload.malleable.bounds
	// and, for generated applications, the profiles' bounds.
	bounds map[string]ProfileBounds

	batch *BatchPlan // a batch grid (scenario batch), or nil
}

// validator collects errors.
type validator struct{ errs Errors }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// secs converts seconds to a Duration; callers range-check s first
// (seconds, MaxScenarioSeconds).
func secs(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// seconds checks a duration field given in scenario seconds: finite, not
// negative (at least MinPositiveSeconds when positive is set) and at most
// MaxScenarioSeconds. It returns the duration, or 0 when it is out of range,
// and notes the longest duration for the wall-time check.
func (v *validator) seconds(r *resolved, path string, x float64, positive bool) time.Duration {
	switch {
	case !finite(x):
		v.add(path, "must be a finite number of seconds, got %g", x)
		return 0
	case positive && x <= 0:
		v.add(path, "must be greater than 0, got %g", x)
		return 0
	case positive && x < MinPositiveSeconds:
		v.add(path, "must be at least %g s, got %g", MinPositiveSeconds, x)
		return 0
	case x < 0:
		v.add(path, "must not be negative, got %g", x)
		return 0
	case x > MaxScenarioSeconds:
		v.add(path, "must be at most %g s (about %.1f years), got %g", float64(MaxScenarioSeconds), MaxScenarioSeconds/secondsPerYear, x)
		return 0
	}
	d := secs(x)
	r.longest = max(r.longest, d)
	return d
}

// atMost checks the upper bound of a count; lower bounds have messages of
// their own.
func (v *validator) atMost(path string, n, limit int) bool {
	if n > limit {
		v.add(path, "must be at most %d, got %d", limit, n)
		return false
	}
	return true
}

func known(list []string, name string) bool { return list == nil || slices.Contains(list, name) }

func sortedList(list []string) string {
	l := slices.Clone(list)
	sort.Strings(l)
	return strings.Join(l, ", ")
}

// Validate checks the scenario against env and returns every problem as
// Errors (nil when the scenario is valid).
func (s *Scenario) Validate(env Env) error {
	_, errs := s.resolve(env)
	return errs.err()
}

func (s *Scenario) resolve(env Env) (*resolved, Errors) {
	v := &validator{}
	r := &resolved{seed: DefaultSeed, timeScale: DefaultTimeScale, dilation: DefaultDilation}

	if s.Name == "" {
		v.add("name", "is required")
	} else if !scenarioName.MatchString(s.Name) {
		v.add("name", "%q: use letters, digits, '.', '_' and '-' (starting with a letter or digit)", s.Name)
	}
	if s.Seed != nil {
		r.seed = *s.Seed
	}
	if s.TimeScale != nil {
		r.timeScale = *s.TimeScale
		switch k := r.timeScale; {
		case !finite(k):
			v.add("time_scale", "must be a finite number, got %g", k)
			r.timeScale = DefaultTimeScale
		case k <= 0:
			v.add("time_scale", "must be greater than 0, got %g", k)
			r.timeScale = DefaultTimeScale
		case k < MinTimeScale || k > MaxTimeScale:
			v.add("time_scale", "must be in [%g, %g], got %g", MinTimeScale, MaxTimeScale, k)
			r.timeScale = DefaultTimeScale
		}
	}
	if w := s.WallBudget; w != nil {
		if s.TimeScale != nil {
			v.add("wall_budget", "give time_scale or wall_budget, not both (time_scale is %g, wall_budget %gs)", *s.TimeScale, w.Seconds)
		}
		switch x := w.Seconds; {
		case !finite(x) || x <= 0:
			v.add("wall_budget", "must be greater than 0, got %gs", x)
		case x > MaxWallSeconds:
			v.add("wall_budget", "must be at most %gs (about %.1f years), got %gs", float64(MaxWallSeconds), MaxWallSeconds/secondsPerYear, x)
		default:
			r.wallBudget = w.Duration()
		}
	}
	if d := s.Dilation; d != nil {
		switch f := d.Factor; {
		case d.Auto:
			r.dilationAuto = true
		case !finite(f) || f < MinDilation:
			v.add("dilation", "must be at least %g or %s, got %g", MinDilation, Auto, f)
		case f > MaxDilation:
			v.add("dilation", "must be at most %g, got %g", MaxDilation, f)
		default:
			r.dilation = f
		}
	}

	if s.Batch != nil {
		r.batch = v.batch(s, r)
		return r, v.errs
	}
	topoOK := v.topology(s, r)
	// The policy is checked before the workload (which needs max_clusters)
	// but reported after it, in document order.
	pv := &validator{}
	pv.policy(s, env, r)
	v.workload(s, env, r, topoOK)
	fv := &validator{}
	r.faults = fv.faults(s, r, topoOK)
	// The launcher checks again with the dilation and time scale it
	// resolves (Plan.Resolve).
	if r.wallBudget == 0 {
		if msg := wallFits(r.longest, r.dilation, r.timeScale); msg != "" {
			v.add("time_scale", "%s; raise time_scale or shorten the scenario", msg)
		}
	}
	return r, append(append(v.errs, pv.errs...), fv.errs...)
}
