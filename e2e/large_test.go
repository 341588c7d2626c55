package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestLargeRouter: the large lab (msr demo up --size large: 16 LBs × 4
// external ports, 8 back-ends, both VCPs, a host on every port, 8 BGP and
// 4 OSPF neighbours) converges; every host reaches every other across the
// router, IPv4 and IPv6 (the whole 64×63 matrix, fping from each host),
// and the peers' and OSPF neighbours' addresses; traceroute shows the
// router as one hop from every port; SNMP's ifTable and msr ctl ports
// list the 64 external ports and no internal one, and the web view draws
// them grouped by LB, with a filter. lb5's host dies (links
// down, agent killed): its ports go down in SNMP with a linkDown trap,
// its BGP peer's routes leave every back-end, and a flow between two
// other ports loses nothing; it comes back, and so do they. lb17 joins
// with 4 more ports while the router runs: the VCP takes them without a
// restart and they carry traffic.
func TestLargeRouter(t *testing.T) {
	demo.Down()
	start := time.Now()
	plan, err := demo.UpLarge(msrBin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { demo.DownLarge() })
	up := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := demo.WaitLarge(ctx, plan, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, labLogs(demo.LargeLab, "vcp1.vcp", "r1.router"))
	}
	t.Logf("lab up in %.1f s, converged %.1f s after start", up.Seconds(), time.Since(start).Seconds())
	logLargeUse(t)
	checkLargeMatrix(t, plan)
	checkLargeTraceroute(t, plan)
	checkLargeInventory(t, plan)
	checkLargeWebView(t)
	checkLargeLBDeath(t, plan, 5)
	checkLargeLBJoins(t, plan)
}

// largeTargets are the addresses of every port's host but from's, of a
// family.
func largeTargets(plan *demo.LargePlan, from string, v6 bool) []string {
	var out []string
	for _, p := range plan.Ports {
		if p.Host == from {
			continue
		}
		a := p.HostAddr
		if v6 {
			a = p.HostAddr6
		}
		out = append(out, a.String())
	}
	return out
}

// fpingUnreachable runs fping from a host of the large lab to targets
// (two tries each, 300 ms apart) and returns those that did not answer.
func fpingUnreachable(host string, v6 bool, targets []string) ([]string, error) {
	argv := []string{"fping", "-u", "-r", "2", "-t", "300", "-i", "5"}
	if v6 {
		argv = append(argv, "-6")
	}
	out, err := demo.ExecLarge(host, append(argv, targets...)...)
	var lost []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(l, "unreachable") {
			lost = append(lost, f[0])
		}
	}
	if err != nil && len(lost) == 0 {
		return nil, err
	}
	return lost, nil
}

