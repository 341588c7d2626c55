package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkConsole drives `msr ctl` against the running t-rib lab
// (TestRIBFromPeerToBackend) from the back-end's host, over the network to
// the VCP's management API, as an operator would: the router as one box,
// a relay to one element, changes with and without the key, and a reload.
func checkConsole(t *testing.T, dir string, routes func() string) {
	t.Helper()
	ctl, ctlJSON := consoleCtl(t)
	keyed := []string{"--key-file", filepath.Join(dir, "key"), "--insecure"} // the lab's API is plain http
	// Without --insecure, the token is not sent in clear to 10.0.0.1.
	if _, errOut, code := ctl("--key-file", filepath.Join(dir, "key"), "drain", "t-rib-r1"); code == 0 || !strings.Contains(errOut, "refusing to send the API token in clear") {
		t.Errorf("msr ctl --key-file over plain http without --insecure: exit %d, %s", code, errOut)
	}

	var elements []struct {
		Name     string
		Role     string
		Alive    bool
		Capacity uint32 `json:"capacity_mbps"`
	}
	ctlJSON(&elements, "elements")
	if len(elements) != 2 || elements[0].Name != "t-rib-lb" || elements[1].Name != "t-rib-r1" || !elements[0].Alive || !elements[1].Alive {
		t.Errorf("elements: %+v", elements)
	}

	checkConsoleRoutes(t)
	// The VCP's own status, and one LB's table slot by slot, through the
	// relay: every slot sends to the one back-end.
	var st struct {
		Role     string
		Elements []struct{ Name string }
	}
	ctlJSON(&st, "status")
	if st.Role != "active" || len(st.Elements) != 2 {
		t.Errorf("status: %+v", st)
	}
	var table struct {
		Mode  string
		Slots []string
	}
	ctlJSON(&table, "table", "t-rib-lb")
	if table.Mode != "hash" || len(table.Slots) == 0 {
		t.Errorf("table: %s with %d slots", table.Mode, len(table.Slots))
	}
	for i, mac := range table.Slots {
		if mac != "02:00:00:00:b0:01" {
			t.Errorf("table: slot %d sends to %s, not the back-end", i, mac)
			break
		}
	}

	// A relay to the back-end's own API, by name.
	var r1 struct{ Name string }
	ctlJSON(&r1, "element", "t-rib-r1")
	if r1.Name != "t-rib-r1" {
		t.Errorf("relayed status: %+v", r1)
	}

	checkConsoleChanges(t, dir, keyed, routes)
}

