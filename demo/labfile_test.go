package demo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/msr-router/msr/labs"
)

// variant writes the default lab's file changed by the old/new pairs
// (each old must be there) into a file of its own.
func variant(t *testing.T, pairs ...string) string {
	t.Helper()
	raw, err := labs.Raw(LabName)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(text, pairs[i]) {
			t.Fatalf("labs/default.yaml has no %q", pairs[i])
		}
		text = strings.Replace(text, pairs[i], pairs[i+1], 1)
	}
	file := filepath.Join(t.TempDir(), "variant.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A variant of the default lab is built in its place: its own settings
// (threaded NAPI on r1, the switch's XDP) and a host of its own, its
// placeholders filled as the default lab's.
func TestLabSpecVariant(t *testing.T) {
	file := variant(t,
		`eth0: {addresses: [10.0.0.11/24], mac: "02:00:00:00:b0:01", vlan_offload: off, tx_checksum: off}`,
		`eth0: {addresses: [10.0.0.11/24], mac: "02:00:00:00:b0:01", vlan_offload: off, tx_checksum: off, gro: on, threaded: on, mtu: 9000}`,
		"\nswitches:\n", "\n  witness:\n    processes:\n      - {name: mark, command: [MSR_BIN, version]}\nswitches:\n")
	spec, err := LabSpec("/usr/local/bin/msr", Options{LabFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if w := spec.Hosts["witness"]; w == nil || w.Processes[0].Command[0] != "/usr/local/bin/msr" {
		t.Fatalf("the variant's own host, its MSR_BIN filled: %+v", spec.Hosts["witness"])
	}
	if r1 := spec.Hosts["r1"].Interfaces["eth0"]; r1.MTU != 9000 || r1.Threaded == nil || !*r1.Threaded {
		t.Errorf("r1's eth0 %+v: want the variant's MTU 9000 and threaded NAPI", r1)
	}
	if cmd := spec.Hosts["lb1"].Processes[0].Command; cmd[len(cmd)-1] != RunDir+"/lb1.yaml" {
		got := cmd[len(cmd)-1]
		t.Errorf("lb1's config %q: want MSR_RUN filled, %s/lb1.yaml", got, RunDir)
	}
	def, err := LabSpec("msr", Options{})
	if err != nil || def.Hosts["witness"] != nil || def.Pos.File != DefaultLabFile {
		t.Fatalf("without a lab file: %v, %v (want labs/default.yaml)", def.Pos, err)
	}
}

// A lab file that is not a variant of the default lab is refused: a line
// it cannot take with its position, what it lacks by name, before
// anything is built.
func TestLabSpecRefused(t *testing.T) {
	const caps = `setpriv, "--bounding-set=-all,+net_admin,+net_raw,+bpf,+perfmon,+sys_resource", --, `
	const vcpCaps = `setpriv, "--bounding-set=-all,+net_admin,+net_raw,+net_bind_service,+setuid,+setgid,+chown,+fowner,+dac_override,+kill,+sys_admin,+sys_resource", --, `
	for _, c := range []struct {
		name  string
		pairs []string
		want  string // in the error
	}{
		{"a bad line", []string{"  h2:\n    interfaces:\n", "  h2:\n    interfaces: [\n"}, "variant.yaml:29:"},
		{"an unknown key", []string{"    routes:\n      - {to: default, via: 198.51.100.1}", "    rootes:\n      - {to: default, via: 198.51.100.1}"}, "variant.yaml:32:"},
		{"another name", []string{"name: default", "name: mine"}, `lab name "mine"`},
		{"no r2", []string{
			"  r2:\n    interfaces:\n      eth0: {addresses: [10.0.0.12/24], mac: \"02:00:00:00:b0:02\", vlan_offload: off, tx_checksum: off}\n    processes:\n      - {name: router, command: [" + caps + "MSR_BIN, router, --config, MSR_RUN/r2.yaml]}\n", "",
			"      p12: {xdp_pass: on, vlan_offload: off}\n", "",
			"  - ends: [r2:eth0, sw1:p12]\n", ""}, "no host r2"},
		{"h1 moved", []string{"192.0.2.10/24", "192.0.2.99/24"}, "h1:eth0 lacks address 192.0.2.10/24"},
		{"lb1's MAC", []string{`e0: {mac: "02:00:00:00:e0:00"}`, `e0: {mac: "02:00:00:00:e0:99"}`}, `lb1:e0: MAC "02:00:00:00:e0:99"`},
		{"vcp2 without its agent", []string{"{name: vcp, command: [" + vcpCaps + "MSR_BIN, vcp, --config, MSR_RUN/vcp2.yaml, --standby]}", "{name: standby, command: [MSR_BIN, vcp, --config, MSR_RUN/vcp2.yaml, --standby]}"}, "host vcp2 has no process vcp"},
		{"bgp1's link elsewhere", []string{"  - ends: [bgp1:eth0, ext3:q2]", "  - ends: [bgp1:eth0, ext2:q9]", "      q2: {xdp_pass: on}\n  ext3:", "      q2: {xdp_pass: on}\n      q9: {}\n  ext3:", "      q2: {xdp_pass: on}\nlinks:", "links:"}, "switch ext3 has no port q2"},
		{"r1 and r2 swapped", []string{"[r1:eth0, sw1:p11]", "[r1:eth0, sw1:p12]", "[r2:eth0, sw1:p12]", "[r2:eth0, sw1:p11]"}, "no link r1:eth0 -- sw1:p11"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LabSpec("msr", Options{LabFile: variant(t, c.pairs...)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error with %q", err, c.want)
			}
			t.Log(err)
		})
	}
	if _, err := LabSpec("msr", Options{LabFile: "/nonexistent/lab.yaml"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/lab.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestLabRunsTheUnitsCapabilities: the default lab runs each element's
// agent with the capability bounding set of its systemd unit, so that the
// lab's tests are of the agents as the units run them.
func TestLabRunsTheUnitsCapabilities(t *testing.T) {
	spec, err := LabSpec("msr", Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for name, h := range spec.Hosts {
		for _, p := range h.Processes {
			i := slices.Index(p.Command, "msr")
			if i < 0 || p.Name != p.Command[i+1] {
				continue // not an element's agent
			}
			seen[p.Name] = true
			unit, err := os.ReadFile(filepath.Join("..", "deploy", "systemd", "msr-"+p.Name+"@.service"))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, l := range strings.Split(string(unit), "\n") {
				if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
					for _, c := range strings.Fields(v) {
						want = append(want, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
					}
				}
			}
			var got []string
			if i == 3 && p.Command[0] == "setpriv" && p.Command[2] == "--" {
				if v, ok := strings.CutPrefix(p.Command[1], "--bounding-set=-all,"); ok {
					got = strings.Split(v, ",")
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("%s's %s runs with %q; its unit's set is %v", name, p.Name, p.Command[:i], want)
			}
		}
	}
	if !seen["lb"] || !seen["router"] || !seen["vcp"] {
		t.Errorf("agents found in the lab: %v", seen)
	}
}
