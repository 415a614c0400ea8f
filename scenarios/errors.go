package scenarios

import "strings"

// FieldError is one problem with a scenario, located by the full field path
// from the document root, for example "topology.clusters[2].nodes" or
// "workload.jobs[0].components[1].cluster". Errors found while reading the
// YAML (unknown fields, wrong types) carry the line number in Msg.
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Errors is every problem found in a scenario, in document order as far as
// possible. Its Error method renders one problem per line.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// HasPath reports whether some error is located exactly at path.
func (es Errors) HasPath(path string) bool {
	for _, e := range es {
		if e.Path == path {
			return true
		}
	}
	return false
}

// err returns es as an error, or a nil error when es is empty (never a
// non-nil interface holding an empty Errors).
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}
