package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestSNMP: the default lab's router answers SNMP as one box, with
// net-snmp's own clients from the hosts outside. IF-MIB lists the
// router's three external ports (ifIndex = VLAN) and none of the
// elements' internal ones; their 64-bit counters grow with the traffic
// h1 sends; SNMPv3 authPriv works with the configured user and not with
// a wrong key; lb1/e1's link taken down (its switch port, as a pulled
// cable) shows as ifOperStatus down within 2 s, the linkDown trap
// reaches snmptrapd on h1, the suite withdraws the port's network, and
// all of it is undone when the link comes back.
func TestSNMP(t *testing.T) {
	upDefaultLab(t, 100)
	trapLog := startTrapReceiver(t, func(argv ...string) (string, error) { return demo.Exec("h1", argv...) })
	v2c := []string{"-v2c", "-c", "public", "-On", "-t", "1", "-r", "2", "-m", ""}
	snmp := func(host, tool, addr string, opts []string, oids ...string) string {
		t.Helper()
		out, err := demo.Exec(host, append(append(append([]string{tool}, opts...), addr), oids...)...)
		if err != nil {
			t.Fatalf("%s from %s: %v", tool, host, err)
		}
		return out
	}
	getValue := func(oid string) string { t.Helper(); return snmpValue(t, oid) }

	// ifXTable's names: the three external ports, nothing internal.
	names := snmp("h1", "snmpwalk", demo.RouterAddr1, v2c, ".1.3.6.1.2.1.31.1.1.1.1")
	for _, want := range []string{`.1.3.6.1.2.1.31.1.1.1.1.10 = STRING: "lb1/e0"`, `.1.3.6.1.2.1.31.1.1.1.1.11 = STRING: "lb1/e1"`, `.1.3.6.1.2.1.31.1.1.1.1.12 = STRING: "lb2/e0"`} {
		if !strings.Contains(names, want) {
			t.Errorf("ifName walk lacks %s:\n%s", want, names)
		}
	}
	if n := strings.Count(strings.TrimSpace(names), "\n") + 1; n != 3 || strings.Contains(names, "/i") {
		t.Errorf("ifName walk: %d rows, want the 3 external ports only:\n%s", n, names)
	}
	// The router answers at each external address: h3 asks 203.0.113.1.
	if out := snmp("h3", "snmpget", "203.0.113.1", v2c, ".1.3.6.1.2.1.1.5.0"); !strings.Contains(out, `STRING: "msr-default"`) {
		t.Errorf("sysName from h3: %s", out)
	}
	// The community is answered from its sources only: h2's subnet is
	// none of them (sources: the management network, h1's and h3's).
	if out, err := demo.Exec("h2", append(append([]string{"snmpget"}, v2c...), demo.RouterAddr1, ".1.3.6.1.2.1.1.5.0")...); err == nil || strings.Contains(out, "msr-default") {
		t.Errorf("the community answered h2, not among its sources: %v %s", err, out)
	}

	// Counters grow with the traffic: 500 pings from h1 through lb1/e0.
	hcIn := func() uint64 {
		v, err := strconv.ParseUint(getValue(".1.3.6.1.2.1.31.1.1.1.7.10"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := hcIn()
	if _, err := demo.Exec("h1", "ping", "-q", "-c", "500", "-i", "0.002", demo.H3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the LB's next hellos carry its counters
	if after := hcIn(); after-before < 500 {
		t.Errorf("ifHCInUcastPkts.10 grew by %d over 500 pings (from %d to %d)", after-before, before, after)
	}

	// SNMPv3 authPriv: the configured user reads IF-MIB; a wrong key does not.
	v3 := []string{"-v3", "-l", "authPriv", "-u", "msrops", "-a", "SHA-256", "-A", "msr-auth-secret", "-x", "AES", "-X", "msr-priv-secret", "-On", "-t", "1", "-r", "1", "-m", ""}
	if out := snmp("h1", "snmpwalk", demo.RouterAddr1, v3, ".1.3.6.1.2.1.2.2.1.2"); !strings.Contains(out, `.1.3.6.1.2.1.2.2.1.2.12 = STRING: "lb2/e0"`) {
		t.Errorf("v3 walk of ifDescr:\n%s", out)
	}
	bad := []string{"snmpget", "-v3", "-l", "authPriv", "-u", "msrops", "-a", "SHA-256", "-A", "wrong-auth-secret", "-x", "AES", "-X", "msr-priv-secret",
		"-t", "1", "-r", "0", demo.RouterAddr1, ".1.3.6.1.2.1.1.5.0"}
	if out, err := demo.Exec("h1", bad...); err == nil {
		t.Errorf("v3 with a wrong key answered: %s", out)
	}

	checkLinkTraps(t, trapLog)
	// Read-only: a set is refused.
	if out, err := demo.Exec("h1", "snmpset", "-v2c", "-c", "public", "-t", "1", "-r", "0", demo.RouterAddr1, ".1.3.6.1.2.1.1.5.0", "s", "evil"); err == nil {
		t.Errorf("snmpset answered: %s", out)
	}
	if v := getValue(".1.3.6.1.2.1.1.5.0"); v != `"msr-default"` {
		t.Errorf("sysName after the set: %s", v)
	}
}

// checkLinkTraps: lb1/e1's cable pulled: ifOperStatus down within 2 s,
// a linkDown trap to h1 (logged in trapLog), the port down in msr ctl
// ports, its subnet withdrawn; and back: up, a linkUp trap, the subnet
// and OSPF with ospf1 back.
func checkLinkTraps(t *testing.T, trapLog string) {
	getValue := func(oid string) string { t.Helper(); return snmpValue(t, oid) }
	// lb1/e1's cable pulled: ifOperStatus down within 2 s, a linkDown trap.
	operStatus := func() string { return getValue(".1.3.6.1.2.1.2.2.1.8.11") }
	if s := operStatus(); s != "1" {
		t.Fatalf("ifOperStatus.11 before: %s", s)
	}
	cut := time.Now()
	if _, err := demo.Exec("ext2", "ip", "link", "set", "q0", "down"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "ifOperStatus.11 down", func() bool { return operStatus() == "2" })
	t.Logf("ifOperStatus.11 down %v after the cut", time.Since(cut).Round(time.Millisecond))
	trap := regexp.MustCompile(`OID: \.1\.3\.6\.1\.6\.3\.1\.1\.5\.3\s+\.1\.3\.6\.1\.2\.1\.2\.2\.1\.1\.11 = INTEGER: 11`)
	waitFor(t, 3*time.Second, "linkDown trap for ifIndex 11 at h1", func() bool {
		b, _ := os.ReadFile(trapLog)
		return trap.Match(b)
	})
	var ports vcpapi.PortsView
	out, _, _ := msr(t, "ctl", "--name", "vcp1", "ports", "-o", "json")
	if err := json.Unmarshal([]byte(out), &ports); err != nil {
		t.Fatal(err)
	}
	for _, p := range ports.Ports {
		if p.Name == "lb1/e1" && (p.Up || p.Changes != 1) {
			t.Errorf("msr ctl ports: lb1/e1 %+v, want down after 1 change", p)
		}
	}
	suiteRoute := func() string {
		out, _, _ := msr(t, "ctl", "--name", "vcp1", "route", "198.51.100.10")
		return out
	}
	waitFor(t, 2*time.Second, "198.51.100.0/24 from direct1 withdrawn", func() bool { return !strings.Contains(suiteRoute(), "from direct1") })

	// And back.
	if _, err := demo.Exec("ext2", "ip", "link", "set", "q0", "up"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "ifOperStatus.11 up", func() bool { return operStatus() == "1" })
	waitFor(t, 3*time.Second, "linkUp trap", func() bool {
		b, _ := os.ReadFile(trapLog)
		return strings.Contains(string(b), "OID: .1.3.6.1.6.3.1.1.5.4")
	})
	waitFor(t, 3*time.Second, "198.51.100.0/24 from direct1 back", func() bool { return strings.Contains(suiteRoute(), "from direct1") })
	// The suite talks out of the port again: OSPF with ospf1, on lb1/e1,
	// back to a full adjacency (its mirror went down and up with the
	// port; a mirror's bridge once stopped for good at that).
	waitFor(t, 20*time.Second, "OSPF with ospf1 running again", func() bool { return strings.Contains(demo.Look().Sessions["ospf1"], "Running") })

}

// waitFor polls cond every 50 ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snmpValue is the value of oid the router answers h1 (SNMPv2c).
func snmpValue(t *testing.T, oid string) string {
	t.Helper()
	v2c := []string{"-v2c", "-c", "public", "-On", "-t", "1", "-r", "2", "-m", ""}
	out, err := demo.Exec("h1", append(append([]string{"snmpget"}, v2c...), "-Oqv", demo.RouterAddr1, oid)...)
	if err != nil {
		t.Fatalf("snmpget %s: %v", oid, err)
	}
	return strings.TrimSpace(out)
}
