package lb

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
)

func TestLoadConfigErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  e1: {role: external, address: 192.0.2.2/24, vlan: 10}\n", ":5:7: port e1: VLAN 10 is already port e0's"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, vlan: 10}\n", ":4:7: external port e0 needs an IPv4 address"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: inside}\n", ":4:7: port i0: role \"inside\""},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\nmode: random\n", ":1:1: balancing mode \"random\""},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\nbackends:\n  - {mac: zz}\n", ":6:5: back-end MAC \"zz\""},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\nbackends:\n  - {mac: \"02:00:00:00:00:01\", ports: [e9]}\n", ":6:5: back-end 02:00:00:00:00:01: \"e9\" is not an internal port"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ncolour: blue\n", ":5:1: unknown key \"colour\""},
		{"name: a\nports:\n  i0: {role: internal}\n", ":1:1: missing required key \"key_file\""},
		{"name: a\nkey_file: k\nhello_interval: 1ms\nports:\n  i0: {role: internal}\n", "hello_interval 1ms"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10, capacity_pps: 5000}\n", ":4:7: port e0: capacity_pps caps an internal port"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal, capacity_pps: 200000000}\n", ":4:7: capacity_pps 200000000: at most 100000000"},
		{"name: a\nkey_file: k\ncapacity_pps: -5\nports:\n  i0: {role: internal}\n", ":3:"},
		{"name: a\nkey_file: k\nmode: flowlet\nflowlet_gap: 2h\nports:\n  i0: {role: internal}\n", ":4:14: flowlet_gap: \"2h\": auto, or a duration of 1µs to"},
		{"name: a\nkey_file: k\nmode: flowlet\nflowlet_gap: soon\nports:\n  i0: {role: internal}\n", ":4:14: flowlet_gap: \"soon\": auto"},
		// The router's inside.
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ninfrastructure: [10.0.0.0/24, 10.0.1.1/24]\n", ":5:31: infrastructure[1]: 10.0.1.1/24 has host bits set (10.0.1.0/24?)"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ninfrastructure:\n  - 8.0.0.0/6\n", ":6:5: infrastructure[0]: 8.0.0.0/6 is shorter than /8"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ninfrastructure:\n  - ff02::/16\n", ":6:5: infrastructure[0]: ff02::/16 is not a unicast prefix"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ninfrastructure:\n  - nonsense\n", ":6:5: infrastructure[0]: netip.ParsePrefix(\"nonsense\")"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal}\ninfrastructure: [192.0.0.0/16]\n",
			":4:7: port e0's 192.0.2.1/24 overlaps infrastructure 192.0.0.0/16"},
		{"name: a\nkey_file: k\nports:\n  i0: {role: internal}\ninfrastructure: [" + manyPrefixes(17) + "]\n", "infrastructure: more than 16 prefixes of one family"},
		// sFlow.
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10, sflow_rate: 100}\n", ":4:7: sflow_rate without an sflow section"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, sflow_rate: 10}\nsflow: {collectors: [192.0.2.50:6343]}\n", ":5:7: port i0: sflow_rate samples an external port's frames"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {collectors: [0.0.0.0:6343]}\n", ":5:8: sflow collector 0.0.0.0:6343: a unicast ADDR:PORT"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {collectors: [192.0.2.50]}\n", ":5:"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {sampling_rate: 10}\n", ":5:8: sflow: no collectors"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {ipfix: {collectors: [192.0.2.50:4739], active_timeout: 10s, idle_timeout: 20s}}\n", ":5:16: sflow ipfix idle_timeout 20s: 1s to the active_timeout"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {ipfix: {collectors: [\"[ff02::1]:4739\"]}}\n", ":5:16: sflow ipfix: collector [ff02::1]:4739: a unicast ADDR:PORT"},
		{"name: a\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\nsflow: {collectors: [192.0.2.50:6343], counter_interval: 10ms}\n", ":5:8: sflow counter_interval 10ms: 1s to 1h"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		path := filepath.Join(dir, "lb.yaml")
		os.WriteFile(path, []byte(c.body), 0o644)
		_, err := LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: %v, want %q", i, err, c.want)
		}
	}
}

