package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Scenario is one scenario document as written in YAML. Optional numbers are
// pointers so that "absent" (take the default) differs from an explicit zero
// (usually an error). Use Validate to check it and Expand to turn it into a
// Plan.
type Scenario struct {
	// Name identifies the scenario in results (letters, digits, '.', '_', '-').
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	// Seed drives every random draw of the workload; default 1.
	Seed *int64 `yaml:"seed,omitempty"`
	// TimeScale k > 0 (default 1): scenario seconds per wall second before
	// dilation. Arrivals, durations and iteration counts are divided by k at
	// run time; per-message latency and bandwidth are not.
	TimeScale *float64 `yaml:"time_scale,omitempty"`
	// WallBudget is the alternative to TimeScale (giving both is an error):
	// the wall time the run may take, as a Go duration ("10m") or seconds.
	// The launcher derives the time scale from it and the dilation.
	WallBudget *WallBudget `yaml:"wall_budget,omitempty"`
	// Dilation d >= 1 (default 1): latency x d, bandwidth / d, compute x d;
	// or auto: the launcher chooses the smallest d the host carries.
	Dilation *Dilation    `yaml:"dilation,omitempty"`
	Topology TopologySpec `yaml:"topology"`
	Workload WorkloadSpec `yaml:"workload"`
	Policy   PolicySpec   `yaml:"policy"`
	// Faults is the faults timeline: nodes killed, clusters partitioned
	// and healed, links degraded, at given scenario times (see FaultSpec).
	Faults []FaultSpec `yaml:"faults,omitempty"`
	// Batch makes the scenario a batch grid replaying SWF traces (SPEC §5;
	// see BatchSpec), in place of topology, workload, policy and faults.
	Batch *BatchSpec `yaml:"batch,omitempty"`

	source string // file name or built-in name, for messages
}

// Source returns the file (or built-in) name the scenario was read from.
func (s *Scenario) Source() string { return s.source }

// TopologySpec is the platform: clusters, which of them take part, and links.
type TopologySpec struct {
	Clusters []ClusterSpec `yaml:"clusters"`
	// Include lists the clusters that take part (default: all). Exclude is
	// the alternative; giving both is an error.
	Include []string  `yaml:"include,omitempty"`
	Exclude []string  `yaml:"exclude,omitempty"`
	Links   LinksSpec `yaml:"links"`
}

// ClusterSpec is one cluster of dual-processor (by default) nodes.
type ClusterSpec struct {
	// Name: lower-case letters, digits and '-' (it names containers).
	Name  string `yaml:"name"`
	Nodes int    `yaml:"nodes"`
	// Processors per node, default 2.
	Processors *int    `yaml:"processors,omitempty"`
	CPUGHz     float64 `yaml:"cpu_ghz,omitempty"`
	// Speed is the relative compute rate (Leiden 1.0), default 1.
	Speed *float64 `yaml:"speed,omitempty"`
	// Interconnect is myri10g or gbe; by default gbe under the gbe preset
	// and for delft under the das3 preset, myri10g otherwise.
	Interconnect string `yaml:"interconnect,omitempty"`
}

// LinksSpec is the link matrix: a netem preset plus symmetric pair overrides.
type LinksSpec struct {
	Preset string     `yaml:"preset"`
	Pairs  []PairSpec `yaml:"pairs,omitempty"`
}

// PairSpec overrides the link between two different clusters (both
// directions). Bandwidth is in MB/s (1e6 bytes/s of payload).
type PairSpec struct {
	A             string   `yaml:"a"`
	B             string   `yaml:"b"`
	LatencyMS     *float64 `yaml:"latency_ms,omitempty"`
	BandwidthMBps *float64 `yaml:"bandwidth_mbps,omitempty"`
	Unavailable   bool     `yaml:"unavailable,omitempty"`
}

// WorkloadSpec is the job stream: generated Poisson arrivals, explicit jobs,
// or both, plus the background load of local users.
type WorkloadSpec struct {
	// Application of generated jobs and default of explicit jobs. Required
	// when arrivals are given without applications, or when an explicit job
	// names no application.
	Application string `yaml:"application,omitempty"`
	// Applications: generated jobs draw their application uniformly from
	// this list (a seeded stream of its own). The alternative to
	// application; giving both is an error, and explicit jobs then name
	// their application.
	Applications []string           `yaml:"applications,omitempty"`
	Args         map[string]float64 `yaml:"args,omitempty"`
	InputFiles   []FileSpec         `yaml:"input_files,omitempty"`
	// Arrivals enables generated jobs; absent means explicit jobs only.
	Arrivals *ArrivalSpec `yaml:"arrivals,omitempty"`
	// DurationS is the submission window [0, duration) in scenario seconds.
	DurationS float64 `yaml:"duration_s,omitempty"`
	// MaxJobs caps the number of generated jobs (0: no cap).
	MaxJobs int `yaml:"max_jobs,omitempty"`
	// Sizes are total job sizes in nodes, drawn uniformly.
	Sizes []int `yaml:"sizes,omitempty"`
	// Request is fixed, non-fixed or flexible (default flexible).
	Request string `yaml:"request,omitempty"`
	// Components is the number of near-equal components of fixed and
	// non-fixed requests (default 1).
	Components *int `yaml:"components,omitempty"`
	// FixedClusters names the cluster of each component of fixed requests;
	// absent: a seeded choice of distinct clusters per job.
	FixedClusters []string        `yaml:"fixed_clusters,omitempty"`
	Background    *BackgroundSpec `yaml:"background,omitempty"`
	// Malleable makes generated jobs malleable (absent: none is) and gives
	// the per-application bounds of malleable jobs.
	Malleable *MalleableSpec `yaml:"malleable,omitempty"`
	Jobs      []JobSpec      `yaml:"jobs,omitempty"`
}

