package placement

import (
	"fmt"
	"sort"
	"strings"
)

// Compile-time checks that every policy implements Policy.
var (
	_ Policy = WorstFit{}
	_ Policy = CloseToFiles{}
	_ Policy = ClusterMin{}
	_ Policy = FlexibleClusterMin{}
	_ Policy = CommAware{}
)

// Registry returns a fresh map from policy name to constructor. It is the
// only place where policies are listed.
func Registry() map[string]func() Policy {
	return map[string]func() Policy{
		"wf":  func() Policy { return WorstFit{} },
		"cf":  func() Policy { return CloseToFiles{} },
		"cm":  func() Policy { return ClusterMin{} },
		"fcm": func() Policy { return FlexibleClusterMin{} },
		"ca":  func() Policy { return CommAware{} },
	}
}

// Names lists the registered policy names, sorted.
func Names() []string {
	r := Registry()
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns the policy registered under name.
func New(name string) (Policy, error) {
	mk, ok := Registry()[name]
	if !ok {
		return nil, fmt.Errorf("unknown placement policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return mk(), nil
}
