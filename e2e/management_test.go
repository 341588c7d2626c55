package e2e

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestManagementSecurity: who may take or use the router's management, on
// the default lab, each attack beside the legitimate use:
//   - a keepalived on mon, a host of the interconnect, claims the VCPs'
//     VRRP instance with priority 255: vcp1 stays active and vcp2
//     standby (the VCPs speak VRRP by unicast to their configured peers
//     and drop other sources), though its adverts reach them;
//   - msr ctl refuses to send the admin token over plain http to the
//     VCP's address, and with the deployment's certificate reads and
//     changes the router;
//   - the VCP's BIRD and snmpd run as their own users, not root, their
//     files with the secrets theirs alone.
func TestManagementSecurity(t *testing.T) {
	upDefaultLab(t, 100)
	vcp1 := filepath.Join(demo.RunDir, "vcp1")
	checkDaemonUser(t, "bird", "bird", filepath.Join(vcp1, "bird.conf"))
	checkDaemonUser(t, "snmpd", "Debian-snmp", filepath.Join(vcp1, "snmp", "snmpd.conf"))
	role := func(v string) string {
		st, err := vcpapi.Local(v, "").Status()
		if err != nil {
			return ""
		}
		return st.Role
	}
	if role("vcp1") != "active" || role("vcp2") != "standby" {
		t.Fatalf("before: vcp1 %q, vcp2 %q", role("vcp1"), role("vcp2"))
	}
	// The rogue: the VCPs' VRID and address, the highest priority, by
	// multicast as VRRP is by default. mon's ARP is off for the while, so
	// that only its adverts, not its claim to 10.0.0.1 at layer 2, reach
	// the interconnect: this is about the election.
	dir := t.TempDir()
	conf := filepath.Join(dir, "rogue.conf")
	os.WriteFile(conf, []byte(`global_defs {
	router_id rogue
	vrrp_version 3
}
vrrp_instance rogue {
	state MASTER
	interface eth0
	virtual_router_id 51
	priority 255
	advert_int 0.1
	virtual_ipaddress {
		10.0.0.1/24 dev eth0
	}
}
`), 0o644)
	if out, err := demo.Exec("mon", "ip", "link", "set", "eth0", "arp", "off"); err != nil {
		t.Fatalf("mon's ARP off: %v %s", err, out)
	}
	pid := filepath.Join(dir, "rogue.pid")
	t.Cleanup(func() {
		demo.Exec("mon", "sh", "-c", "kill $(cat "+pid+" "+pid+".vrrp) 2>/dev/null; sleep 0.5; ip addr del 10.0.0.1/24 dev eth0 2>/dev/null; ip link set eth0 arp on")
	})
	if out, err := demo.Exec("mon", "keepalived", "--vrrp", "-f", conf, "-p", pid, "-r", pid+".vrrp", "-l", "-G"); err != nil {
		t.Fatalf("the rogue keepalived: %v %s", err, out)
	}
	// Its adverts reach vcp1.
	seen, _ := demo.Exec("vcp1", "timeout", "3", "tcpdump", "-n", "-i", "eth0", "-c", "10", "ip proto 112 and src 10.0.0.40")
	adverts := strings.Count(seen, "VRRPv3")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if r1, r2 := role("vcp1"), role("vcp2"); r1 != "active" || r2 != "standby" {
			t.Fatalf("a rogue VRRP speaker on the interconnect moved the VCP: vcp1 %q, vcp2 %q", r1, r2)
		}
	}
	addrs, _ := demo.Exec("vcp1", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
	t.Logf("rogue keepalived on mon at priority 255: vcp1 saw %d of its adverts in 3 s; 3 s later vcp1 active, vcp2 standby, vcp1's addresses: %s",
		adverts, strings.Join(strings.Fields(addrs), " "))
	if adverts < 5 {
		t.Errorf("precondition: vcp1 saw %d of the rogue's adverts, so the test tests nothing:\n%s", adverts, seen)
	}
	if !strings.Contains(addrs, "10.0.0.1/24") {
		t.Errorf("vcp1 lost the VCP's address to the rogue: %s", addrs)
	}

	// msr ctl: the admin token is not sent in clear; with the
	// certificate, it is, and the router answers.
	token := demo.APIFile("admin.token")
	_, errOut, code := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--token-file", token, "drain", "r3")
	if code == 0 || !strings.Contains(errOut, "refusing to send the API token in clear") {
		t.Errorf("msr ctl with the admin token, no --ca: exit %d, %s", code, errOut)
	}
	https := []string{"lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--ca", demo.APIFile("ca.crt"), "--token-file", token}
	if out, errOut, code := msr(t, append(https, "drain", "r3")...); code != 0 {
		t.Fatalf("msr ctl drain over https with the admin token: %s %s", out, errOut)
	}
	if out, errOut, code := msr(t, append(https, "undrain", "r3")...); code != 0 {
		t.Fatalf("msr ctl undrain over https with the admin token: %s %s", out, errOut)
	}
}

// checkDaemonUser: the daemon prog whose command line names conf runs as
// the user name, not root, and conf, which holds its secrets, is 0600
// and that user's.
func checkDaemonUser(t *testing.T, prog, name, conf string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("no user %s on this machine: %v", name, err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	found := false
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(cmd), prog+"\x00") || !strings.Contains(string(cmd), "\x00"+conf+"\x00") {
			continue
		}
		st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		found = true
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "Uid:" && (f[1] != u.Uid || f[2] != u.Uid) {
				t.Errorf("%s runs as uid %s (effective %s), want %s's %s", prog, f[1], f[2], name, u.Uid)
			}
			// CAP_DAC_OVERRIDE (1) and CAP_SYS_ADMIN (21): root's powers.
			if len(f) == 2 && f[0] == "CapEff:" {
				if c, err := strconv.ParseUint(f[1], 16, 64); err != nil || c&(1<<1|1<<21) != 0 {
					t.Errorf("%s's capabilities: %s", prog, f[1])
				}
			}
		}
	}
	if !found {
		t.Errorf("no %s with %s running", prog, conf)
	}
	fi, err := os.Stat(conf)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || strconv.Itoa(int(st.Uid)) != u.Uid {
		t.Errorf("%s: mode %v, uid %d; want 0600 and %s's", conf, fi.Mode().Perm(), st.Uid, name)
	}
}
