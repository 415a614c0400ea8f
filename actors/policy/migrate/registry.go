package migrate

import (
	"fmt"
	"sort"
	"strings"
)

// Compile-time checks that every cost model implements CostModel.
var (
	_ CostModel = WorstCase{}
	_ CostModel = Predicted{}
)

// CostModels returns a fresh map from cost model name to constructor, for
// a grid g. It is the only place where cost models are listed.
// "worst-case" is SPEC §6's 900 s whatever the grid; "predicted" is the
// move's data over the links plus g's parts (Grid), with a negligible disk
// write.
func CostModels(g Grid) map[string]func() CostModel {
	return map[string]func() CostModel{
		"worst-case": func() CostModel { return WorstCase{} },
		"predicted":  func() CostModel { return Predicted{Grid: &g} },
	}
}

// CostModelNames lists the registered cost model names, sorted.
func CostModelNames() []string {
	names := make([]string, 0, 2)
	for n := range CostModels(Grid{}) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewCostModel returns the cost model registered under name, for grid g.
func NewCostModel(name string, g Grid) (CostModel, error) {
	mk, ok := CostModels(g)[name]
	if !ok {
		return nil, fmt.Errorf("unknown migration cost model %q (known: %s)", name, strings.Join(CostModelNames(), ", "))
	}
	return mk(), nil
}