// checkConsoleRoutes: the console's routes, one address's route in the
// suite and the back-end, the ports, and the port's mirror named after it.
func checkConsoleRoutes(t *testing.T) {
	_, ctlJSON := consoleCtl(t)
	// Routes: the suite's count, the back-end's session and install state.
	var rv struct {
		Networks int
		Backends []struct {
			Name      string
			Installed uint32
			Session   string
			Exported  int
		}
	}
	ctlJSON(&rv, "routes")
	// 4 paths sent (100.64.0.0/10 from both peers, ADD-PATH), 5 routes in
	// the FIB (the port's subnets, IPv4 and IPv6, 3 learned, one of them
	// ECMP).
	if rv.Networks < 4 || len(rv.Backends) != 1 || rv.Backends[0].Session != "Established" || rv.Backends[0].Exported != 4 || rv.Backends[0].Installed != 5 {
		t.Errorf("routes: %+v", rv)
	}
	// One address: the suite's route, and the back-end's FIB entry.
	var lv struct {
		Suite []struct {
			Prefix, Protocol string
			Best             bool
			Via              []string
		}
		Backends []struct {
			Name   string
			Routes []struct {
				Prefix, Protocol string
				Via              []string
				Preference       int
			}
			Error string
		}
	}
	ctlJSON(&lv, "route", "203.0.113.7")
	if len(lv.Suite) != 1 || lv.Suite[0].Prefix != "203.0.113.0/24" || !lv.Suite[0].Best || strings.Join(lv.Suite[0].Via, ",") != "192.0.2.10" {
		t.Errorf("the suite's route for 203.0.113.7: %+v", lv.Suite)
	}
	if len(lv.Backends) != 1 || len(lv.Backends[0].Routes) != 1 || lv.Backends[0].Routes[0].Prefix != "203.0.113.0/24" ||
		strings.Join(lv.Backends[0].Routes[0].Via, ",") != "192.0.2.10" {
		t.Errorf("the back-end's route for 203.0.113.7: %+v", lv.Backends)
	}
	// Where the back-end's route came from, as the suite said: BGP at
	// BIRD's preference 100.
	if r := lv.Backends[0].Routes; len(r) == 1 && (r[0].Protocol != "bgp" || r[0].Preference != 100) {
		t.Errorf("the back-end's route for 203.0.113.7 came from %q at preference %d, want bgp at 100", r[0].Protocol, r[0].Preference)
	}
	// Ports: the LB's external port with the router's address, and the BGP
	// session's packets counted on it.
	var pv struct {
		Ports []struct {
			Name, Role, Address string
			VLAN                uint16
			RxPackets           uint64 `json:"rx_packets"`
		}
		External struct {
			RxPackets uint64 `json:"rx_packets"`
		}
	}
	ctlJSON(&pv, "ports")
	ext := 0
	for _, p := range pv.Ports {
		if p.Role == "external" {
			ext++
			if p.VLAN != 10 || p.Address != "192.0.2.1/24" || p.Name != "t-rib-lb/e0" {
				t.Errorf("external port: %+v", p)
			}
		}
	}
	if ext != 1 || pv.External.RxPackets == 0 {
		t.Errorf("ports: %+v", pv)
	}
	// The same name on the port's mirror in the VCP, where the suite
	// speaks for it.
	if out, errOut, _ := msr(t, "lab", "exec", "--lab", "t-rib", "vcp", "--", "ip", "link", "show", "x10"); !strings.Contains(out, "alias t-rib-lb/e0") {
		t.Errorf("the mirror x10 is not named after its port: %s %s", out, errOut)
	}
}