// manyPrefixes is n IPv4 /24s, comma-separated.
func manyPrefixes(n int) string {
	var ps []string
	for i := range n {
		ps = append(ps, fmt.Sprintf("10.%d.0.0/24", i))
	}
	return strings.Join(ps, ", ")
}

func TestLoadConfigDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.yaml")
	os.WriteFile(path, []byte("name: lb1\nkey_file: k\nports:\n  i0: {role: auto}\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == 0 || c.HelloInterval != DefaultHelloInterval || c.HoldMultiplier != 3 || c.Mode != ModeWRR || c.Socket != "/run/msr/lb-lb1.sock" ||
		c.FlowletGap != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

// Capacities in frames a second: the LB's own and an internal port's.
func TestLoadConfigCapacity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.yaml")
	os.WriteFile(path, []byte("name: lb1\nkey_file: k\ncapacity_pps: 50000\nports:\n  i0: {role: internal, capacity_pps: 20000}\n  i1: {role: internal}\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.CapacityPPS != 50000 || c.Ports[0].CapacityPPS != 20000 || c.Ports[1].CapacityPPS != 0 {
		t.Errorf("capacities: LB %d, i0 %d, i1 %d", c.CapacityPPS, c.Ports[0].CapacityPPS, c.Ports[1].CapacityPPS)
	}
}

// A port's capacity was speed_mbps: the old key works for one release,
// with a warning naming the new one.
func TestLoadConfigRenamedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.yaml")
	os.WriteFile(path, []byte("name: lb1\nkey_file: k\nports:\n  i0: {role: internal, speed_mbps: 2500}\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ports[0].CapacityMbps != 2500 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `lb.yaml:4:24: key "speed_mbps" in ports.i0 is deprecated: it is now "capacity_mbps"`) {
		t.Errorf("capacity %d, warnings %q", c.Ports[0].CapacityMbps, c.Warnings)
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abcd"), 0o600)
	if _, err := dist.ReadKeyFile(short, 1); err == nil {
		t.Error("2-byte key accepted")
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not hex"), 0o600)
	if _, err := dist.ReadKeyFile(bad, 1); err == nil {
		t.Error("non-hex key accepted")
	}
}

// FuzzLoadConfig: no file makes the loader panic; refusals say where.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("name: lb1\nkey_file: k\nmode: maglev\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, default: true}\nbackends:\n  - {mac: \"02:00:00:00:00:01\", ports: [i0], weight: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.yaml")
		os.WriteFile(path, data, 0o644)
		if _, err := LoadConfig(path); err != nil && !strings.Contains(err.Error(), "f.yaml:") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}

// TestLoadConfigSFlow: an sflow section's defaults: the agent address the
// first external port's, the sub-agent the LB's id, every external port
// sampled 1 in 1000 but one that says otherwise, counters every 20 s.
func TestLoadConfigSFlow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.yaml")
	os.WriteFile(path, []byte("name: lb1\nid: 9\nkey_file: k\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n"+
		"  e1: {role: external, address: 198.51.100.1/24, vlan: 11, sflow_rate: 0}\n  i0: {role: internal}\nsflow:\n  collectors: [192.0.2.50:6343, \"[2001:db8::50]:6343\"]\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s := c.SFlow
	if s == nil || s.AgentAddress != netip.MustParseAddr("192.0.2.1") || s.SubAgent != 9 || s.CounterInterval != DefaultSFlowCounterInterval || len(s.Collectors) != 2 {
		t.Fatalf("sflow: %+v", s)
	}
	for _, p := range c.Ports {
		if want := map[string]uint32{"e0": DefaultSFlowRate}[p.Name]; p.SFlowRate != want {
			t.Errorf("port %s samples 1 in %d, want %d", p.Name, p.SFlowRate, want)
		}
	}
}
