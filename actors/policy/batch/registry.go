package batch

import (
	"fmt"
	"sort"
	"strings"
)

// Compile-time checks that every policy implements Policy.
var (
	_ Policy = FCFS{}
	_ Policy = CBF{}
)

// Registry returns a fresh map from policy name to constructor. It is the
// only place where batch policies are listed.
func Registry() map[string]func() Policy {
	return map[string]func() Policy{
		"fcfs": func() Policy { return FCFS{} },
		"cbf":  func() Policy { return CBF{} },
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
		return nil, fmt.Errorf("unknown batch policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return mk(), nil
}
