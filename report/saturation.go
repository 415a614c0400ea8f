package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Default saturation thresholds (see Saturate).
const (
	DefaultSaturationFactor = 2.0
	DefaultUnplacedPct      = 1.0
)

// Level is one net-utilisation level of a policy's series: the means over
// the runs (seeds) at that level.
type Level struct {
	// UtilPct is the net utilisation level, in percent: the sweep's
	// utilisation value (the arrivals' target), or the run's target.
	UtilPct float64
	// AJRTS is the mean of the runs' AJRT (s); NaN when no job completed.
	AJRTS float64
	// Submitted and Unplaced count jobs over the runs; Unplaced failed
	// because the scheduler gave up placing them (placement tries exceeded).
	Submitted, Unplaced int
}

// UnplacedPct is the share of the submitted jobs that were never placed.
func (l Level) UnplacedPct() float64 {
	if l.Submitted == 0 {
		return 0
	}
	return 100 * float64(l.Unplaced) / float64(l.Submitted)
}

// SaturationPoint is where a series saturates.
type SaturationPoint struct {
	// Found is false when no level saturates.
	Found bool
	// Index is the first saturated level; Lower and Upper bound the
	// interval (Lower, Upper] where saturation sets in: the last level
	// below it and the first saturated one. Lower is NaN when the lowest
	// level is already saturated; without saturation, Lower is the highest
	// level and Upper is NaN.
	Index        int
	Lower, Upper float64
	// Why says which criterion fired.
	Why string
}

// Saturate applies the saturation rule to levels (sorted here by UtilPct):
// with A0 the AJRT at the lowest level, the first level L where
//
//	AJRT(L) > k x A0, or
//	more than u % of the submitted jobs failed for not being placed
//	(placement tries exceeded), or
//	jobs were submitted and none completed,
//
// is the saturation point, and saturation sets in within (previous level,
// L]. k <= 0 and u < 0 take the defaults (2 and 1 %).
func Saturate(levels []Level, k, u float64) SaturationPoint {
	if k <= 0 {
		k = DefaultSaturationFactor
	}
	if u < 0 {
		u = DefaultUnplacedPct
	}
	ls := append([]Level(nil), levels...)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].UtilPct < ls[j].UtilPct })
	if len(ls) == 0 {
		return SaturationPoint{Lower: math.NaN(), Upper: math.NaN()}
	}
	base := ls[0].AJRTS
	for i, l := range ls {
		why := ""
		switch {
		case l.Submitted > 0 && math.IsNaN(l.AJRTS):
			why = "no job completed"
		case l.UnplacedPct() > u:
			why = fmt.Sprintf("%.1f %% of the jobs not placed", l.UnplacedPct())
		case i > 0 && base > 0 && !math.IsNaN(base) && l.AJRTS > k*base:
			why = fmt.Sprintf("AJRT %.3g s > %g x %.3g s", l.AJRTS, k, base)
		}
		if why == "" {
			continue
		}
		p := SaturationPoint{Found: true, Index: i, Lower: math.NaN(), Upper: l.UtilPct, Why: why}
		if i > 0 {
			p.Lower = ls[i-1].UtilPct
		}
		return p
	}
	return SaturationPoint{Lower: ls[len(ls)-1].UtilPct, Upper: math.NaN(), Why: "not reached"}
}

// Interval renders the point as a net-utilisation interval: "55-60 %",
// "<= 10 %" (saturated at the lowest level) or "> 90 % (not reached)".
func (p SaturationPoint) Interval() string {
	switch {
	case !p.Found && math.IsNaN(p.Lower):
		return "no data"
	case !p.Found:
		return "> " + pct(p.Lower) + " % (not reached)"
	case math.IsNaN(p.Lower):
		return "<= " + pct(p.Upper) + " %"
	default:
		return pct(p.Lower) + "-" + pct(p.Upper) + " %"
	}
}

