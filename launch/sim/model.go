package sim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
)

// Model predicts a job's execution time in scenario time: what the ranks of
// an emulated run would take, from the application, the clusters its ranks
// run on, those clusters' speeds and the link matrix.
//
// Rule: an application that describes its traffic (apps.Traffic) takes
// Iterations x Traffic.On(latency, bandwidth) on the reference processors,
// where the link is the job's slowest: the largest one-way latency and the
// smallest bandwidth over every pair of its clusters, the pair of a
// cluster with itself (its intra-cluster link) included. An application
// without traffic (prime: compute-bound) takes its Nominal time. Either is
// divided by the smallest speed among the job's clusters: a co-allocated
// job runs at the pace of its slowest processors (SPEC §1).
//
// Choices where the SPEC is silent: the speed divides the whole iteration,
// its communication included (a first-order model, as Traffic.On is; every
// DAS-3 cluster has two processors per node, so processors per node are
// not a factor); the time scale does not enter (an emulated run's
// iterations are cut by the time scale and its clock runs as much faster,
// so its scenario-time duration is the same); malleable applications are
// refused (their duration depends on the resizes they go through).
//
// With a model file (WithFile), an application and job size the file has
// (with default arguments) take the file's learnt iteration instead of the
// typed Traffic: Iterations x On(latency, bandwidth) of SizeModel.Traffic,
// divided by the speed as above. The rest falls back to the rule above;
// Sources says which took which.
type Model struct {
	speeds map[string]float64
	links  netem.Matrix
	file   *File
	mu     sync.Mutex
	used   map[appRanks]string // -> "file" or "typed"
}

// NewModel returns the model of clusters' speeds (by cluster name; a
// missing or non-positive speed counts as 1) over links, the undilated link
// matrix.
func NewModel(speeds map[string]float64, links netem.Matrix) *Model {
	return &Model{speeds: speeds, links: links, used: map[appRanks]string{}}
}

// WithFile makes m predict from a learnt model file where it can (nil:
// the typed Traffic only) and returns m.
func (m *Model) WithFile(f *File) *Model {
	m.file = f
	return m
}

// Sources says, for every application and job size predicted so far
// ("app/ranks"), whether the model file ("file") or the typed Traffic
// ("typed") gave its time, or "both" (jobs with arguments take the typed).
func (m *Model) Sources() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.used))
	for k, v := range m.used {
		out[k.app+"/"+strconv.Itoa(k.ranks)] = v
	}
	return out
}

// appRanks is an application and a job size, a key of Sources.
type appRanks struct {
	app   string
	ranks int
}

func (m *Model) note(app string, n int, src string) {
	k := appRanks{app, n}
	m.mu.Lock()
	if prev := m.used[k]; prev != "" && prev != src {
		src = "both"
	}
	m.used[k] = src
	m.mu.Unlock()
}

// ErrMalleable is returned for a malleable application, which the model
// cannot predict.
var ErrMalleable = errors.New("malleable applications are not modelled on the sim backend")

// Link is the matrix's link from a to b, for the information service's
// probes (dilation 1, no measurement).
func (m *Model) Link(a, b string) (netem.Link, error) { return m.links.Link(a, b) }

// Predict is the execution time of application app with args, whose ranks
// run on clusters (one entry per rank, in rank order).
func (m *Model) Predict(app string, args map[string]float64, clusters []string) (time.Duration, error) {
	if len(clusters) == 0 {
		return 0, errors.New("predict: a job without ranks")
	}
	a, err := apps.Lookup(app)
	if err != nil {
		return 0, fmt.Errorf("predict: %w", err)
	}
	if _, ok := a.(apps.Malleable); ok {
		return 0, fmt.Errorf("application %s: %w", app, ErrMalleable)
	}
	n := len(clusters)
	// The clusters in order of first appearance: a job spans a few, each
	// rank names one, so a scan of those seen beats a set.
	distinct := make([]string, 0, 4)
	for _, c := range clusters {
		if !slices.Contains(distinct, c) {
			distinct = append(distinct, c)
		}
	}
	speed := 0.0
	for _, c := range distinct {
		s := m.speeds[c]
		if s <= 0 {
			s = 1
		}
		if speed == 0 || s < speed {
			speed = s
		}
	}
	if s, ok := m.file.Lookup(app, n); ok && len(args) == 0 {
		lat, bw, err := m.slowest(distinct)
		if err != nil {
			return 0, err
		}
		m.note(app, n, "file")
		t := s.Traffic()
		return time.Duration(t.Iterations * float64(t.On(lat, bw)) / speed), nil
	}
	m.note(app, n, "typed")
	t, err := apps.TrafficOf(a, n, args)
	if err != nil {
		return 0, fmt.Errorf("predict %s on %d ranks: %w", app, n, err)
	}
	var d time.Duration
	if t.Iterations > 0 && t.Iteration > 0 {
		lat, bw, err := m.slowest(distinct)
		if err != nil {
			return 0, err
		}
		d = time.Duration(t.Iterations * float64(t.On(lat, bw)))
	} else {
		if d, err = apps.NominalArgs(a, n, args); err != nil {
			return 0, fmt.Errorf("predict %s on %d ranks: %w", app, n, err)
		}
	}
	return time.Duration(float64(d) / speed), nil
}

// slowest is the largest latency and smallest bandwidth (0: unlimited)
// over every pair of clusters, each with itself included.
func (m *Model) slowest(clusters []string) (time.Duration, float64, error) {
	var lat time.Duration
	bw := 0.0
	for i, a := range clusters {
		for _, b := range clusters[i:] {
			l, err := m.links.Link(a, b)
			if err != nil {
				return 0, 0, fmt.Errorf("predict: link %s-%s: %w", a, b, err)
			}
			lat = max(lat, l.Latency)
			if l.Bandwidth > 0 && (bw == 0 || l.Bandwidth < bw) {
				bw = l.Bandwidth
			}
		}
	}
	return lat, bw, nil
}
