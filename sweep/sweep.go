package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/koala-emu/koala-emu/scenarios"
)

// Sweep is one sweep file.
type Sweep struct {
	// Base is the base scenario: a file (relative paths are relative to the
	// sweep file) or the name of a built-in scenario.
	Base string `yaml:"base"`
	// Backend runs the cells (inproc, netns, docker, sim); empty leaves the
	// choice to the caller.
	Backend string `yaml:"backend,omitempty"`
	// Parallel is the number of cells run at once (default 1).
	Parallel int `yaml:"parallel,omitempty"`
	// Set holds overrides applied to every cell before the grid's: a
	// mapping from path to value.
	Set yaml.Node `yaml:"set,omitempty"`
	// Grid is the list of axes.
	Grid []Axis `yaml:"grid"`
	// Seeds is a shorthand for a last axis {name: seed, path: seed}.
	Seeds []int64 `yaml:"seeds,omitempty"`

	source   string // the sweep file, for messages
	baseName string // where the base came from
	baseData []byte
}

// Axis is one dimension of the grid: a path with values or a range, or a
// list of variants.
type Axis struct {
	// Name heads the axis's column and prefixes its values in cell IDs;
	// default: the last field of Path (or "variant").
	Name string `yaml:"name,omitempty"`
	// Path is the overridden field, with Values or Range.
	Path   string      `yaml:"path,omitempty"`
	Values []yaml.Node `yaml:"values,omitempty"`
	Range  *Range      `yaml:"range,omitempty"`
	// Variants each set several fields at once (for example a policy and
	// its cluster cap); the alternative to Path.
	Variants []Variant `yaml:"variants,omitempty"`
}

// Range is the values From, From+Step, ... up to To included (to within
// a billionth of Step). Values are rounded to 9 decimals.
type Range struct {
	From float64 `yaml:"from"`
	To   float64 `yaml:"to"`
	Step float64 `yaml:"step"`
}

// Variant is one named value of a variants axis.
type Variant struct {
	Name string `yaml:"name"`
	// Set is a mapping from path to value.
	Set yaml.Node `yaml:"set"`
}

// maxCells bounds a grid, against a range with a tiny step.
const maxCells = 100_000

// Load reads a sweep file and its base scenario.
func Load(path string) (*Sweep, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sweep: %w", err)
	}
	return Parse(data, path)
}

// Parse parses a sweep document; name is its file name (a relative base
// path is resolved against its directory) and names it in messages.
func Parse(data []byte, name string) (*Sweep, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Sweep
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("sweep %s: empty document", name)
		}
		return nil, fmt.Errorf("sweep %s: %w", name, err)
	}
	s.source = name
	if s.Base == "" {
		return nil, fmt.Errorf("sweep %s: base: a scenario file or built-in name is required", name)
	}
	if s.Parallel < 0 {
		return nil, fmt.Errorf("sweep %s: parallel: %d is negative", name, s.Parallel)
	}
	if s.Parallel == 0 {
		s.Parallel = 1
	}
	if err := s.loadBase(filepath.Dir(name)); err != nil {
		return nil, fmt.Errorf("sweep %s: base: %w", name, err)
	}
	if _, err := s.axes(); err != nil {
		return nil, fmt.Errorf("sweep %s: %w", name, err)
	}
	return &s, nil
}

// loadBase reads the base scenario: a file when one exists at the path
// (relative to dir) or the path holds a separator, else a built-in name.
func (s *Sweep) loadBase(dir string) error {
	p := s.Base
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	data, err := os.ReadFile(p)
	switch {
	case err == nil:
		s.baseName, s.baseData = p, data
		return nil
	case !errors.Is(err, fs.ErrNotExist) || strings.ContainsRune(s.Base, '/') || strings.ContainsRune(s.Base, os.PathSeparator):
		return fmt.Errorf("read %s: %w", p, err)
	}
	data, err = scenarios.BuiltinSource(strings.TrimSuffix(s.Base, ".yaml"))
	if err != nil {
		return err
	}
	s.baseName, s.baseData = "builtin:"+s.Base, data
	return nil
}

// BaseScenario returns the base scenario's YAML text and where it came from.
func (s *Sweep) BaseScenario() (data []byte, name string) { return s.baseData, s.baseName }

// assignment is one override.
type assignment struct {
	path  string
	value *yaml.Node
}

// level is one value of an axis: its label and the overrides it makes.
type level struct {
	label string
	sets  []assignment
}

type axis struct {
	name   string
	levels []level
}