// MalleableSpec is the malleable share of the generated jobs and the bounds
// of malleable jobs per application.
type MalleableSpec struct {
	// Fraction in [0, 1] of the generated jobs that are malleable (default
	// 1): W_m = 1, W_mr = 0.5. Drawn per job from a seeded stream of its
	// own, so arrivals, sizes and applications do not move when it changes.
	// The other jobs are rigid, of the same size.
	Fraction *float64 `yaml:"fraction,omitempty"`
	// Bounds per application name, in processors; an absent bound (or
	// application) takes the application's profile bound.
	Bounds map[string]BoundsSpec `yaml:"bounds,omitempty"`
}

// BoundsSpec bounds the size of a malleable job, in processors.
type BoundsSpec struct {
	Min *int `yaml:"min,omitempty"`
	Max *int `yaml:"max,omitempty"`
}

// FileSpec is an input file and the clusters that hold a replica of it.
type FileSpec struct {
	Name     string   `yaml:"name"`
	SizeMB   float64  `yaml:"size_mb"`
	Replicas []string `yaml:"replicas"`
}

// ArrivalSpec sets the Poisson arrival rate: exactly one of a target net
// utilisation (from single-cluster execution times) or a mean inter-arrival.
type ArrivalSpec struct {
	NetUtilization    *float64 `yaml:"net_utilization,omitempty"`
	MeanInterarrivalS *float64 `yaml:"mean_interarrival_s,omitempty"`
}

// BackgroundSpec is the local users' load band, as a fraction of every
// included cluster's nodes, held between Min and Max.
type BackgroundSpec struct {
	Min float64 `yaml:"min"`
	Max float64 `yaml:"max"`
	// MeanJobS is the mean duration of a local job (default 900 s).
	MeanJobS *float64 `yaml:"mean_job_s,omitempty"`
	// MaxJobNodes is the largest local job in nodes (default 8).
	MaxJobNodes *int `yaml:"max_job_nodes,omitempty"`
}

// JobSpec is one explicit job.
type JobSpec struct {
	AtS float64 `yaml:"at_s"`
	// Application defaults to workload.application.
	Application string `yaml:"application,omitempty"`
	// Size in nodes; may be left out when components give it.
	Size int `yaml:"size,omitempty"`
	// Request defaults to workload.request.
	Request string `yaml:"request,omitempty"`
	// Components: for fixed, cluster and size of each; for non-fixed, sizes
	// only (absent: one component); for flexible, none.
	Components []ComponentSpec `yaml:"components,omitempty"`
	// Args are merged over workload.args when the job runs the workload's
	// application, and used alone otherwise.
	Args map[string]float64 `yaml:"args,omitempty"`
	// InputFiles default to workload.input_files.
	InputFiles []FileSpec `yaml:"input_files,omitempty"`
	// Malleable makes the job malleable; Min and Max (processors) default to
	// workload.malleable.bounds of its application, then to its profile.
	Malleable bool `yaml:"malleable,omitempty"`
	Min       *int `yaml:"min,omitempty"`
	Max       *int `yaml:"max,omitempty"`
}

// ComponentSpec is one component of an explicit job.
type ComponentSpec struct {
	Cluster string `yaml:"cluster,omitempty"`
	Size    int    `yaml:"size"`
}