// checkLargeMatrix: every port's host reaches every other, both families,
// and the addresses behind the peers' routes; no sample, the whole matrix.
func checkLargeMatrix(t *testing.T, plan *demo.LargePlan) {
	t.Helper()
	start := time.Now()
	type job struct {
		host string
		v6   bool
	}
	jobs := make(chan job)
	var mu sync.Mutex
	failed, tried := map[bool][]string{}, map[bool]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				targets := largeTargets(plan, j.host, j.v6)
				lost, err := fpingUnreachable(j.host, j.v6, targets)
				mu.Lock()
				tried[j.v6] += len(targets)
				if err != nil {
					failed[j.v6] = append(failed[j.v6], fmt.Sprintf("%s: %v", j.host, err))
				}
				for _, l := range lost {
					failed[j.v6] = append(failed[j.v6], j.host+" -> "+l)
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range plan.Ports {
		jobs <- job{p.Host, false}
		jobs <- job{p.Host, true}
	}
	close(jobs)
	wg.Wait()
	for _, v6 := range []bool{false, true} {
		if len(failed[v6]) > 0 {
			t.Errorf("ping matrix (IPv6 %v): %d of %d pairs failed: %v", v6, len(failed[v6]), tried[v6], failed[v6][:min(len(failed[v6]), 20)])
		}
	}
	t.Logf("ping matrix: %d IPv4 and %d IPv6 pairs in %.1f s", tried[false], tried[true], time.Since(start).Seconds())
	// What the neighbours route to: an address behind each BGP peer's
	// first prefixes, and each OSPF neighbour's.
	var learned, learned6 []string
	for _, peer := range plan.Peers {
		learned = append(learned, peer.Prefixes[0].Addr().Next().String())
		learned6 = append(learned6, peer.Prefixes6[0].Addr().Next().String())
	}
	for _, o := range plan.OSPF {
		learned = append(learned, demo.OSPFHostOf(o.LB).String())
	}
	last := plan.Ports[len(plan.Ports)-1].Host
	for v6, targets := range map[bool][]string{false: learned, true: learned6} {
		if lost, err := fpingUnreachable(last, v6, targets); err != nil || len(lost) > 0 {
			t.Errorf("from %s to the neighbours' routes (IPv6 %v): unreachable %v %v", last, v6, lost, err)
		}
	}
}

// checkLargeTraceroute: from every port's host to the host of the port
// half the router away, the router is one hop: its address on the
// sender's port, then the destination.
func checkLargeTraceroute(t *testing.T, plan *demo.LargePlan) {
	t.Helper()
	n := len(plan.Ports)
	var wg sync.WaitGroup
	errs := make([]string, n)
	sem := make(chan struct{}, 8)
	for i, p := range plan.Ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dst := plan.Ports[(i+n/2)%n].HostAddr.String()
			out, err := demo.ExecLarge(p.Host, "traceroute", "-n", "-q", "1", "-w", "1", "-m", "4", dst)
			var hops []string
			for _, l := range strings.Split(out, "\n")[1:] {
				if f := strings.Fields(l); len(f) >= 2 {
					hops = append(hops, f[1])
				}
			}
			if err != nil || len(hops) != 2 || hops[0] != p.Router.String() || hops[1] != dst {
				errs[i] = fmt.Sprintf("%s -> %s: hops %v (%v)", p.Host, dst, hops, err)
			}
		}()
	}
	wg.Wait()
	var bad []string
	for _, e := range errs {
		if e != "" {
			bad = append(bad, e)
		}
	}
	if len(bad) > 0 {
		t.Errorf("traceroute: %d of %d not one hop: %v", len(bad), n, bad)
	}
}

// largeSNMP runs an SNMP tool from h1e0 (a source the router's SNMP
// allows) at the router's address on its port.
func largeSNMP(tool string, oids ...string) (string, error) {
	argv := append([]string{tool, "-v2c", "-c", "public", "-On", "-t", "1", "-r", "2", "-m", "", "10.1.0.1"}, oids...)
	return demo.ExecLarge("h1e0", argv...)
}

// Interface objects (IF-MIB).
const (
	oidIfName       = "1.3.6.1.2.1.31.1.1.1.1"
	oidIfOperStatus = "1.3.6.1.2.1.2.2.1.8"
	oidIfNumber     = "1.3.6.1.2.1.2.1.0"
	oidIfTableLast  = "1.3.6.1.2.1.31.1.5.0"
)

// largeCtlPorts is msr ctl ports' external ports, from r1 (the
// management network).
func largeCtlPorts(t *testing.T) []vcpapi.PortView {
	t.Helper()
	api := filepath.Join(demo.LargeRunDir, "api")
	var out strings.Builder
	code, err := lab.Exec(demo.LargeLab, "r1", []string{msrBin, "ctl", "--api", "10.0.0.1:8179", "--ca", filepath.Join(api, "ca.crt"),
		"--token-file", filepath.Join(api, "read.token"), "-o", "json", "ports"}, nil, &out, &out)
	var v vcpapi.PortsView
	if err != nil || code != 0 || json.Unmarshal([]byte(out.String()), &v) != nil {
		t.Fatalf("msr ctl ports: %v %d %s", err, code, out.String())
	}
	var ext []vcpapi.PortView
	for _, p := range v.Ports {
		if p.Role == "external" {
			ext = append(ext, p)
		}
	}
	return ext
}