// axes resolves the grid (and seeds) into named axes with their levels.
func (s *Sweep) axes() ([]axis, error) {
	var out []axis
	names := map[string]bool{}
	paths := map[string]string{} // path -> axis name
	for i, a := range s.Grid {
		ax, err := a.resolve()
		if err != nil {
			return nil, fmt.Errorf("grid[%d]: %w", i, err)
		}
		out = append(out, ax)
	}
	if len(s.Seeds) > 0 {
		ax := axis{name: "seed"}
		for _, seed := range s.Seeds {
			v := strconv.FormatInt(seed, 10)
			ax.levels = append(ax.levels, level{v, []assignment{{"seed", scalar(v)}}})
		}
		out = append(out, ax)
	}
	cells := 1
	for i, ax := range out {
		if names[ax.name] {
			return nil, fmt.Errorf("grid: two axes are named %q; give them distinct names (name:)", ax.name)
		}
		names[ax.name] = true
		for _, l := range ax.levels {
			for _, a := range l.sets {
				if other, ok := paths[a.path]; ok && other != ax.name {
					return nil, fmt.Errorf("grid: axes %q and %q both set %s", other, ax.name, a.path)
				}
				paths[a.path] = ax.name
			}
		}
		cells *= len(ax.levels)
		if cells > maxCells {
			return nil, fmt.Errorf("grid: more than %d cells by axis %d (%s)", maxCells, i, ax.name)
		}
	}
	return out, nil
}

func (a Axis) resolve() (axis, error) {
	switch {
	case a.Path != "" && len(a.Variants) > 0:
		return axis{}, errors.New("give either path (with values or range) or variants, not both")
	case len(a.Variants) > 0:
		if len(a.Values) > 0 || a.Range != nil {
			return axis{}, errors.New("variants take no values or range")
		}
		ax := axis{name: a.Name}
		if ax.name == "" {
			ax.name = "variant"
		}
		seen := map[string]bool{}
		for j, v := range a.Variants {
			if v.Name == "" {
				return axis{}, fmt.Errorf("variants[%d]: name is required", j)
			}
			if seen[v.Name] {
				return axis{}, fmt.Errorf("variants[%d]: name %q given twice", j, v.Name)
			}
			seen[v.Name] = true
			sets, err := mapping(&v.Set)
			if err != nil {
				return axis{}, fmt.Errorf("variants[%d] (%s): set: %w", j, v.Name, err)
			}
			ax.levels = append(ax.levels, level{v.Name, sets})
		}
		return ax, nil
	case a.Path == "":
		return axis{}, errors.New("path (with values or range) or variants is required")
	}
	if _, err := parsePath(a.Path); err != nil {
		return axis{}, err
	}
	ax := axis{name: a.Name}
	if ax.name == "" {
		ax.name = defaultName(a.Path)
	}
	var values []*yaml.Node
	switch {
	case len(a.Values) > 0 && a.Range != nil:
		return axis{}, fmt.Errorf("%s: give values or range, not both", a.Path)
	case a.Range != nil:
		vs, err := a.Range.values()
		if err != nil {
			return axis{}, fmt.Errorf("%s: range: %w", a.Path, err)
		}
		values = vs
	case len(a.Values) > 0:
		for j := range a.Values {
			values = append(values, &a.Values[j])
		}
	default:
		return axis{}, fmt.Errorf("%s: values or range is required", a.Path)
	}
	seen := map[string]bool{}
	for _, v := range values {
		l, err := label(v)
		if err != nil {
			return axis{}, fmt.Errorf("%s: %w", a.Path, err)
		}
		if seen[l] {
			return axis{}, fmt.Errorf("%s: value %s given twice", a.Path, l)
		}
		seen[l] = true
		ax.levels = append(ax.levels, level{l, []assignment{{a.Path, v}}})
	}
	return ax, nil
}

// defaultName is the last field of a path, without its selector.
func defaultName(path string) string {
	segs, err := parsePath(path)
	if err != nil || len(segs) == 0 {
		return path
	}
	return segs[len(segs)-1].key
}

