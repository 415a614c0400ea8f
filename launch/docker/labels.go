package docker

import (
	"fmt"
	"maps"
	"regexp"
	"sync"

	"github.com/moby/moby/client"
)

// Labels carried by everything this package creates.
const (
	// LabelRun is on every container and network of a run; its value is
	// the run ID. CleanRun removes everything that has it.
	LabelRun = "koala-emu.run"
	// LabelRole is the container's role (scheduler, kis, cluster, node,
	// runner).
	LabelRole = "koala-emu.role"
	// LabelCluster is the container's cluster (absent for the control plane).
	LabelCluster = "koala-emu.cluster"
	// LabelName is the container's name within the run.
	LabelName = "koala-emu.name"
	// LabelBatch numbers the Start call that created the container, so a
	// failed Start removes exactly what it started.
	LabelBatch = "koala-emu.batch"
	// LabelImage marks images built by BuildImage.
	LabelImage = "koala-emu.image"
)

// ReadyLine is the log line a koala-emu container prints when its actor
// host is up; Start waits for it by default.
const ReadyLine = "koala-emu node ready"

// The patterns are compiled when first used, not while the process starts
// (their bounded repetitions make programs of hundreds of instructions,
// paid by every command, a simulation's included).
var (
	idPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`) })
	namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`) })
)

func checkRunID(id string) error {
	if !idPattern().MatchString(id) {
		return fmt.Errorf("docker backend: run ID %q: want 1-40 of [a-z0-9_.-], starting with a letter or digit", id)
	}
	return nil
}

func checkName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("docker backend: container name %q: want 1-63 of [a-zA-Z0-9_.-], starting with a letter or digit", name)
	}
	return nil
}

// NetworkName is the Docker network of run id.
func NetworkName(runID string) string { return "koala-emu-" + runID }

// ContainerName is the Docker container name of a run's container.
func ContainerName(runID, name string) string { return "koala-emu-" + runID + "-" + name }

// networkLabels returns the labels of the network of run id.
func networkLabels(runID string, run map[string]string) map[string]string {
	l := maps.Clone(run)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelRun] = runID
	return l
}

// containerLabels returns the labels of a container of run id: the run's
// labels, the spec's, then the koala-emu.* labels.
func containerLabels(runID string, batch int, spec ContainerSpec, run map[string]string) map[string]string {
	l := make(map[string]string, len(run)+len(spec.Labels)+5)
	maps.Copy(l, run)
	maps.Copy(l, spec.Labels)
	l[LabelRun] = runID
	l[LabelName] = spec.Name
	l[LabelBatch] = fmt.Sprint(batch)
	if spec.Role != "" {
		l[LabelRole] = spec.Role
	}
	if spec.Cluster != "" {
		l[LabelCluster] = spec.Cluster
	}
	return l
}

// runFilter selects what belongs to run id, or to any run when id is "".
// Extra "key=value" labels narrow it further.
func runFilter(id string, extra ...string) client.Filters {
	f := client.Filters{}
	if id == "" {
		f = f.Add("label", LabelRun)
	} else {
		f = f.Add("label", LabelRun+"="+id)
	}
	for _, e := range extra {
		f = f.Add("label", e)
	}
	return f
}