// checkLargeInventory: SNMP's ifTable and msr ctl ports list every
// external port of the plan by its name, and nothing else.
func checkLargeInventory(t *testing.T, plan *demo.LargePlan) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range plan.Ports {
		want[fmt.Sprintf("%d %s", p.VLAN, p.Name)] = true
	}
	out, err := largeSNMP("snmpwalk", oidIfName)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	re := regexp.MustCompile(`\.(\d+) = STRING: "([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		got[m[1]+" "+m[2]] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("SNMP ifName: %d entries %v, want the %d external ports %v", len(got), slices.Sorted(maps.Keys(got)), len(want), slices.Sorted(maps.Keys(want)))
	}
	if n, _ := largeSNMP("snmpget", oidIfNumber); !strings.Contains(n, fmt.Sprintf("INTEGER: %d", len(plan.Ports))) {
		t.Errorf("ifNumber: %s, want %d", n, len(plan.Ports))
	}
	ctl := map[string]bool{}
	for _, p := range largeCtlPorts(t) {
		ctl[fmt.Sprintf("%d %s", p.VLAN, p.Name)] = true
	}
	if !maps.Equal(ctl, want) {
		t.Errorf("msr ctl ports: %d external %v, want %d", len(ctl), slices.Sorted(maps.Keys(ctl)), len(want))
	}
}

// checkLargeWebView: a real browser on the management network opens the
// web view of the 64 ports: the picture draws the 16 LBs with their
// ports up of all, the ports table groups them by LB, and the filter of
// the page's link (?ports=lb16/e) shows lb16's external ports alone.
func checkLargeWebView(t *testing.T) {
	t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join(demo.LargeRunDir, "api", "api.crt"))
	if err != nil {
		t.Fatal(err)
	}
	der, _ := pemDecode(pemBytes)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	profile := t.TempDir()
	dom := func(url string) string {
		t.Helper()
		out, err := demo.ExecLarge("r1", "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+profile, "--virtual-time-budget=3000",
			"--ignore-certificate-errors-spki-list="+base64.StdEncoding.EncodeToString(spki[:]), "--dump-dom", url)
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
		return out
	}
	count := func(dom, re string) int { return len(regexp.MustCompile(re).FindAllString(dom, -1)) }
	all := dom("https://10.0.0.1:8179/")
	if n := count(all, `<g data-name="lb\d+" data-role="lb" data-ports="4" data-up="4">`); n != demo.LargeLBs {
		t.Errorf("the picture draws %d LBs with 4 of 4 ports up, want %d", n, demo.LargeLBs)
	}
	// 80 ports with the LBs' internal ones: past 64, each LB's are shown
	// when its group is opened or the filter names them.
	if groups, ports := count(all, `<tr class="lbgroup"`), count(all, `<tr class="port"`); groups != demo.LargeLBs || ports != 0 {
		t.Errorf("the ports table: %d LB groups and %d ports, want %d groups, closed", groups, ports, demo.LargeLBs)
	}
	one := dom("https://10.0.0.1:8179/?ports=lb16/e")
	ports := regexp.MustCompile(`<tr class="port" data-name="([^"]+)"`).FindAllStringSubmatch(one, -1)
	if groups := count(one, `<tr class="lbgroup"`); groups != 1 || len(ports) != 4 || ports[0][1] != "lb16/e0" {
		t.Errorf("filtered to lb16/e: %d groups and ports %v, want lb16's 4 external", groups, ports)
	}
}

// operStatus is the ifOperStatus of the ports with the VLANs, by VLAN.
func operStatus(vlans []uint16) map[uint16]int {
	var oids []string
	for _, v := range vlans {
		oids = append(oids, fmt.Sprintf("%s.%d", oidIfOperStatus, v))
	}
	out, _ := largeSNMP("snmpget", oids...)
	st := map[uint16]int{}
	re := regexp.MustCompile(`\.(\d+) = INTEGER: (\d+)`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		st[uint16(v)] = s
	}
	return st
}

