package vcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The election's configuration is what keepalived itself accepts, and
// says what the design needs: both BACKUP, no preemption, the standby
// lower and later.
func TestElectionConfig(t *testing.T) {
	c, err := load(t, goodVCP+"standby: {address: 10.0.0.1/24, advert_interval: 50ms}\n")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, standby := range []bool{false, true} {
		conf, err := electionConfig(c.Name, "eth0", filepath.Join(dir, "fifo"), filepath.Join(dir, "suite-failed"), c.Standby, standby)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"state BACKUP", "nopreempt", "virtual_router_id 51", "advert_int 0.05", "10.0.0.1/24 dev eth0", "vrrp_version 3",
			// The suite's failures hand over: a tracked file, weight 0.
			"vrrp_track_file suite_failed {\n\tfile " + filepath.Join(dir, "suite-failed") + "\n\tweight 0\n}", "track_file {\n\t\tsuite_failed\n\t}"} {
			if !strings.Contains(conf, want) {
				t.Errorf("standby %v: no %q in\n%s", standby, want, conf)
			}
		}
		prio, delay := "priority 150", false
		if standby {
			prio, delay = "priority 100", true
		}
		if !strings.Contains(conf, prio) || strings.Contains(conf, "vrrp_startup_delay 1.00") != delay {
			t.Errorf("standby %v: want %s, startup delay %v:\n%s", standby, prio, delay, conf)
		}
		path := filepath.Join(dir, "keepalived.conf")
		os.WriteFile(path, []byte(conf), 0o644)
		if out, err := exec.Command("keepalived", "--config-test", "--use-file", path).CombinedOutput(); err != nil {
			t.Errorf("keepalived refuses it: %v: %s\n%s", err, out, conf)
		}
	}
	for _, bad := range []string{
		"standby: {address: 10.0.0.1/24, advert_interval: 5ms}\n",
		"standby: {vrid: 3}\n",
		"standby: {address: 10.0.0.1/24}\nrouting: {asn: 65000, backends: {listen: 10.0.0.9, range: 10.0.0.0/24}}\n",
	} {
		if _, err := load(t, goodVCP+bad); err == nil || !strings.Contains(err.Error(), "vcp.yaml:") {
			t.Errorf("%q: %v, want an error with its line", bad, err)
		}
	}
}
