// Package config decodes msr's YAML files strictly: an unknown key, a
// duplicate key, a missing required field or a value of the wrong type is
// an error that names the file, line and column. Every file msr reads (lab
// topologies, element configs) goes through Decode, so they all fail alike.
//
// Struct fields are named by their `yaml:"name"` tag; `msr:"required"`
// marks a field that must be present; an embedded struct tagged
// `yaml:",inline"` lends its keys to the struct it is embedded in (the
// block every element's file shares). A field may keep the key it had
// before a rename, `was:"old_key"`, for one release: the old key still
// decodes, with a warning naming the new one. A field of type Pos receives
// the position of the node it was decoded from, so that later semantic
// checks (duplicate names, address clashes) can point at the offending
// line; a field of type Warnings, in the file's top struct, receives the
// warnings.
// Scalars decode into strings, bools (true/false/on/off/yes/no), integers,
// time.Duration, and any encoding.TextUnmarshaler (netip.Prefix, ...).
package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Pos is a position in a file.
type Pos struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column) }

// Errorf returns an error located at p.
func (p Pos) Errorf(format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// Warnings are what a file said that still works but should change, each
// with its position: a deprecated key and its new name.
type Warnings []string

// Error is a problem in a file, at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// DecodeFile reads path and decodes it into out, as Decode.
func DecodeFile(path string, out any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return Decode(path, data, out)
}

// A File is an element's config file as decoded, whose Parse checks it
// and returns the configuration the element runs.
type File[C any, F any] interface {
	*F
	Parse() (*C, error)
}

// Load reads path into a new F, as DecodeFile, and parses it: each
// element's LoadConfig.
func Load[C any, F any, PF File[C, F]](path string) (*C, error) {
	f := PF(new(F))
	if err := DecodeFile(path, f); err != nil {
		return nil, err
	}
	return f.Parse()
}

// Parse decodes data, the file's contents, and parses it (Load without
// reading the file: a caller that keeps what it applied reads it once).
func Parse[C any, F any, PF File[C, F]](path string, data []byte) (*C, error) {
	f := PF(new(F))
	if err := Decode(path, data, f); err != nil {
		return nil, err
	}
	return f.Parse()
}

// Decode parses one YAML document from data (read from file, used in
// messages) into out, a pointer to a struct.
func Decode(file string, data []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Error{Pos: Pos{File: file, Line: 1, Column: 1}, Msg: "empty file"}
		}
		return syntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return &Error{Pos: Pos{File: file, Line: extra.Line, Column: extra.Column}, Msg: "only one YAML document per file"}
	}
	d := decoder{file: file}
	v := reflect.ValueOf(out).Elem()
	if err := d.value(doc.Content[0], v, ""); err != nil {
		return err
	}
	if v.Kind() == reflect.Struct {
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).Type() == warningsType {
				v.Field(i).Set(reflect.ValueOf(d.warnings))
			}
		}
	}
	return nil
}

// syntaxError turns yaml.v3's "yaml: line N: msg" into a positioned error.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ":"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = v, strings.TrimSpace(after)
			}
		}
	}
	return &Error{Pos: Pos{File: file, Line: line, Column: 1}, Msg: "YAML syntax: " + msg}
}

type decoder struct {
	file     string
	depth    int
	aliases  int
	warnings Warnings
}

// maxAliases bounds how many times a file's anchors are expanded, so that
// a few lines of nested aliases ("billion laughs") cannot make it huge.
const maxAliases = 10000

var (
	posType      = reflect.TypeOf(Pos{})
	warningsType = reflect.TypeOf(Warnings(nil))
	durationType = reflect.TypeOf(time.Duration(0))
	textType     = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Column: n.Column} }

func (d *decoder) value(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind == yaml.AliasNode {
		// Anchors are followed, but not recursively without bound.
		if d.depth++; d.depth > 64 {
			return d.pos(n).Errorf("aliases nested too deeply")
		}
		if d.aliases++; d.aliases > maxAliases {
			return d.pos(n).Errorf("more than %d alias expansions", maxAliases)
		}
		defer func() { d.depth-- }()
		return d.value(n.Alias, v, what)
	}
	if reflect.PointerTo(v.Type()).Implements(textType) {
		return d.text(n, v, what)
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return d.value(n, v.Elem(), what)
	case reflect.Struct:
		return d.structure(n, v, what)
	case reflect.Map:
		return d.mapping(n, v, what)
	case reflect.Slice:
		return d.sequence(n, v, what)
	}
	return d.scalar(n, v, what)
}

func (d *decoder) text(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind != yaml.ScalarNode {
		return d.pos(n).Errorf("%s must be a single value", what)
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
		return d.pos(n).Errorf("%s: %v", what, err)
	}
	return nil
}