// routesOff says whether no back-end routes any of ps (the lookup of an
// address in it finds no route, or a shorter one).
func routesOff(ps []netip.Prefix) bool {
	for _, p := range ps {
		if n, err := routeOnAll(p); err != nil || n > 0 {
			return false
		}
	}
	return true
}

// routeOnAll says whether every back-end's FIB holds p.
func routeOnAll(p netip.Prefix) (int, error) {
	n := 0
	for r := 1; r <= demo.LargeBackends; r++ {
		rs, err := routerapi.Local(fmt.Sprintf("r%d", r), "").Lookup(p.Addr().Next())
		if err != nil {
			return 0, err
		}
		if len(rs) > 0 && rs[0].Prefix == p.String() {
			n++
		}
	}
	return n, nil
}

// pingFlow pings from one host to another every 10 ms for d, in the
// background; wait returns what was lost.
func pingFlow(from string, to netip.Addr, d time.Duration) (wait func() (sent, lost int, err error)) {
	n := int(d / (10 * time.Millisecond))
	var out string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err = demo.ExecLarge(from, "ping", "-q", "-i", "0.01", "-c", fmt.Sprint(n), "-W", "1", to.String())
	}()
	return func() (int, int, error) {
		<-done
		m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(out)
		if m == nil {
			return 0, 0, fmt.Errorf("ping %s -> %s: %v %s", from, to, err, out)
		}
		s, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[2])
		return s, s - r, nil
	}
}

// checkLargeLBDeath: LB l's host dies, as a line card pulled out: every
// link down and its agent killed. Its ports go down in SNMP (notPresent:
// RFC 2863's state of a missing component) with a linkDown trap each, its
// BGP peer's routes leave every back-end, and a flow between two other
// LBs' ports loses nothing. Then it comes back: links up, agent started,
// ports up and routes back.
func checkLargeLBDeath(t *testing.T, plan *demo.LargePlan, l int) {
	t.Helper()
	traps := startTrapReceiver(t, func(argv ...string) (string, error) { return demo.ExecLarge("h1e0", argv...) })
	var vlans []uint16
	var subnets []netip.Prefix // its ports', connected on every back-end
	for _, p := range plan.Ports {
		if p.LB == l {
			vlans = append(vlans, p.VLAN)
			subnets = append(subnets, netip.PrefixFrom(p.Router, 24).Masked())
		}
	}
	peer := plan.Peers[l-1]
	if peer.Port.LB != l {
		t.Fatalf("lb%d has no BGP peer in the plan", l)
	}
	learned := peer.Prefixes[0]
	if n, err := routeOnAll(learned); err != nil || n != demo.LargeBackends {
		t.Fatalf("before: %s on %d back-ends (%v)", learned, n, err)
	}
	a, b := plan.Ports[1], plan.Ports[len(plan.Ports)-2] // lb1/e1 and lb16/e2
	wait := pingFlow(a.Host, b.HostAddr, 12*time.Second) // 2 s before the death, the withdrawal (~4 s) and as long again
	time.Sleep(2 * time.Second)
	died := time.Now()
	if err := demo.KillLargeLB(l); err != nil {
		t.Fatal(err)
	}
	var portsDown, withdrawn time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && (portsDown == 0 || withdrawn == 0); time.Sleep(100 * time.Millisecond) {
		if portsDown == 0 {
			down := 0
			for _, s := range operStatus(vlans) {
				if s == 6 || s == 2 {
					down++
				}
			}
			if down == len(vlans) {
				portsDown = time.Since(died)
			}
		}
		if withdrawn == 0 && routesOff(append(subnets, learned)) {
			withdrawn = time.Since(died)
		}
	}
	if portsDown == 0 {
		t.Errorf("lb%d's ports not down in SNMP 30 s after its host died: %v", l, operStatus(vlans))
	}
	if withdrawn == 0 {
		t.Errorf("%s (lb%d's BGP peer's) or its ports' subnets %v still on some back-end 30 s after the LB died", learned, l, subnets)
	}
	t.Logf("lb%d died: its ports down in SNMP after %v, its ports' and its peer's routes withdrawn from every back-end after %v", l, portsDown.Round(time.Millisecond), withdrawn.Round(time.Millisecond))
	if sent, lost, err := wait(); err != nil || lost > 0 {
		t.Errorf("%s -> %s while lb%d died: %d of %d lost (%v)", a.Host, b.Host, l, lost, sent, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		log, _ := os.ReadFile(traps)
		n := 0
		for _, v := range vlans {
			if strings.Contains(string(log), fmt.Sprintf(".1.3.6.1.2.1.2.2.1.1.%d = INTEGER: %d", v, v)) {
				n++
			}
		}
		if strings.Count(string(log), ".1.3.6.1.6.3.1.1.5.3") >= len(vlans) && n == len(vlans) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("linkDown traps for lb%d's ports: %d of %d seen\n%s", l, n, len(vlans), log)
			break
		}
	}
	// Back: links up and the agent started again.
	back := time.Now()
	if err := demo.ReviveLargeLB(l); err != nil {
		t.Fatal(err)
	}
	var portsUp time.Duration
	for deadline := time.Now().Add(30 * time.Second); portsUp == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		up := 0
		for _, s := range operStatus(vlans) {
			if s == 1 {
				up++
			}
		}
		if up == len(vlans) {
			portsUp = time.Since(back)
		}
	}
	if portsUp == 0 {
		t.Errorf("lb%d's ports not up in SNMP 30 s after it came back: %v", l, operStatus(vlans))
	}
	// The peer's session ended by its hold time: BIRD starts it again
	// after its error wait time (5 s, the router's), and its routes come
	// back once it is up.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := demo.WaitLarge(ctx, plan, io.Discard); err != nil {
		t.Fatalf("after lb%d came back: %v", l, err)
	}
	t.Logf("lb%d back: its ports up in SNMP after %v, every route back after %v", l, portsUp.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
}

