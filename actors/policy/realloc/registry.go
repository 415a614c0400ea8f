package realloc

import (
	"fmt"
	"sort"
	"strings"
)

// Compile-time checks.
var (
	_ Heuristic = MCT{}
	_ Heuristic = MinMin{}
	_ Algorithm = Regular
	_ Algorithm = AllCancellation
)

// Heuristics returns a fresh map from heuristic name to constructor; the only
// place heuristics are listed.
func Heuristics() map[string]func() Heuristic {
	return map[string]func() Heuristic{
		"mct":    func() Heuristic { return MCT{} },
		"minmin": func() Heuristic { return MinMin{Oldest: 20} },
	}
}

// Algorithms returns a fresh map from algorithm name to function; the only
// place algorithms are listed.
func Algorithms() map[string]Algorithm {
	return map[string]Algorithm{
		"regular":          Regular,
		"all-cancellation": AllCancellation,
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// HeuristicNames lists the registered heuristics, sorted.
func HeuristicNames() []string { return sortedKeys(Heuristics()) }

// AlgorithmNames lists the registered algorithms, sorted.
func AlgorithmNames() []string { return sortedKeys(Algorithms()) }

// NewHeuristic returns the heuristic registered under name.
func NewHeuristic(name string) (Heuristic, error) {
	mk, ok := Heuristics()[name]
	if !ok {
		return nil, fmt.Errorf("unknown reallocation heuristic %q (known: %s)", name, strings.Join(HeuristicNames(), ", "))
	}
	return mk(), nil
}

// NewAlgorithm returns the algorithm registered under name.
func NewAlgorithm(name string) (Algorithm, error) {
	a, ok := Algorithms()[name]
	if !ok {
		return nil, fmt.Errorf("unknown reallocation algorithm %q (known: %s)", name, strings.Join(AlgorithmNames(), ", "))
	}
	return a, nil
}