// checkConsoleChanges: changes need the key; a drain and a weight with
// it; a reload refused for a bad line or a restart, a dry run, and one
// that reaches the back-end.
func checkConsoleChanges(t *testing.T, dir string, keyed []string, routes func() string) {
	ctl, ctlJSON := consoleCtl(t)
	var elements []struct {
		Capacity uint32 `json:"capacity_mbps"`
	}
	if out, errOut, code := ctl("drain", "t-rib-r1"); code == 0 || !strings.Contains(errOut, "needs the admin token") {
		t.Errorf("a drain without the key: %d %s %s", code, out, errOut)
	}
	tableWeights := func() map[string]uint16 {
		var ts []struct{ Weights map[string]uint16 }
		ctlJSON(&ts, "tables")
		if len(ts) != 1 {
			t.Fatalf("tables: %+v", ts)
		}
		return ts[0].Weights
	}
	if w := tableWeights(); w["t-rib-r1"] == 0 {
		t.Errorf("weights before the drain: %v", w)
	}
	if out, errOut, code := ctl(append(keyed, "drain", "t-rib-r1")...); code != 0 {
		t.Fatalf("drain: %s %s", out, errOut)
	}
	if w := tableWeights(); w["t-rib-r1"] != 0 {
		t.Errorf("weights after the drain: %v", w)
	}
	ctl(append(keyed, "undrain", "t-rib-r1")...)
	if out, errOut, code := ctl(append(keyed, "weight", "t-rib-r1", "500")...); code != 0 {
		t.Fatalf("weight: %s %s", out, errOut)
	}
	ctlJSON(&elements, "elements")
	if elements[1].Capacity != 500 {
		t.Errorf("capacity after weight 500: %+v", elements)
	}

	// Reload: a bad file is refused with its line, a change that needs a
	// restart is refused whole, a new static route is applied and reaches
	// the back-end.
	vcpFile := filepath.Join(dir, "vcp.yaml")
	good, _ := os.ReadFile(vcpFile)
	os.WriteFile(vcpFile, []byte(strings.Replace(string(good), "routing:\n", "routing:\n  colour: blue\n", 1)), 0o644)
	if _, errOut, code := ctl(append(keyed, "reload")...); code == 0 || !strings.Contains(errOut, "vcp.yaml:") || !strings.Contains(errOut, "colour") {
		t.Errorf("reload of a bad file: %d %s", code, errOut)
	}
	os.WriteFile(vcpFile, []byte(strings.Replace(string(good), "interface: eth0", "interface: eth1", 1)), 0o644)
	if _, errOut, code := ctl(append(keyed, "reload")...); code == 0 || !strings.Contains(errOut, "need a restart") {
		t.Errorf("reload of a new interface: %d %s", code, errOut)
	}
	os.WriteFile(vcpFile, []byte(strings.Replace(string(good), "  static:\n", "  static:\n    - {to: 198.51.101.0/24, via: 192.0.2.20}\n", 1)), 0o644)
	// A dry run says what would change and applies nothing: the route
	// stays away from the back-end, and the real reload still finds it new.
	var dry struct {
		Changes []string
		DryRun  bool `json:"dry_run"`
	}
	ctlJSON(&dry, append(keyed, "reload", "--dry-run")...)
	if !dry.DryRun || len(dry.Changes) != 1 || dry.Changes[0] != "routing static 198.51.101.0/24 added: via 192.0.2.20" {
		t.Errorf("reload --dry-run said %+v", dry)
	}
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(routes(), `"198.51.101.0/24"`) {
		t.Errorf("reload --dry-run applied the route")
	}
	var res struct{ Changes []string }
	ctlJSON(&res, append(keyed, "reload")...)
	if len(res.Changes) != 1 || res.Changes[0] != "routing static 198.51.101.0/24 added: via 192.0.2.20" {
		t.Errorf("reload said %q", res.Changes)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(routes(), `"198.51.101.0/24"`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reloaded static route never reached the back-end: %s", routes())
		}
	}
	ctlJSON(&res, append(keyed, "reload")...)
	if len(res.Changes) != 0 {
		t.Errorf("a second reload of the same file changed %q", res.Changes)
	}
	checkCommitConfirmed(t, vcpFile, keyed, routes)
}

