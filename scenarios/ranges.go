package scenarios

import (
	"fmt"
	"time"
)

// Ranges that keep every duration and count of a plan far from overflowing
// time.Duration (int64 nanoseconds, about 292 years) and int32 (the wire
// contract's sizes and counts), also after the runtime scales scenario time
// to wall time (x dilation / time scale) and adds durations up.
const (
	// MaxScenarioSeconds bounds every duration of the scenario (windows,
	// periods, timeouts, submission times): 1e8 s, about 3.2 years.
	MaxScenarioSeconds = 1e8
	// MinPositiveSeconds is the least duration of a field that must be
	// positive (periods, timeouts, mean times): 1 ms, so that none rounds
	// to zero.
	MinPositiveSeconds = 1e-3
	// MaxWallSeconds bounds the wall time of the submission window (and a
	// wall_budget): 1e8 s. Expand and Plan.Resolve check the window's wall
	// time, duration x dilation / time scale, against it.
	MaxWallSeconds = 1e8
	// MinTimeScale and MaxTimeScale bound the time scale.
	MinTimeScale = 1e-3
	MaxTimeScale = 1e6
	// MinDilation and MaxDilation bound the dilation factor.
	MinDilation = 1.0
	MaxDilation = 1e4
	// MaxLatencyMS bounds a pair's one-way latency: one minute.
	MaxLatencyMS = 60_000
	// MinBandwidthMBps and MaxBandwidthMBps bound a pair's bandwidth (1 kB/s
	// to 1 TB/s).
	MinBandwidthMBps = 1e-3
	MaxBandwidthMBps = 1e6
	// MinSpeed and MaxSpeed bound a cluster's relative compute rate.
	MinSpeed = 1e-3
	MaxSpeed = 1e3
	// MaxNodes bounds the nodes of one cluster and MaxProcessors the
	// processors of one node; MaxClusters the clusters of a topology.
	MaxNodes      = 100_000
	MaxProcessors = 1024
	MaxClusters   = 64
	// MaxCount bounds the other counts (tries, rounds).
	MaxCount = 1_000_000
	// MaxFileMB bounds an input file: 1e6 MB (1 TB).
	MaxFileMB = 1e6
)

const secondsPerYear = 365.25 * 24 * 3600

// Resolve fixes what a plan leaves to the launcher, with the ranges Validate
// uses: it sets the dilation (chosen by the launcher when DilationAuto is
// set; pass p.Dilation to keep an explicit one) and the time scale (derived
// from WallBudget when that is set; pass p.TimeScale to keep it), clears
// DilationAuto, and checks that the plan's longest duration still fits
// MaxWallSeconds of wall time (x dilation / time scale). On error the plan
// is unchanged.
func (p *Plan) Resolve(dilation, timeScale float64) error {
	var errs Errors
	if !finite(dilation) || dilation < MinDilation || dilation > MaxDilation {
		errs = append(errs, FieldError{Path: "dilation", Msg: fmt.Sprintf("must be in [%g, %g], got %g", MinDilation, MaxDilation, dilation)})
	}
	if !finite(timeScale) || timeScale < MinTimeScale || timeScale > MaxTimeScale {
		errs = append(errs, FieldError{Path: "time_scale", Msg: fmt.Sprintf("must be in [%g, %g], got %g", MinTimeScale, MaxTimeScale, timeScale)})
	}
	if len(errs) == 0 {
		if msg := wallFits(p.longest(), dilation, timeScale); msg != "" {
			errs = append(errs, FieldError{Path: "time_scale", Msg: msg})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	p.Dilation, p.TimeScale, p.DilationAuto = dilation, timeScale, false
	return nil
}

// longest is the plan's longest duration in scenario time.
func (p *Plan) longest() time.Duration {
	d := max(p.Duration, p.MeanInterarrival, p.Policy.ScanPeriod, p.Policy.StartupDelay, p.Policy.ProbePeriod)
	if m := p.Policy.Malleability; m != nil {
		d = max(d, m.PollPeriod, m.OpTimeout)
	}
	for _, b := range p.Background {
		d = max(d, b.MeanJob)
	}
	for _, j := range p.Jobs {
		d = max(d, j.Submit)
	}
	return d
}

// wallFits checks that a scenario duration, scaled to wall time (x dilation
// / time scale), stays within MaxWallSeconds; it returns the reason when not.
func wallFits(longest time.Duration, dilation, timeScale float64) string {
	if wall := longest.Seconds() * dilation / timeScale; wall > MaxWallSeconds {
		return fmt.Sprintf("the scenario's longest duration, %gs, would take %.3gs of wall time at dilation %g and time scale %g (at most %gs, about %.1f years)",
			longest.Seconds(), wall, dilation, timeScale, float64(MaxWallSeconds), MaxWallSeconds/secondsPerYear)
	}
	return ""
}
