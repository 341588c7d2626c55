package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
)

var goodLab = msrtest.Testdata("t.yaml")

func TestLoadRefusesMalformedFiles(t *testing.T) {
	cases := []struct {
		name, file, want string
	}{
		{"unknown key", "name: t\nhosts:\n  h1:\n    interfaces: {}\n    colour: red\n", "x.yaml:5:5: unknown key \"colour\" in hosts.h1"},
		{"unknown top key", "nam: t\n", "x.yaml:1:1: unknown key \"nam\""},
		{"missing field", "hosts:\n  h1:\n    routes:\n      - via: 10.0.0.1\n", "x.yaml:4:9: missing required key \"to\""},
		{"duplicate host", "hosts:\n  h1: {}\n  h1: {}\n", "x.yaml:3:3: \"h1\" given twice in hosts"},
		{"duplicate key", "name: a\nname: b\n", "x.yaml:2:1: key \"name\" given twice"},
		{"host and switch share a name", "hosts:\n  a: {}\nswitches:\n  a: {}\n", "x.yaml:4:6: switch \"a\" has the name of a host"},
		{"long interface name", "hosts:\n  h1:\n    interfaces:\n      abcdefghijklmnop: {}\n", "x.yaml:4:25: interface name \"abcdefghijklmnop\" is 16 characters, the kernel allows 15"},
		{"long link end", "hosts:\n  h1: {}\n  h2: {}\nlinks:\n  - ends: [h1:abcdefghijklmnop, h2:e]\n", "x.yaml:5:5: link end \"h1:abcdefghijklmnop\": interface names are at most 15"},
		{"address clash", "hosts:\n  h1:\n    interfaces:\n      e0: {addresses: [10.0.0.1/24]}\n  h2:\n    interfaces:\n      e0: {addresses: [10.0.0.1/24]}\n", "x.yaml:7:11: h2:e0: address 10.0.0.1 is already used at x.yaml:4:11"},
		{"bad address", "hosts:\n  h1:\n    interfaces:\n      e0: {addresses: [10.0.0.300/24]}\n", "x.yaml:4:24: hosts.h1.interfaces.e0.addresses[0]"},
		{"wrong type", "hosts:\n  h1:\n    interfaces:\n      e0: {mtu: big}\n", "x.yaml:4:17: hosts.h1.interfaces.e0.mtu: \"big\" is not an integer"},
		{"unlinked interface", "hosts:\n  h1:\n    interfaces:\n      e0: {}\n", "x.yaml:4:11: interface h1:e0 is not the end of any link"},
		{"link to nowhere", "hosts:\n  h1: {}\nlinks:\n  - ends: [h1:e0, h9:e0]\n", "x.yaml:4:5: link end \"h9:e0\": no host or switch \"h9\""},
		{"interface linked twice", "hosts:\n  h1: {}\n  h2: {}\nlinks:\n  - ends: [h1:e0, h2:e0]\n  - ends: [h1:e0, h2:e1]\n", "x.yaml:6:5: interface h1:e0 is already linked at x.yaml:5:5"},
		{"too many queues", "hosts:\n  h1: {}\nlinks:\n  - {ends: [h1:a, h1:b], queues: 17}\n", "x.yaml:4:5: a link has 1 to 16 queues, not 17"},
		{"three ends", "hosts:\n  h1: {}\nlinks:\n  - ends: [h1:a, h1:b, h1:c]\n", "x.yaml:4:5: a link has exactly two ends"},
		{"bad lab name", "name: Big_Lab\nhosts:\n  h1: {}\n", "x.yaml:1:1: lab name \"Big_Lab\""},
		{"syntax", "hosts:\n  h1: {\n", "x.yaml:2:1: YAML syntax"},
		{"empty", "", "x.yaml:1:1: empty file"},
		{"two documents", "name: a\n---\nname: b\n", "x.yaml:2:1: only one YAML document"},
		{"non-net sysctl", "hosts:\n  h1:\n    sysctls: {kernel.panic: \"1\"}\n", "x.yaml:3:5: host h1: sysctl \"kernel.panic\""},
		{"route via nothing", "hosts:\n  h1:\n    routes: [{to: default}]\n", "x.yaml:3:14: route to default needs via or dev"},
		{"duplicate process", "hosts:\n  h1:\n    processes:\n      - {name: a, command: [sleep, '1']}\n      - {name: a, command: [sleep, '1']}\n", "x.yaml:5:9: process \"a\" of host h1"},
		{"template placeholder", "hosts:\n  h1:\n    processes:\n      - {name: lb, command: [MSR_BIN, lb, --config, MSR_RUN/lb1.yaml]}\n", "x.yaml:4:9: process lb of host h1: \"MSR_BIN\" is a placeholder that msr demo fills (this file is its template): run msr demo up"},
		{"mtu range", "hosts:\n  h1:\n    interfaces:\n      e0: {mtu: 20}\n", "x.yaml:4:11: interface e0: MTU 20 outside 68-65535"},
		{"two programs on a switch port", "hosts:\n  h1: {}\nswitches:\n  sw:\n    xdp: on\n    interfaces:\n      p1: {xdp_pass: on}\nlinks:\n  - ends: [h1:e0, sw:p1]\n", "x.yaml:7:11: switch port sw:p1: xdp_pass and the switch's xdp both attach a program"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("x.yaml", []byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load:\n%s\nerr = %v\nwant it to contain %q", c.file, err, c.want)
			}
		})
	}
}

func TestLoadNamesTheLab(t *testing.T) {
	s, err := Load("labs/my-lab.yaml", []byte(strings.Replace(goodLab, "name: t\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "my-lab" {
		t.Errorf("name = %q, want the file's base name my-lab", s.Name)
	}
	if s, err = Load("x.yaml", []byte(goodLab)); err != nil || s.Name != "t" {
		t.Errorf("name = %v, %v; want t", s, err)
	}
}

// Every shipped lab loads, but the default lab's template, which msr demo
// fills: msr lab up refuses it, naming msr demo up.
func TestShippedLabsLoad(t *testing.T) {
	files, _ := os.ReadDir("../labs")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".yaml") {
			n++
			_, err := LoadFile("../labs/" + f.Name())
			if f.Name() == "default.yaml" {
				if err == nil || !strings.Contains(err.Error(), "run msr demo up") {
					t.Errorf("labs/default.yaml, a template: %v, want a refusal naming msr demo up", err)
				}
			} else if err != nil {
				t.Error(err)
			}
		}
	}
	if n < 2 {
		t.Errorf("labs/ has %d files, want the pair example and the bench topologies", n)
	}
}

// FuzzLoad checks that no file makes the loader panic, and that every
// refusal says where: file:line:column.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(goodLab))
	for _, name := range []string{"pair.yaml", "bench-linux.yaml", "bench-none.yaml"} {
		if b, err := os.ReadFile("../labs/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("hosts: &a\n  h1: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Load("f.yaml", data)
		if err != nil && !strings.HasPrefix(err.Error(), "f.yaml:") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
