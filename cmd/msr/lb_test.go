package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist/disttest"
)

// TestLBCommand runs `msr lb --config` as a process of a lab host, reads
// it back with `msr lb status -o json`, and has a real client resolve the
// LB's external address through the data path's Ext ARP.
func TestLBCommand(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	key := filepath.Join(dir, "key")
	disttest.Keys(t, dir, strings.Repeat("ab", 32))
	cfg := filepath.Join(dir, "lb.yaml")
	os.WriteFile(cfg, []byte(`name: t-cli-lb
key_file: `+key+`
pin_dir: /sys/fs/bpf/msr-test-cli-lb
mode: maglev
ports:
  e0: {role: external, address: 192.0.2.1/24, vlan: 10}
  i0: {role: internal, default: true}
management_address: 10.255.0.1
`), 0o644)
	labFile := filepath.Join(dir, "lab.yaml")
	os.WriteFile(labFile, []byte(`name: t-cli-lb
hosts:
  ext:
    interfaces:
      eth0: {addresses: [192.0.2.10/24], xdp_pass: on}  # receives XDP_TX from the LB
  lb:
    interfaces:
      e0: {mac: "02:00:00:00:e0:00"}
      i0: {}
    processes:
      - {name: lb, command: [`+msrBin+`, lb, --config, `+cfg+`]}
  r1:
    interfaces:
      eth0: {gro: on}
links:
  - ends: [ext:eth0, lb:e0]
  - ends: [lb:i0, r1:eth0]
`), 0o644)
	if _, errOut, code := msr(t, "lab", "up", labFile); code != 0 {
		t.Fatalf("lab up: %s", errOut)
	}
	t.Cleanup(func() {
		msr(t, "lab", "down", "t-cli-lb")
		msr(t, "lb", "remove", "--config", cfg)
	})

	var st struct {
		Name  string `json:"name"`
		Ports []struct {
			Name  string `json:"name"`
			Role  string `json:"role"`
			Stats struct {
				Modules map[string]uint64 `json:"modules"`
			} `json:"stats"`
		} `json:"ports"`
		Table struct {
			Mode string `json:"mode"`
		} `json:"table"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, errOut, code := msr(t, "lb", "status", "--name", "t-cli-lb", "-o", "json")
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("lb status -o json: %v\n%s", err, out)
			}
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile("/run/msr/labs/t-cli-lb/logs/lb.lb.log")
			t.Fatalf("lb status never answered: %s\nagent log:\n%s", errOut, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Name != "t-cli-lb" || len(st.Ports) != 2 || st.Ports[0].Role != "external" || st.Ports[1].Role != "internal" {
		t.Errorf("status = %+v", st)
	}

	// ping resolves 192.0.2.1 by ARP: the LB's data path answers. (The echo
	// itself is data, and with no back-end it is dropped.)
	msr(t, "lab", "exec", "--lab", "t-cli-lb", "ext", "--", "ping", "-c", "1", "-w", "2", "192.0.2.1")
	out, _, _ := msr(t, "lab", "exec", "--lab", "t-cli-lb", "ext", "--", "ip", "neigh", "show", "192.0.2.1")
	if !strings.Contains(out, "02:00:00:00:e0:00") {
		t.Errorf("ext did not learn the LB's MAC by ARP: %q", out)
	}
	out, _, _ = msr(t, "lb", "status", "--name", "t-cli-lb", "-o", "json")
	json.Unmarshal([]byte(out), &st)
	if st.Ports[0].Stats.Modules["ext_arp"] == 0 {
		t.Errorf("ext_arp counted nothing: %+v", st.Ports[0].Stats)
	}
}