// checkCommitConfirmed: a change applied with --confirm and left
// unconfirmed rolls back by itself, the file too; one confirmed stays;
// rollback 1 undoes the last change; the history says who did each.
func checkCommitConfirmed(t *testing.T, vcpFile string, keyed []string, routes func() string) {
	ctl, ctlJSON := consoleCtl(t)
	has := func(prefix string, want bool, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); strings.Contains(routes(), `"`+prefix+`"`) != want; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s on the back-end: %v after %v, want %v", prefix, !want, within, want)
			}
		}
	}
	base, _ := os.ReadFile(vcpFile)
	with := func(prefix string) []byte {
		return []byte(strings.Replace(string(base), "  static:\n", "  static:\n    - {to: "+prefix+", via: 192.0.2.20}\n", 1))
	}
	type entry struct {
		Seq         int
		Who, How    string
		Pending     bool
		ConfirmedBy string `json:"confirmed_by"`
		RolledBack  bool   `json:"rolled_back"`
	}
	var res struct {
		Changes []string
		Entry   *entry
	}
	if _, errOut, code := ctl(append(keyed, "reload", "--confirm", "5s")...); code == 0 || !strings.Contains(errOut, "10s to 1h") {
		t.Errorf("reload --confirm 5s: %d %s", code, errOut)
	}

	// Not confirmed: back by itself, file and all.
	os.WriteFile(vcpFile, with("198.51.102.0/24"), 0o644)
	start := time.Now()
	ctlJSON(&res, append(keyed, "reload", "--confirm", "10s")...)
	if res.Entry == nil || !res.Entry.Pending || len(res.Changes) != 1 {
		t.Fatalf("reload --confirm 10s: %+v", res)
	}
	has("198.51.102.0/24", true, 5*time.Second)
	has("198.51.102.0/24", false, 20*time.Second)
	if d := time.Since(start); d < 10*time.Second {
		t.Errorf("rolled back %v after the reload, before its 10 s", d)
	}
	if b, _ := os.ReadFile(vcpFile); string(b) != string(base) {
		t.Errorf("the config file after the rollback is not the one before the change:\n%s", b)
	}
	if !strings.Contains(routes(), `"198.51.101.0/24"`) {
		t.Errorf("the rollback took the confirmed config's route away too")
	}

	// Confirmed: stays past its time.
	os.WriteFile(vcpFile, with("198.51.103.0/24"), 0o644)
	ctlJSON(&res, append(keyed, "reload", "--confirm", "10s")...)
	has("198.51.103.0/24", true, 5*time.Second)
	if out, errOut, code := ctl(append(keyed, "confirm")...); code != 0 || !strings.Contains(out, "confirmed") {
		t.Fatalf("confirm: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := ctl(append(keyed, "confirm")...); code == 0 || !strings.Contains(errOut, "nothing to confirm") {
		t.Errorf("a second confirm: %d %s", code, errOut)
	}
	time.Sleep(11 * time.Second)
	has("198.51.103.0/24", true, 0)

	// rollback 1: the change undone, the file with it.
	ctlJSON(&res, append(keyed, "rollback")...)
	if len(res.Changes) != 1 || !strings.Contains(res.Changes[0], "198.51.103.0/24") {
		t.Errorf("rollback said %+v", res)
	}
	has("198.51.103.0/24", false, 5*time.Second)
	if b, _ := os.ReadFile(vcpFile); string(b) != string(base) {
		t.Errorf("the config file after rollback 1 is not the one before:\n%s", b)
	}
	if _, errOut, code := ctl(append(keyed, "rollback", "10")...); code == 0 || !strings.Contains(errOut, "history holds") {
		t.Errorf("rollback 10: %d %s", code, errOut)
	}

	var h struct{ Entries []entry }
	ctlJSON(&h, "history")
	if len(h.Entries) < 5 {
		t.Fatalf("history: %+v", h)
	}
	e := h.Entries
	if !strings.HasPrefix(e[0].How, "rollback 1") || !strings.Contains(e[1].How, "confirm within 10s") || !strings.Contains(e[1].ConfirmedBy, "admin token") ||
		!strings.Contains(e[2].How, "not confirmed within 10s") || e[3].Pending || !e[3].RolledBack || !strings.Contains(e[4].Who, "admin token from 10.0.0.") {
		t.Errorf("history: %+v", e[:5])
	}
	if out, _, _ := ctl("history"); !strings.Contains(out, "rollback 1") {
		t.Errorf("history as text:\n%s", out)
	}
}

// consoleCtl runs `msr ctl` in t-rib's r1 against the VCP's management
// API, as an operator would: its output, errors and exit code, or its
// JSON output decoded into v (failing the test if it fails).
func consoleCtl(t *testing.T) (ctl func(args ...string) (string, string, int), ctlJSON func(v any, args ...string)) {
	ctl = func(args ...string) (string, string, int) {
		t.Helper()
		return msr(t, append([]string{"lab", "exec", "--lab", "t-rib", "r1", "--", msrBin, "ctl", "--api", "10.0.0.1:8179"}, args...)...)
	}
	ctlJSON = func(v any, args ...string) {
		t.Helper()
		out, errOut, code := ctl(append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("msr ctl %v: %s %s", args, out, errOut)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("msr ctl %v: %v: %s", args, err, out)
		}
	}
	return ctl, ctlJSON
}
