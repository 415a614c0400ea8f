package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

//go:embed *.yaml
var builtin embed.FS

// Builtins lists the names of the built-in scenarios (the *.yaml files of
// this package, without the extension), sorted.
func Builtins() []string {
	entries, err := fs.Glob(builtin, "*.yaml")
	if err != nil { // only on a malformed pattern
		panic(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = strings.TrimSuffix(e, ".yaml")
	}
	sort.Strings(names)
	return names
}

// BuiltinSource returns the YAML text of a built-in scenario.
func BuiltinSource(name string) ([]byte, error) {
	data, err := builtin.ReadFile(path.Clean(name) + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("built-in scenario %q (known: %s): %w", name, strings.Join(Builtins(), ", "), err)
	}
	return data, nil
}

// LoadBuiltin parses a built-in scenario by name (for example "das3-smoke").
func LoadBuiltin(name string) (*Scenario, error) {
	data, err := BuiltinSource(name)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data, "builtin:"+name)
	if err != nil {
		return nil, fmt.Errorf("built-in scenario %s: %w", name, err)
	}
	return s, nil
}

// Open loads a scenario: ref is a file path when it names an existing file
// or contains a path separator, and otherwise the name of a built-in
// scenario (with or without ".yaml").
func Open(ref string) (*Scenario, error) {
	if _, err := os.Stat(ref); err == nil || strings.ContainsRune(ref, os.PathSeparator) {
		return Load(ref)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scenario %s: %w", ref, err)
	}
	return LoadBuiltin(strings.TrimSuffix(ref, ".yaml"))
}
