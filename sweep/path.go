package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/koala-emu/koala-emu/scenarios"
)

// segment is one field of a path, with an optional list selector: an
// index ([2]) or a field's value ([name=leiden]).
type segment struct {
	key      string
	selector string // the text between brackets, "" for none
	index    int    // -1 unless selecting by index
	selKey   string // selecting by field value
	selValue string
}

// parsePath splits "a.b[0].c[name=x].d" into segments.
func parsePath(p string) ([]segment, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	var out []segment
	for _, part := range strings.Split(p, ".") {
		s := segment{key: part, index: -1}
		if open := strings.IndexByte(part, '['); open >= 0 {
			if !strings.HasSuffix(part, "]") || open == 0 {
				return nil, fmt.Errorf("path %s: %q is not field[selector]", p, part)
			}
			s.key, s.selector = part[:open], part[open+1:len(part)-1]
			if k, v, ok := strings.Cut(s.selector, "="); ok {
				if k == "" || v == "" {
					return nil, fmt.Errorf("path %s: selector [%s] is not [field=value]", p, s.selector)
				}
				s.selKey, s.selValue = k, v
			} else {
				i, err := strconv.Atoi(s.selector)
				if err != nil || i < 0 {
					return nil, fmt.Errorf("path %s: selector [%s] is neither an index nor field=value", p, s.selector)
				}
				s.index = i
			}
		}
		if s.key == "" || strings.ContainsAny(s.key, "[]= ") {
			return nil, fmt.Errorf("path %s: empty or malformed field name in %q", p, part)
		}
		out = append(out, s)
	}
	return out, nil
}

// apply parses the base scenario, applies the overrides in order and
// returns the document.
func apply(base []byte, sets []assignment) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("base scenario: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("base scenario: empty document")
	}
	root := doc.Content[0]
	for _, a := range sets {
		if err := set(root, a.path, a.value); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}

var scenarioType = reflect.TypeOf(scenarios.Scenario{})

// set replaces the value at path in the tree rooted at root (a mapping),
// creating fields the schema marks optional. Errors name the path.
func set(root *yaml.Node, path string, value *yaml.Node) error {
	segs, err := parsePath(path)
	if err != nil {
		return err
	}
	n, t := root, scenarioType
	// inOptional: an ancestor is an optional field, so the fields of n may
	// be created even when the schema requires them (a block the base
	// leaves out is built field by field).
	inOptional := false
	for i, seg := range segs {
		prefix := pathPrefix(segs[:i+1])
		last := i == len(segs)-1
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var ft reflect.Type
		optional := false
		switch t.Kind() {
		case reflect.Struct:
			f, ok := field(t, seg.key)
			if !ok {
				return fmt.Errorf("path %s: %s is not a scenario field (known here: %s)", path, prefix, strings.Join(fieldNames(t), ", "))
			}
			ft, optional = f.Type, strings.Contains(f.Tag.Get("yaml"), ",omitempty") || f.Type.Kind() == reflect.Pointer
		case reflect.Map:
			ft, optional = t.Elem(), true
		default:
			return fmt.Errorf("path %s: %s: the value before it is %s, not a mapping", path, prefix, t.Kind())
		}
		if n.Kind == yaml.AliasNode {
			return fmt.Errorf("path %s: %s goes through a YAML alias; overrides do not follow aliases", path, prefix)
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("path %s: %s: the base scenario holds no mapping there (line %d)", path, prefix, n.Line)
		}
		child := lookup(n, seg.key)
		if child == nil {
			if !optional && !inOptional {
				return fmt.Errorf("path %s: %s does not exist in the base scenario", path, prefix)
			}
			if seg.selector != "" {
				return fmt.Errorf("path %s: %s does not exist in the base scenario: no element to select", path, prefix)
			}
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			if last {
				child = clone(value)
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg.key}, child)
			if last {
				return nil
			}
			n, t, inOptional = child, ft, true
			continue
		}
		if seg.selector != "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Slice {
				return fmt.Errorf("path %s: %s: [%s] selects in a list, and %s is not one", path, prefix, seg.selector, seg.key)
			}
			if child.Kind != yaml.SequenceNode {
				return fmt.Errorf("path %s: %s: the base scenario holds no list there (line %d)", path, prefix, child.Line)
			}
			elem, err := pick(child, seg)
			if err != nil {
				return fmt.Errorf("path %s: %s: %w", path, prefix, err)
			}
			child, ft = elem, ft.Elem()
		}
		if last {
			replace(child, value)
			return nil
		}
		n, t, inOptional = child, ft, inOptional || optional
	}
	return nil
}

// replace puts a copy of value in place of n, keeping n's comments.
func replace(n, value *yaml.Node) {
	head, line, foot := n.HeadComment, n.LineComment, n.FootComment
	*n = *clone(value)
	n.HeadComment, n.LineComment, n.FootComment = head, line, foot
}

// pick selects a list element by index or by a field's value.
func pick(list *yaml.Node, seg segment) (*yaml.Node, error) {
	if seg.index >= 0 {
		if seg.index >= len(list.Content) {
			return nil, fmt.Errorf("index %d is out of range (the list has %d elements)", seg.index, len(list.Content))
		}
		return list.Content[seg.index], nil
	}
	var have []string
	for _, e := range list.Content {
		if e.Kind != yaml.MappingNode {
			continue
		}
		v := lookup(e, seg.selKey)
		if v == nil {
			continue
		}
		if v.Value == seg.selValue {
			return e, nil
		}
		have = append(have, v.Value)
	}
	return nil, fmt.Errorf("no element with %s=%s (have: %s)", seg.selKey, seg.selValue, strings.Join(have, ", "))
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func pathPrefix(segs []segment) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = s.key
		if s.selector != "" {
			parts[i] += "[" + s.selector + "]"
		}
	}
	return strings.Join(parts, ".")
}

// field finds a struct field by its YAML name (the tag's name, or the
// lower-cased Go name as yaml.v3 does).
func field(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && yamlName(f) != "-" {
			out = append(out, yamlName(f))
		}
	}
	sort.Strings(out)
	return out
}

// clone deep-copies a node (without its comments and positions).
func clone(n *yaml.Node) *yaml.Node {
	c := &yaml.Node{Kind: n.Kind, Style: n.Style, Tag: n.Tag, Value: n.Value, Anchor: n.Anchor, Alias: n.Alias}
	for _, x := range n.Content {
		c.Content = append(c.Content, clone(x))
	}
	return c
}
