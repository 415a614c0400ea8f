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

// CostModels returns a fresh map from cost model name to constructor. It
// is the only place where cost models are listed. "predicted" carries
// FixedParts (SPEC §6's non-data parts) and a negligible disk write.
func CostModels() map[string]func() CostModel {
	return map[string]func() CostModel{
		"worst-case": func() CostModel { return WorstCase{} },
		"predicted":  func() CostModel { return Predicted{Fixed: FixedParts()} },
	}
}

// CostModelNames lists the registered cost model names, sorted.
func CostModelNames() []string {
	names := make([]string, 0, 2)
	for n := range CostModels() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewCostModel returns the cost model registered under name.
func NewCostModel(name string) (CostModel, error) {
	mk, ok := CostModels()[name]
	if !ok {
		return nil, fmt.Errorf("unknown migration cost model %q (known: %s)", name, strings.Join(CostModelNames(), ", "))
	}
	return mk(), nil
}
