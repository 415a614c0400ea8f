package placement

import (
	"fmt"
	"strings"
	"time"
)

// RequestType is how a job states its shape (SPEC §2). The zero value is not
// a valid type, so a request whose type was never set fails loudly.
type RequestType int

const (
	// Fixed: the user gives every component's size and cluster.
	Fixed RequestType = iota + 1
	// NonFixed: the user gives component sizes; the policy picks clusters.
	NonFixed
	// Flexible: the user gives only the total; the policy splits it.
	Flexible
)

// String returns the name ParseRequestType accepts.
func (t RequestType) String() string {
	switch t {
	case Fixed:
		return "fixed"
	case NonFixed:
		return "non-fixed"
	case Flexible:
		return "flexible"
	}
	return fmt.Sprintf("RequestType(%d)", int(t))
}

// ParseRequestType accepts "fixed", "non-fixed" and "flexible" (case and
// surrounding blanks ignored).
func ParseRequestType(s string) (RequestType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fixed":
		return Fixed, nil
	case "non-fixed":
		return NonFixed, nil
	case "flexible":
		return Flexible, nil
	}
	return 0, fmt.Errorf("unknown request type %q (known: fixed, non-fixed, flexible)", s)
}

// Component is one part of a fixed or non-fixed request.
type Component struct {
	// Size in nodes, at least 1.
	Size int
	// Cluster is required for fixed requests and ignored otherwise.
	Cluster string
}

// File is an input file of a job.
type File struct {
	Name string
	// Size in bytes.
	Size int64
	// Replicas names the clusters holding a copy; at least one.
	Replicas []string
}

// Request is what the co-allocator is asked to place.
type Request struct {
	JobID string
	Type  RequestType
	// Total nodes. Required for flexible requests; for fixed and non-fixed
	// requests it may be 0 (taken as the sum of the components) or must equal
	// that sum.
	Total int
	// Components of fixed and non-fixed requests; ignored for flexible ones.
	Components []Component
	// Files are the job's input files; only CF looks at them.
	Files []File
}

// ClusterState is one cluster as the information service sees it. Units are
// nodes: 0 <= Idle <= Capacity.
type ClusterState struct {
	Name     string
	Idle     int
	Capacity int
}

// Net is the network view of the information service (measured, not
// configured). ok=false means the pair is unknown or unavailable.
type Net interface {
	Latency(a, b string) (time.Duration, bool)
	// Bandwidth in bytes per second.
	Bandwidth(a, b string) (float64, bool)
}

// Snapshot is the state a policy decides on. Cluster order matters: it breaks
// every tie. A nil Net means there is no network view: no pair is known to be
// unavailable, CF can stage no file, and CA refuses to run (Internal).
type Snapshot struct {
	Clusters []ClusterState
	Net      Net
}

// CA metrics.
const (
	MetricLatency   = "latency"
	MetricBandwidth = "bandwidth"
)

// Options are the policy options of a scenario.
type Options struct {
	// MaxClusters caps the number of clusters one job may span; 0 = no cap.
	MaxClusters int
	// CAMetric is "latency" (default when empty) or "bandwidth"; only CA
	// reads it.
	CAMetric string
}

// Assignment is the part of a job placed on one cluster.
type Assignment struct {
	Cluster string
	Size    int
}

// Code is the status of a placement. The zero value is not a valid code.
type Code int

const (
	// Placed: Assignments hold the placement.
	Placed Code = iota + 1
	// NoFitNow: the job could be placed on this grid later; requeue it.
	NoFitNow
	// NeverFits: not even a fully idle grid could hold the job; fail it.
	NeverFits
	// Internal: the snapshot or the options are malformed; nothing is wrong
	// with the job itself.
	Internal
)

// String names the code as results files spell it.
func (c Code) String() string {
	switch c {
	case Placed:
		return "placed"
	case NoFitNow:
		return "no-fit-now"
	case NeverFits:
		return "never-fits"
	case Internal:
		return "internal"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Reasons are fixed strings, so results can count them.
const (
	ReasonPlaced = "placed"

	// NoFitNow reasons (also used with NeverFits where noted).
	ReasonNotEnoughIdle = "not enough idle nodes"
	// ReasonClusterCap: a placement exists only across more clusters than
	// MaxClusters allows.
	ReasonClusterCap = "cluster cap exceeded"
	// ReasonUnavailablePair: a placement exists only across a pair of
	// clusters whose link is unavailable.
	ReasonUnavailablePair = "would span an unavailable cluster pair"
	// ReasonFilesUnreachable (CF): a placement exists only on clusters to
	// which some input file cannot be staged.
	ReasonFilesUnreachable = "input files cannot be staged"
	// ReasonConstraints: placements exist, but each breaks a different
	// constraint (cap, unavailable pairs, file staging) and none meets all.
	ReasonConstraints = "no placement meets all constraints"
	// ReasonSearchLimit: the search for a placement gave up after
	// searchBudget steps; treated as NoFitNow since nothing was proven.
	ReasonSearchLimit = "placement search limit reached"

	// NeverFits-only reasons.
	ReasonExceedsCapacity = "larger than the grid even when all nodes are idle"
	ReasonInvalidRequest  = "invalid request"
	ReasonUnknownCluster  = "fixed component names an unknown cluster"

	// Internal reasons.
	ReasonBadSnapshot = "malformed snapshot"
	ReasonBadOptions  = "malformed options"
	ReasonNoNetwork   = "no network view"
)

// Outcome is the result of a placement.
type Outcome struct {
	Code   Code
	Reason string
	// Assignments, one per cluster (Placed only).
	Assignments []Assignment
	// Detail says what exactly was wrong for ReasonInvalidRequest,
	// ReasonUnknownCluster and Internal outcomes; free text for logs, never
	// for counting.
	Detail string
}

// Policy is one placement policy.
type Policy interface {
	Name() string
	Place(req Request, snap Snapshot, opts Options) Outcome
}