// checkLargeLBJoins: lb17 joins the running router with 4 ports and an
// OSPF neighbour on its e0: its ports are in SNMP (ifTable grows,
// ifTableLastChange set) and msr ctl ports, its hosts reach the others
// both ways, the suite runs OSPF on its port (the neighbour's route on
// every back-end), a flow between two other ports loses nothing
// meanwhile, and the VCPs were not restarted.
func checkLargeLBJoins(t *testing.T, plan *demo.LargePlan) {
	t.Helper()
	vcpPIDs := func() map[string]int {
		st, err := lab.ReadState(demo.LargeLab)
		if err != nil {
			t.Fatal(err)
		}
		pids := map[string]int{}
		for _, p := range st.Processes {
			if p.Name == "vcp" && p.Running() {
				pids[p.Host] = p.PID
			}
		}
		return pids
	}
	pids := vcpPIDs()
	before := len(plan.Ports)
	a, b := plan.Ports[2], plan.Ports[before-3] // lb1/e2 and lb16/e1
	wait := pingFlow(a.Host, b.HostAddr, 15*time.Second)
	time.Sleep(time.Second)
	joined := time.Now()
	if err := demo.AddLargeLB(msrBin, plan); err != nil {
		t.Fatal(err)
	}
	// Its first port carries traffic: h1e0 answers its host.
	first := plan.Ports[before]
	var carries time.Duration
	for deadline := time.Now().Add(time.Minute); carries == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if lost, err := fpingUnreachable(first.Host, false, []string{plan.Ports[0].HostAddr.String()}); err == nil && len(lost) == 0 {
			carries = time.Since(joined)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := demo.WaitLarge(ctx, plan, io.Discard); err != nil {
		t.Fatalf("lb%d joining: %v\n%s", plan.LBs, err, labLogs(demo.LargeLab, "vcp1.vcp"))
	}
	converged := time.Since(joined)
	if sent, lost, err := wait(); err != nil || lost > 0 {
		t.Errorf("%s -> %s while lb%d joined: %d of %d lost (%v)", a.Host, b.Host, plan.LBs, lost, sent, err)
	}
	added := plan.Ports[before:]
	var targets []string
	for _, p := range plan.Ports[:before] {
		targets = append(targets, p.HostAddr.String())
	}
	for _, p := range added {
		if lost, err := fpingUnreachable(p.Host, false, targets); err != nil || len(lost) > 0 {
			t.Errorf("from %s (joined): unreachable %v %v", p.Host, lost, err)
		}
	}
	var joinedTargets []string
	for _, p := range added {
		joinedTargets = append(joinedTargets, p.HostAddr6.String())
	}
	if lost, err := fpingUnreachable("h1e0", true, joinedTargets); err != nil || len(lost) > 0 {
		t.Errorf("from h1e0 to the joined ports' hosts (IPv6): unreachable %v %v", lost, err)
	}
	// Its OSPF neighbour's route (WaitLarge waited for it on every
	// back-end) leads there.
	if lost, err := fpingUnreachable("h1e0", false, []string{demo.OSPFHostOf(plan.LBs).String()}); err != nil || len(lost) > 0 {
		t.Errorf("from h1e0 to lb%d's OSPF neighbour's route: unreachable %v %v", plan.LBs, lost, err)
	}
	if carries == 0 {
		t.Errorf("%s never reached %s after lb%d joined", first.Host, plan.Ports[0].Host, plan.LBs)
	}
	t.Logf("lb%d joined: its first port carried traffic %v after it was added, every route on every back-end (its OSPF neighbour's too) after %v",
		plan.LBs, carries.Round(time.Millisecond), converged.Round(time.Millisecond))
	checkLargeInventory(t, plan)
	if out, _ := largeSNMP("snmpget", oidIfTableLast); strings.Contains(out, "Timeticks: (0)") || !strings.Contains(out, "Timeticks") {
		t.Errorf("ifTableLastChange after lb%d joined: %s", plan.LBs, out)
	}
	if now := vcpPIDs(); fmt.Sprint(now) != fmt.Sprint(pids) || len(now) != len(demo.VCPs) {
		t.Errorf("the VCPs' processes were %v before lb%d joined, %v after: restarted", pids, plan.LBs, now)
	}
}

// logLargeUse logs each kind of process's resident memory and CPU share
// over 10 s of the converged, idle router (docs/scaling.md).
func logLargeUse(t *testing.T) {
	t.Helper()
	st, err := lab.ReadState(demo.LargeLab)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[int]string{}
	for _, p := range st.Processes {
		kinds[p.PID] = p.Name
	}
	// The VCPs' daemons: children of the VCP agents.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 {
			if ppid, _ := strconv.Atoi(f[1]); kinds[ppid] == "vcp" {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				kinds[pid] = "vcp's " + strings.TrimSpace(string(comm))
			}
		}
	}
	cpu := func(pid int) float64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return 0
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		return (u + s) / 100 // clock ticks
	}
	before := map[int]float64{}
	for pid := range kinds {
		before[pid] = cpu(pid)
	}
	const window = 10 * time.Second
	time.Sleep(window)
	type use struct {
		n          int
		rss, share []float64
	}
	byKind := map[string]*use{}
	for pid, kind := range kinds {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var kb float64
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				kb, _ = strconv.ParseFloat(strings.Fields(l)[1], 64)
			}
		}
		u := byKind[kind]
		if u == nil {
			u = &use{}
			byKind[kind] = u
		}
		u.n++
		u.rss = append(u.rss, kb/1024)
		u.share = append(u.share, 100*(cpu(pid)-before[pid])/window.Seconds())
	}
	var lines []string
	var total float64
	for kind, u := range byKind {
		sort.Float64s(u.rss)
		sort.Float64s(u.share)
		sum := 0.0
		for _, r := range u.rss {
			sum += r
		}
		total += sum
		lines = append(lines, fmt.Sprintf("  %-16s ×%-3d RSS %.0f-%.0f MB (%.0f MB in all), CPU %.1f-%.1f%% each", kind, u.n, u.rss[0], u.rss[len(u.rss)-1], sum, u.share[0], u.share[len(u.share)-1]))
	}
	sort.Strings(lines)
	t.Logf("the large lab's processes, converged and idle (CPU over %v):\n%s\n  in all %.0f MB", window, strings.Join(lines, "\n"), total)
}
