package vcp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The election's configuration is what keepalived itself accepts, and
// says what the design needs: both BACKUP, no preemption, the standby
// lower and later.
func TestElectionConfig(t *testing.T) {
	c, err := load(t, goodVCP+"standby: {address: 10.0.0.1/24, advert_interval: 50ms, peers: [10.0.0.2, 10.0.0.3]}\n")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, standby := range []bool{false, true} {
		conf, err := electionConfig(c.Name, "eth0", filepath.Join(dir, "fifo"), filepath.Join(dir, "suite-failed"), filepath.Join(dir, "active"), c.Standby, standby, netip.MustParseAddr("10.0.0.2"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"state BACKUP", "nopreempt", "virtual_router_id 51", "advert_int 0.05", "10.0.0.1/24 dev eth0", "vrrp_version 3",
			// The suite's failures hand over: a tracked file, weight 0.
			"vrrp_track_file suite_failed {\n\tfile " + filepath.Join(dir, "suite-failed") + "\n\tweight 0\n}",
			// The active VCP's priority raised above any other's: 150 + 104
			// (or 100 + 104) against the other's 150 at most.
			"vrrp_track_file active {\n\tfile " + filepath.Join(dir, "active") + "\n\tweight 104\n}",
			"track_file {\n\t\tsuite_failed\n\t\tactive\n\t}",
			// VRRP between the configured VCPs only.
			"unicast_src_ip 10.0.0.2\n\tunicast_peer {\n\t\t10.0.0.3\n\t}\n\tcheck_unicast_src\n"} {
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
		"standby: {address: 10.0.0.1/24, advert_interval: 5ms, peers: [10.0.0.2, 10.0.0.3]}\n",
		"standby: {vrid: 3, peers: [10.0.0.2, 10.0.0.3]}\n",
		"standby: {address: 10.0.0.1/24, peers: [10.0.0.2, 10.0.0.3]}\nrouting: {asn: 65000, backends: {listen: 10.0.0.9, range: 10.0.0.0/24}}\n",
		"standby: {address: 10.0.0.1/24}\n",
		"standby: {address: 10.0.0.1/24, peers: [10.0.0.2]}\n",
		"standby: {address: 10.0.0.1/24, peers: [10.0.0.2, 10.1.0.3]}\n",
		"standby: {address: 10.0.0.1/24, peers: [10.0.0.2, 10.0.0.1]}\n",
	} {
		if _, err := load(t, goodVCP+bad); err == nil || !strings.Contains(err.Error(), "vcp.yaml:") {
			t.Errorf("%q: %v, want an error with its line", bad, err)
		}
	}
}

// A VCP restarted at once after kill -9 finds its dead self's keepalived
// still withdrawing (its parent-death signal): the new one waits for it to
// end, as long as it takes within the grace, kills one that outlives the
// grace, and takes a pid file whose process is not keepalived (a stale
// one, its pid reused) for gone at once. keepalived refuses to start
// beside the old one; a VCP without it had no say in the next election.
func TestWaitOldKeepalived(t *testing.T) {
	dir := t.TempDir()
	// A "keepalived": sleep, its command line naming keepalived and dir.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	old := func(seconds string) *exec.Cmd {
		cmd := &exec.Cmd{Path: sleep, Args: []string{"keepalived --use-file " + dir + "/keepalived.conf", seconds}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		for start := time.Now(); !keepalivedOf(cmd.Process.Pid, dir); time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > time.Second {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
				t.Fatalf("the fake keepalived's command line %q", b)
			}
		}
		os.WriteFile(filepath.Join(dir, "vrrp.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
		return cmd
	}
	// One that ends by itself after ~0.2 s: waited for, not killed.
	cmd := old("0.2")
	start := time.Now()
	waitOldKeepalived(dir, 2*time.Second)
	if took := time.Since(start); took < 150*time.Millisecond || took > 1500*time.Millisecond || keepalivedOf(cmd.Process.Pid, dir) {
		t.Errorf("a keepalived withdrawing for 0.2 s: waited %v, still running %v", took, keepalivedOf(cmd.Process.Pid, dir))
	}
	// One that would run for 20 s: killed after the grace.
	cmd = old("20")
	start = time.Now()
	waitOldKeepalived(dir, 300*time.Millisecond)
	if took := time.Since(start); took < 300*time.Millisecond || took > 1500*time.Millisecond || keepalivedOf(cmd.Process.Pid, dir) {
		t.Errorf("a keepalived outliving the grace: waited %v, still running %v", took, keepalivedOf(cmd.Process.Pid, dir))
	}
	// A stale pid file naming another process (this test's).
	os.WriteFile(filepath.Join(dir, "keepalived.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	start = time.Now()
	waitOldKeepalived(dir, 2*time.Second)
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("a pid file naming a process that is not keepalived: waited %v", took)
	}
}

// keepalived ending is this VCP's mastership ending (it withdrew as it
// died): the election says so at once, before restarting it a second
// later, so that an active VCP stands down as soon as the other announces
// itself instead of acting as active beside it (the soak's empty tables).
func TestKeepalivedDeathIsNotMaster(t *testing.T) {
	dir := t.TempDir()
	first, err := startChild(filepath.Join(dir, "keepalived.log"), "sleep", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	e := &Election{Active: make(chan bool, 4), dir: dir, log: slog.New(slog.DiscardHandler), stop: make(chan struct{}),
		argv: []string{"sleep", "30"}, proc: first}
	go e.supervise()
	defer e.Stop()
	select {
	case active := <-e.Active:
		if active {
			t.Fatal("keepalived ended: the election said master")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("keepalived ended: the election said nothing")
	}
}

// TestMasterRxLowerPriority: keepalived's MASTER_RX_LOWER_PRI (a master
// hearing a lower priority's advert, as a split brain ends) leaves this
// VCP master: it is an event, not a state. Taken for "not master", it
// made both VCPs standby for good.
func TestMasterRxLowerPriority(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	e := &Election{fifo: r, Active: make(chan bool, 10)}
	done := make(chan struct{})
	go func() { e.read(quiet()); close(done) }()
	for _, l := range []string{`INSTANCE "msr" MASTER 150`, `INSTANCE "msr" MASTER_RX_LOWER_PRI 150`, `INSTANCE "msr" BACKUP 150`, `INSTANCE "msr" FAULT 150`} {
		fmt.Fprintln(w, l)
	}
	w.Close()
	<-done
	close(e.Active)
	var got []bool
	for v := range e.Active {
		got = append(got, v)
	}
	if !slices.Equal(got, []bool{true, false, false}) {
		t.Errorf("verdicts %v, want master, then not for BACKUP and FAULT only", got)
	}
}