// field is where a YAML key decodes: the path of field indices (through
// inline structs), and the key's new name if this one is deprecated.
type field struct {
	index    []int
	required bool
	renamed  string // the key to use instead (a `was` key)
}

// fields maps a struct's YAML keys, its inline structs' too, to fields;
// names lists the current keys.
func fields(t reflect.Type) (map[string]field, []string) {
	idx := map[string]field{}
	var names []string
	var walk func(t reflect.Type, path []int)
	walk = func(t reflect.Type, path []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			at := append(append([]int(nil), path...), i)
			if f.Anonymous && opts == "inline" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, at)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			idx[name] = field{index: at, required: f.Tag.Get("msr") == "required"}
			names = append(names, name)
			if old := f.Tag.Get("was"); old != "" {
				idx[old] = field{index: at, renamed: name}
			}
		}
	}
	walk(t, nil)
	sort.Strings(names)
	return idx, names
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		// "sw1:" with nothing after it: a struct with every field unset.
		n = &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
	}
	if n.Kind != yaml.MappingNode {
		return d.pos(n).Errorf("%s must be a mapping of keys to values", orTop(what))
	}
	t := v.Type()
	idx, names := fields(t)
	seen := map[string]bool{} // by current key
	for i := 0; i < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		f, ok := idx[k.Value]
		if !ok {
			return d.pos(k).Errorf("unknown key %q in %s (known keys: %s)", k.Value, orTop(what), strings.Join(names, ", "))
		}
		key := k.Value
		if f.renamed != "" {
			key = f.renamed
			d.warnings = append(d.warnings, d.pos(k).Errorf("key %q in %s is deprecated: it is now %q (the old key works for one more release)",
				k.Value, orTop(what), f.renamed).Error())
		}
		if seen[key] {
			return d.pos(k).Errorf("key %q given twice in %s", key, orTop(what))
		}
		seen[key] = true
		if err := d.value(val, v.FieldByIndex(f.index), join(what, key)); err != nil {
			return err
		}
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Type == posType {
			v.Field(i).Set(reflect.ValueOf(d.pos(n)))
		}
	}
	for _, name := range names {
		if idx[name].required && !seen[name] {
			return d.pos(n).Errorf("missing required key %q in %s", name, orTop(what))
		}
	}
	return nil
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind != yaml.MappingNode {
		return d.pos(n).Errorf("%s must be a mapping of names to values", what)
	}
	if v.Type().Key().Kind() != reflect.String {
		return fmt.Errorf("config: map key of %s must be a string", what)
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return d.pos(k).Errorf("names in %s must be non-empty scalars", what)
		}
		key := reflect.ValueOf(k.Value).Convert(v.Type().Key())
		if m.MapIndex(key).IsValid() {
			return d.pos(k).Errorf("%q given twice in %s", k.Value, what)
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if err := d.value(val, e, join(what, k.Value)); err != nil {
			return err
		}
		m.SetMapIndex(key, e)
	}
	v.Set(m)
	return nil
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind != yaml.SequenceNode {
		return d.pos(n).Errorf("%s must be a list", what)
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		if err := d.value(c, s.Index(i), fmt.Sprintf("%s[%d]", what, i)); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind != yaml.ScalarNode {
		return d.pos(n).Errorf("%s must be a single value", what)
	}
	s := n.Value
	if v.Type() == durationType {
		t, err := time.ParseDuration(s)
		if err != nil {
			return d.pos(n).Errorf("%s: %q is not a duration such as 100ms", what, s)
		}
		v.SetInt(int64(t))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		if n.Tag == "!!null" {
			return d.pos(n).Errorf("%s must not be empty", what)
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := parseBool(s)
		if !ok {
			return d.pos(n).Errorf("%s: %q is not one of true, false, on, off", what, s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(s, 0, v.Type().Bits())
		if err != nil {
			return d.pos(n).Errorf("%s: %q is not an integer of %d bits", what, s, v.Type().Bits())
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, err := strconv.ParseUint(s, 0, v.Type().Bits())
		if err != nil {
			return d.pos(n).Errorf("%s: %q is not an unsigned integer of %d bits", what, s, v.Type().Bits())
		}
		v.SetUint(i)
	default:
		return fmt.Errorf("config: cannot decode %s into %s", what, v.Type())
	}
	return nil
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "on", "yes":
		return true, true
	case "false", "off", "no":
		return false, true
	}
	return false, false
}

func join(what, key string) string {
	if what == "" {
		return key
	}
	return what + "." + key
}

func orTop(what string) string {
	if what == "" {
		return "the file"
	}
	return what
}