func pct(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// ruleText states the rule with the thresholds in use.
func ruleText(k, u float64) string {
	return fmt.Sprintf("A policy's series saturates at the first net-utilisation level L where its AJRT exceeds %g x its AJRT "+
		"at the lowest level, or where more than %g %% of the submitted jobs failed for not being placed (placement tries "+
		"exceeded the threshold), or where no job completed; saturation sets in within (the level before L, L]. "+
		"Levels are the sweep's utilisation values (the arrivals' target net utilisation); AJRT is averaged over seeds.", k, u)
}

// series is one line of an AJRT figure: an application and a policy.
type series struct {
	App, Policy string
	Levels      []Level
}

// cellPoint is one run's contribution to a series.
type cellPoint struct {
	App, Policy string
	UtilPct     float64
	AJRTS       float64 // NaN: no job completed
	Submitted   int
	Unplaced    int
}

// groupSeries averages the points of each (application, policy, level)
// and returns the series in the order their application and policy first
// appear (a sweep's grid order).
func groupSeries(points []cellPoint) []series {
	type key struct {
		app, pol string
		x        float64
	}
	type acc struct {
		sum       float64
		n         int
		sub, unpl int
	}
	accs := map[key]*acc{}
	var order []key
	for _, p := range points {
		k := key{p.App, p.Policy, p.UtilPct}
		a := accs[k]
		if a == nil {
			a = &acc{}
			accs[k] = a
			order = append(order, k)
		}
		if !math.IsNaN(p.AJRTS) {
			a.sum += p.AJRTS
			a.n++
		}
		a.sub += p.Submitted
		a.unpl += p.Unplaced
	}
	byLine := map[[2]string]*series{}
	var lines [][2]string
	for _, k := range order {
		a := accs[k]
		lk := [2]string{k.app, k.pol}
		s := byLine[lk]
		if s == nil {
			s = &series{App: k.app, Policy: k.pol}
			byLine[lk] = s
			lines = append(lines, lk)
		}
		l := Level{UtilPct: k.x, AJRTS: math.NaN(), Submitted: a.sub, Unplaced: a.unpl}
		if a.n > 0 {
			l.AJRTS = a.sum / float64(a.n)
		}
		s.Levels = append(s.Levels, l)
	}
	out := make([]series, 0, len(lines))
	for _, lk := range lines {
		s := byLine[lk]
		sort.Slice(s.Levels, func(i, j int) bool { return s.Levels[i].UtilPct < s.Levels[j].UtilPct })
		out = append(out, *s)
	}
	return out
}

// axisKind classifies a sweep axis by its name.
func axisKind(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "util"):
		return "util"
	case n == "app" || strings.Contains(n, "application"):
		return "app"
	case n == "seed":
		return "seed"
	}
	return "other"
}

// unplacedOf counts the jobs that failed for not being placed.
func unplacedOf(reasons map[string]int) int {
	n := 0
	for r, c := range reasons {
		if strings.HasPrefix(r, reasonUnplaced) {
			n += c
		}
	}
	return n
}

// appOf names a run's application: its one application, else "mixed".
func appOf(execByApp map[string]int) string {
	if len(execByApp) == 1 {
		for a := range execByApp {
			return a
		}
	}
	if len(execByApp) == 0 {
		return "all"
	}
	return "mixed"
}

// sweepPoints turns a sweep's cells into series points: the utilisation
// axis (its name holds "util"; fractions are read as shares of 1) gives
// the level, else the run's target net utilisation; the application axis
// (app, application) the application, else the run's one application;
// the other axes but seed name the policy, else the run's policy.
func sweepPoints(s *sweepInput) []cellPoint {
	var out []cellPoint
	frac := true
	for _, c := range s.Cells {
		for _, v := range c.Values {
			if axisKind(v.Axis) == "util" {
				if f, err := strconv.ParseFloat(v.Value, 64); err == nil && f > 1 {
					frac = false
				}
			}
		}
	}
	for _, c := range s.Cells {
		sum := c.Summary
		p := cellPoint{UtilPct: math.NaN(), AJRTS: math.NaN(), Submitted: sum.Jobs.Submitted, Unplaced: unplacedOf(sum.FailReasons)}
		if sum.Jobs.Completed > 0 {
			p.AJRTS = sum.AJRTS
		}
		var others []string
		nOther := 0
		for _, v := range c.Values {
			if axisKind(v.Axis) == "other" {
				nOther++
			}
		}
		for _, v := range c.Values {
			switch axisKind(v.Axis) {
			case "util":
				if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
					if frac {
						f *= 100
					}
					p.UtilPct = f
				}
			case "app":
				p.App = v.Value
			case "other":
				if nOther == 1 {
					others = append(others, v.Value)
				} else {
					others = append(others, v.Axis+"="+v.Value)
				}
			}
		}
		if math.IsNaN(p.UtilPct) {
			p.UtilPct = runLevel(sum.TargetNetUtilizationPct, sum.NetUtilizationPct)
		}
		if p.App == "" {
			p.App = appOf(statKeys(sum.ExecByApp))
		}
		p.Policy = strings.Join(others, ",")
		if p.Policy == "" {
			p.Policy = sum.Policy
		}
		out = append(out, p)
	}
	return out
}

func runLevel(target, net float64) float64 {
	if target > 0 {
		return target
	}
	return net
}

func statKeys[V any](m map[string]V) map[string]int {
	out := make(map[string]int, len(m))
	for k := range m {
		out[k] = 1
	}
	return out
}

// runPoints turns run directories into series points: level the target
// net utilisation, application the runs' one application, policy the
// run's. Runs without a target are left out: their measured utilisation
// is not a level of a series.
func runPoints(runs []*run) []cellPoint {
	var out []cellPoint
	for _, r := range runs {
		if r.Summary.TargetNetUtilizationPct <= 0 {
			continue
		}
		apps := map[string]int{}
		for _, j := range r.Jobs {
			apps[j.App]++
		}
		sum := r.Summary
		p := cellPoint{App: appOf(apps), Policy: sum.Policy, UtilPct: runLevel(sum.TargetNetUtilizationPct, sum.NetUtilizationPct),
			AJRTS: math.NaN(), Submitted: sum.Jobs.Submitted, Unplaced: unplacedOf(sum.FailReasons)}
		if sum.Jobs.Completed > 0 {
			p.AJRTS = sum.AJRTS
		}
		out = append(out, p)
	}
	return out
}
