package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

type sample struct {
	Name     string            `yaml:"name" msr:"required"`
	On       bool              `yaml:"on"`
	Count    uint16            `yaml:"count"`
	Delta    int               `yaml:"delta"`
	Every    time.Duration     `yaml:"every"`
	Prefix   netip.Prefix      `yaml:"prefix"`
	Tags     []string          `yaml:"tags"`
	Sub      *sample           `yaml:"sub"`
	Labels   map[string]string `yaml:"labels"`
	Pos      Pos               `yaml:"-"`
	Untagged int               // no yaml tag: not a key
}

func TestDecode(t *testing.T) {
	var s sample
	err := Decode("s.yaml", []byte("name: x\non: off\ncount: 0x10\ndelta: -3\nevery: 100ms\nprefix: 10.0.0.0/8\ntags: [a, b]\nsub: {name: y, on: yes}\nlabels: {k: v}\n"), &s)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "x" || s.On || s.Count != 16 || s.Delta != -3 || s.Every != 100*time.Millisecond ||
		s.Prefix != netip.MustParsePrefix("10.0.0.0/8") || len(s.Tags) != 2 || s.Sub.Name != "y" || !s.Sub.On || s.Labels["k"] != "v" {
		t.Errorf("decoded %+v", s)
	}
	if s.Pos != (Pos{File: "s.yaml", Line: 1, Column: 1}) || s.Sub.Pos.Line != 8 {
		t.Errorf("positions %v %v", s.Pos, s.Sub.Pos)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"name: x\ncount: 70000\n", "s.yaml:2:8: count: \"70000\" is not an unsigned integer of 16 bits"},
		{"name: x\non: maybe\n", "s.yaml:2:5: on: \"maybe\" is not one of true, false, on, off"},
		{"name: x\nevery: soon\n", "s.yaml:2:8: every: \"soon\" is not a duration"},
		{"on: true\n", "s.yaml:1:1: missing required key \"name\" in the file"},
		{"name: x\nsub: {on: true}\n", "s.yaml:2:6: missing required key \"name\" in sub"},
		{"name: x\ntags: a\n", "s.yaml:2:7: tags must be a list"},
		{"name: [x]\n", "s.yaml:1:7: name must be a single value"},
		{"name:\n", "s.yaml:1:6: name must not be empty"},
		{"- a\n", "s.yaml:1:1: the file must be a mapping"},
		{"name: x\nlabels: {k: v, k: w}\n", "s.yaml:2:16: \"k\" given twice in labels"},
		{"name: x\nUntagged: 1\n", "s.yaml:2:1: unknown key \"Untagged\""},
	}
	for _, c := range cases {
		var s sample
		err := Decode("s.yaml", []byte(c.in), &s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

// TestDecodeAliasBomb: anchors are followed, but a file cannot make the
// decoder expand them without bound.
func TestDecodeAliasBomb(t *testing.T) {
	in := "name: x\nsub: &a {name: y, sub: *a}\n"
	var s sample
	if err := Decode("s.yaml", []byte(in), &s); err == nil {
		t.Error("recursive alias accepted")
	}
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f"} {
		laughs += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	var lists struct {
		A []string           `yaml:"a"`
		B [][]string         `yaml:"b"`
		C [][][]string       `yaml:"c"`
		D [][][][]string     `yaml:"d"`
		E [][][][][]string   `yaml:"e"`
		F [][][][][][]string `yaml:"f"`
	}
	if err := Decode("s.yaml", []byte(laughs), &lists); err == nil || !strings.Contains(err.Error(), "alias expansions") {
		t.Errorf("billion laughs: %v", err)
	}
}

// common is a block of keys shared by several files' top structs.
type common struct {
	Name string `yaml:"name" msr:"required"`
	Port string `yaml:"interface" was:"internal"`
}

type withCommon struct {
	common   `yaml:",inline"`
	Speed    uint32   `yaml:"capacity_mbps" was:"speed_mbps"`
	Warnings Warnings `yaml:"-"`
}

// An inline block's keys are the file's own; a renamed key still decodes,
// with a warning that names the new key and the line.
func TestDecodeInlineAndRenamed(t *testing.T) {
	var c withCommon
	if err := Decode("f.yaml", []byte("name: a\ninterface: eth0\ncapacity_mbps: 10\n"), &c); err != nil || c.Name != "a" || c.Port != "eth0" || c.Speed != 10 || len(c.Warnings) != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	c = withCommon{}
	if err := Decode("f.yaml", []byte("name: a\ninternal: eth0\nspeed_mbps: 10\n"), &c); err != nil || c.Port != "eth0" || c.Speed != 10 {
		t.Fatalf("old keys: %+v %v", c, err)
	}
	if len(c.Warnings) != 2 || !strings.Contains(c.Warnings[0], `f.yaml:2:1: key "internal"`) || !strings.Contains(c.Warnings[0], `now "interface"`) {
		t.Errorf("warnings %q", c.Warnings)
	}
	for text, want := range map[string]string{
		"internal: eth0\n":                     `f.yaml:1:1: missing required key "name"`,
		"name: a\ninternal: x\ninterface: y\n": `f.yaml:3:1: key "interface" given twice`,
		"name: a\nnonsense: 1\n":               `known keys: capacity_mbps, interface, name`,
	} {
		if err := Decode("f.yaml", []byte(text), &withCommon{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