func (r *Range) values() ([]*yaml.Node, error) {
	if !finite(r.From) || !finite(r.To) || !finite(r.Step) {
		return nil, errors.New("from, to and step must be finite numbers")
	}
	if r.Step <= 0 {
		return nil, fmt.Errorf("step %v must be > 0", r.Step)
	}
	if r.To < r.From {
		return nil, fmt.Errorf("to %v is below from %v", r.To, r.From)
	}
	n := (r.To - r.From) / r.Step
	if n > maxCells {
		return nil, fmt.Errorf("more than %d values", maxCells)
	}
	count := int(math.Floor(n+1e-9)) + 1
	out := make([]*yaml.Node, count)
	for i := range out {
		v := math.Round((r.From+float64(i)*r.Step)*1e9) / 1e9
		out[i] = scalar(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return out, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// scalar is a plain scalar node; its type is resolved when the cell's
// scenario is read back.
func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// label renders a value for IDs and tables: a scalar's text, or a
// collection in flow style.
func label(n *yaml.Node) (string, error) {
	if n.Kind == yaml.ScalarNode {
		return n.Value, nil
	}
	c := clone(n)
	setFlow(c)
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("value at line %d: %w", n.Line, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// mapping reads a "path: value" mapping, in document order.
func mapping(n *yaml.Node) ([]assignment, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: expected a mapping from path to value", n.Line)
	}
	var out []assignment
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, err := parsePath(k.Value); err != nil {
			return nil, fmt.Errorf("line %d: %w", k.Line, err)
		}
		if seen[k.Value] {
			return nil, fmt.Errorf("line %d: %s given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		out = append(out, assignment{k.Value, v})
	}
	return out, nil
}

// Value is one axis's value in a cell.
type Value struct {
	Axis  string `json:"axis"`
	Value string `json:"value"`
}

// Cell is one point of the grid.
type Cell struct {
	// Index is the cell's position in the grid order.
	Index int
	// ID is "axis=value,..." in grid order; Dir is the ID made safe as a
	// directory name (unique in the sweep).
	ID, Dir string
	Values  []Value
	// Scenario is the cell's scenario document (base plus overrides).
	Scenario []byte
}

// Columns returns the names of the axes, in grid order (seed last).
func (s *Sweep) Columns() []string {
	axes, _ := s.axes() // checked by Parse
	out := make([]string, len(axes))
	for i, a := range axes {
		out[i] = a.name
	}
	return out
}

// Cells expands the grid: the cartesian product of the axes, the first
// axis varying slowest. Every cell's scenario is read back with
// scenarios.Parse; with env, it is also validated (scenarios.Validate).
// All the cells' errors are returned together.
func (s *Sweep) Cells(env *scenarios.Env) ([]Cell, error) {
	axes, err := s.axes()
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", s.source, err)
	}
	fixed, err := mapping(&s.Set)
	if err != nil {
		return nil, fmt.Errorf("sweep %s: set: %w", s.source, err)
	}
	total := 1
	for _, a := range axes {
		total *= len(a.levels)
	}
	var errs []error
	cells := make([]Cell, 0, total)
	dirs := map[string]string{}
	idx := make([]int, len(axes))
	for n := range total {
		// idx counts in mixed radix, the last axis fastest.
		rem := n
		for i := len(axes) - 1; i >= 0; i-- {
			idx[i] = rem % len(axes[i].levels)
			rem /= len(axes[i].levels)
		}
		sets := append([]assignment(nil), fixed...)
		c := Cell{Index: n}
		parts := make([]string, len(axes))
		for i, a := range axes {
			l := a.levels[idx[i]]
			sets = append(sets, l.sets...)
			c.Values = append(c.Values, Value{a.name, l.label})
			parts[i] = a.name + "=" + l.label
		}
		c.ID = strings.Join(parts, ",")
		if c.ID == "" {
			c.ID = "base"
		}
		c.Dir = sanitize(c.ID)
		if other, dup := dirs[c.Dir]; dup {
			return nil, fmt.Errorf("sweep %s: cells %q and %q share the directory name %q", s.source, other, c.ID, c.Dir)
		}
		dirs[c.Dir] = c.ID
		data, err := apply(s.baseData, sets)
		if err != nil {
			errs = append(errs, fmt.Errorf("cell %s: %w", c.ID, err))
			continue
		}
		head := strings.NewReplacer("\n", " ", "\r", " ").Replace(fmt.Sprintf("# Cell %s of sweep %s (base %s).", c.ID, s.source, s.baseName))
		data = append([]byte(head+"\n"), data...)
		sc, err := scenarios.Parse(data, "cell "+c.ID)
		if err == nil && env != nil {
			err = sc.Validate(*env)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cell %s: %w", c.ID, err))
			continue
		}
		c.Scenario = data
		cells = append(cells, c)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("sweep %s: %w", s.source, errors.Join(errs...))
	}
	return cells, nil
}

// sanitize keeps letters, digits and . _ - = , + of an ID and replaces
// everything else (and a leading dot) by '_'.
func sanitize(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("._-=,+", c) >= 0
		if !ok || (i == 0 && c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}