// PolicySpec is the scheduler's configuration.
type PolicySpec struct {
	// Placement is the placement policy name (wf, cf, cm, fcm, ca, ...).
	Placement string `yaml:"placement"`
	// MaxClusters caps the clusters a job may span (0: no cap).
	MaxClusters int `yaml:"max_clusters,omitempty"`
	// CAMetric is latency (default) or bandwidth.
	CAMetric string `yaml:"ca_metric,omitempty"`
	// ScanPeriodS is the placement queue scan period, default 30 s.
	ScanPeriodS *float64 `yaml:"scan_period_s,omitempty"`
	// PlacementTries is the number of failed tries after which a job fails,
	// default 30.
	PlacementTries *int `yaml:"placement_tries,omitempty"`
	// StartupDelayS is the emulated local resource manager start latency per
	// job, default 10 s (DAS-3).
	StartupDelayS *float64 `yaml:"startup_delay_s,omitempty"`
	// ProbePeriodS is the information service's network probe period,
	// default 300 s.
	ProbePeriodS *float64 `yaml:"probe_period_s,omitempty"`
	// Malleability, when present, runs the malleability manager in place of
	// the co-allocating scheduler.
	Malleability *MalleabilitySpec `yaml:"malleability,omitempty"`
	// OnFailure is what happens to a job that fails after its placement (a
	// node lost, a rank's error): fail (default) ends it failed;
	// resubmit(N) submits it again, at most N times.
	OnFailure string `yaml:"on_failure,omitempty"`
	// Migration, when present, runs the rescheduler: checkpointable jobs
	// (qr) are watched by a contract monitor and may migrate (SPEC §6).
	Migration *MigrationSpec `yaml:"migration,omitempty"`
}

// MalleabilitySpec configures the malleability manager (SPEC §4).
type MalleabilitySpec struct {
	// Approach is the job-management approach: pra or pwa.
	Approach string `yaml:"approach"`
	// Policy is the malleability policy: fpsma or egs.
	Policy string `yaml:"policy"`
	// Threshold in (0, 1] is the fraction of every cluster's processors
	// KOALA may hold (default 1: no cap).
	Threshold *float64 `yaml:"threshold,omitempty"`
	// Thresholds override Threshold per included cluster.
	Thresholds map[string]float64 `yaml:"thresholds,omitempty"`
	// PollPeriodS is the time between decision rounds, default 30 s.
	PollPeriodS *float64 `yaml:"poll_period_s,omitempty"`
	// OpTimeoutS bounds how long the manager waits for a grow or shrink to
	// be acknowledged, default 3600 s.
	OpTimeoutS *float64 `yaml:"op_timeout_s,omitempty"`
	// MaxTries fails a waiting job after that many rounds (default 0: never).
	MaxTries *int `yaml:"max_tries,omitempty"`
}

// Load reads and parses a scenario file strictly (see Parse).
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	s, err := Parse(data, path)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// Parse parses one scenario document. Unknown fields, fields given twice and
// values of the wrong type are reported together as Errors, each with the
// field path and the line. name is used in messages only. Parse does not
// validate values; call Validate or Expand for that.
func Parse(data []byte, name string) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{Msg: "empty scenario document"}}
		}
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errors{{Msg: fmt.Sprintf("line %d: a scenario file holds one YAML document, found another", extra.Line)}}
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, Errors{{Msg: "empty scenario document"}}
		}
		root = root.Content[0]
	}
	var errs Errors
	checkNode(root, reflect.TypeOf(Scenario{}), "", &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	s := &Scenario{}
	if err := root.Decode(s); err != nil {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	s.source = name
	return s, nil
}

// checkNode walks a YAML node against the Go type it will be decoded into
// and records unknown fields, duplicate keys and type mismatches with their
// paths. A null value is accepted anywhere (it means "absent").
func checkNode(n *yaml.Node, t reflect.Type, path string, errs *Errors) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	add := func(p, format string, args ...any) {
		*errs = append(*errs, FieldError{Path: p, Msg: fmt.Sprintf(format, args...)})
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// A field type of its own (Dilation, WallBudget) says what it accepts.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			add(path, "line %d: %v", n.Line, err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			add(path, "line %d: expected a mapping of fields, found %s", n.Line, describe(n))
			return
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				add(p, "line %d: given twice (first at line %d)", k.Line, first)
				continue
			}
			seen[k.Value] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				add(p, "line %d: unknown field (known here: %s)", k.Line, strings.Join(sortedKeys(fields), ", "))
				continue
			}
			checkNode(v, ft, p, errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			add(path, "line %d: expected a mapping, found %s", n.Line, describe(n))
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			if k.Kind != yaml.ScalarNode {
				add(path, "line %d: keys must be plain names, found %s", k.Line, describe(k))
				continue
			}
			if first, dup := seen[k.Value]; dup {
				add(p, "line %d: given twice (first at line %d)", k.Line, first)
				continue
			}
			seen[k.Value] = k.Line
			checkNode(v, t.Elem(), p, errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			add(path, "line %d: expected a list, found %s", n.Line, describe(n))
			return
		}
		for i, c := range n.Content {
			checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			add(path, "line %d: expected %s, found %s", n.Line, typeWord(t), describe(n))
			return
		}
		// yaml.v3 truncates a float into an integer field: insist on an
		// integer literal there.
		intKind := strings.HasPrefix(t.Kind().String(), "int") || strings.HasPrefix(t.Kind().String(), "uint")
		if err := n.Decode(reflect.New(t).Interface()); err != nil || (intKind && n.ShortTag() != "!!int") {
			add(path, "line %d: %q is not %s", n.Line, n.Value, typeWord(t))
		}
	}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML names of a struct's exported fields to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "an unexpected node"
	}
}

func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	default:
		return "a " + t.String()
	}
}
