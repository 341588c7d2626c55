package vcp

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist/disttest"
	elementcfg "github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/msrtest"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/lb"
)

// A BGP peer outside (h1) opens TCP to the router's address on port 179:
// the LB's Virtual-CP module sends it, tagged, to the VCP, whose mirror of
// the port delivers it to a listener on the router's address; the answers
// (ARP for the peer included) go back out through the LB.
var mirrorLab = msrtest.Testdata("t-mirror.yaml")

func TestMirrorCarriesControlTraffic(t *testing.T) {
	labtest.Up(t, mirrorLab)
	dir := t.TempDir()
	disttest.Keys(t, dir, keyHex)
	file := &FileConfig{Config: elementcfg.Config{Name: "t-mirror", KeyFile: filepath.Join(dir, "key")}, Interface: "eth0",
		ExternalPorts: []ExternalPortConfig{{LB: "lb1", MAC: "02:00:00:00:e0:00", Address: netip.MustParsePrefix("192.0.2.1/24"), VLAN: 10}}}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	var v *Agent
	var ln net.Listener
	if err := netns.Do(lab.Namespace("t-mirror", "vcp"), func() (err error) {
		if v, err = NewAgent(cfg, quiet()); err != nil {
			return err
		}
		// The routing suite's place: a listener on the port's address.
		ln, err = net.Listen("tcp4", "192.0.2.1:179")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stopVCP := run(v.Run)
	defer func() { stopVCP(); v.Close() }()
	accepted := make(chan string, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Write([]byte("OPEN\n"))
			c.Close()
		}
	}()

	os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte("name: lb1\nkey_file: "+filepath.Join(dir, "key")+
		"\npin_dir: "+filepath.Join(netns.BPFFS, "msr-test-mirror-lb1")+"\nsocket: "+filepath.Join(dir, "lb.sock")+
		"\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, default: true}\n"), 0o644)
	lcfg, err := lb.LoadConfig(filepath.Join(dir, "lb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var l *lb.Agent
	if err := netns.Do(lab.Namespace("t-mirror", "lb1"), func() (err error) {
		l, err = lb.NewAgent(lcfg, quiet())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stopLB := run(l.Run)
	defer func() { stopLB(); l.Remove() }()
	for deadline := time.Now().Add(3 * time.Second); l.Status().VCPMAC == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the LB never heard the VCP")
		}
	}

	connect := func(when string) {
		t.Helper()
		out, err := exec.Command("nsenter", "--net="+netns.Path(lab.Namespace("t-mirror", "h1")), "--",
			"timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.1/179 && timeout 3 head -1 <&3").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "OPEN" {
			t.Fatalf("%s: TCP to the router's BGP port from outside: %v %q\nmirrors %v\nLB %+v\n%+v", when, err, out, v.mirrors.Counters(), l.Status().Ports[0].Stats, l.Status().Ports[1].Stats)
		}
		select {
		case from := <-accepted:
			if !strings.HasPrefix(from, "192.0.2.10:") {
				t.Errorf("%s: accepted from %s, want the peer 192.0.2.10", when, from)
			}
		case <-time.After(time.Second):
			t.Errorf("%s: the listener accepted nothing", when)
		}
	}
	connect("first")
	// The port down and up again (its mirror with it, as when an LB's
	// link flaps): the bridge carries the suite's traffic again.
	for _, up := range []bool{false, true} {
		if err := netns.Do(lab.Namespace("t-mirror", "vcp"), func() error { _, err := v.mirrors.SetUp(10, up); return err }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	connect("after the mirror went down and up")
	// The port taken away and given again while the VCP runs, as a reload
	// does when an LB leaves and joins: without its mirror nothing reaches
	// the listener; the new mirror carries it again.
	vcpDo := func(f func() error) {
		t.Helper()
		if err := netns.Do(lab.Namespace("t-mirror", "vcp"), f); err != nil {
			t.Fatal(err)
		}
	}
	vcpDo(func() error { return v.mirrors.Remove(10) })
	if out, err := exec.Command("nsenter", "--net="+netns.Path(lab.Namespace("t-mirror", "h1")), "--",
		"timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.1/179 && timeout 1 head -1 <&3").CombinedOutput(); err == nil {
		t.Errorf("with the mirror removed, TCP to the router's BGP port still answered %q", out)
	}
	vcpDo(func() error { return v.mirrors.Add(cfg.ExternalPorts[0]) })
	if err := v.mirrors.Add(cfg.ExternalPorts[0]); err == nil {
		t.Error("a second mirror of VLAN 10 was made")
	}
	connect("after the mirror was removed and added again")
	c := v.mirrors.Counters()
	if c["inward"] == 0 || c["outward"] == 0 {
		t.Errorf("mirror counters %v", c)
	}
	if vcp := l.Status().Ports[0].Stats.Modules["vcp"]; vcp == 0 {
		t.Errorf("the LB's Virtual-CP module counted nothing")
	}
}

// TestBGPThroughMirror: an FRR BGP peer outside the router (h1) forms a
// session with the VCP's BIRD on the router's address, through the LB and
// the mirror, and its routes arrive in BIRD.
func TestBGPThroughMirror(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "bgpd.conf"), []byte(`frr defaults traditional
hostname bgp1
router bgp 65010
 bgp router-id 192.0.2.10
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 192.0.2.1 remote-as 65000
 neighbor 192.0.2.1 ttl-security hops 1
 address-family ipv4 unicast
  network 203.0.113.0/24
  network 198.18.0.0/15
 exit-address-family
`), 0o644)
	labText := strings.Replace(mirrorLab, "      eth0: {addresses: [192.0.2.10/24], xdp_pass: on, tx_checksum: off}\n",
		"      eth0: {addresses: [192.0.2.10/24], xdp_pass: on, tx_checksum: off}\n    processes:\n      - {name: bgpd, command: [/usr/lib/frr/bgpd, -f, "+
			dir+"/bgpd.conf, -Z, -S, -i, "+dir+"/bgpd.pid, --vty_socket, "+dir+", -P, \"0\", --log, stdout]}\n", 1)
	labtest.Up(t, labText)
	disttest.Keys(t, dir, keyHex)
	file := &FileConfig{Config: elementcfg.Config{Name: "t-bgp", KeyFile: filepath.Join(dir, "key")}, Interface: "eth0",
		ExternalPorts: []ExternalPortConfig{{LB: "lb1", MAC: "02:00:00:00:e0:00", Address: netip.MustParsePrefix("192.0.2.1/24"), VLAN: 10}},
		Routing: &RoutingConfig{ASN: 65000, BGP: []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010,
			// Documentation and benchmarking space: martians, but for the list.
			ImportPrefixes: []PrefixPattern{mustPattern("203.0.113.0/24"), mustPattern("198.18.0.0/15")}}}, RunDir: filepath.Join(dir, "vcp")}}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	var v *Agent
	if err := netns.Do(lab.Namespace("t-mirror", "vcp"), func() (err error) {
		v, err = NewAgent(cfg, quiet())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stopVCP := run(v.Run)
	defer func() { stopVCP(); v.Close() }()

	os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte("name: lb1\nkey_file: "+filepath.Join(dir, "key")+
		"\npin_dir: "+filepath.Join(netns.BPFFS, "msr-test-bgp-lb1")+"\nsocket: "+filepath.Join(dir, "lb.sock")+
		"\nports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, default: true}\n"), 0o644)
	lcfg, err := lb.LoadConfig(filepath.Join(dir, "lb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var l *lb.Agent
	if err := netns.Do(lab.Namespace("t-mirror", "lb1"), func() (err error) {
		l, err = lb.NewAgent(lcfg, quiet())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stopLB := run(l.Run)
	defer func() { stopLB(); l.Remove() }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := v.suite.(*BIRD).Query("show route protocol peer0")
		if strings.Contains(out, "203.0.113.0/24") && strings.Contains(out, "198.18.0.0/15") {
			break
		}
		if time.Now().After(deadline) {
			protos, _ := v.suite.(*BIRD).Query("show protocols all peer0")
			log, _ := os.ReadFile(filepath.Join(dir, "vcp", "bird.log"))
			t.Fatalf("BGP routes never arrived in the VCP's BIRD:\n%s\n%s\nbird log:\n%s\nmirrors %v", out, protos, log, v.mirrors.Counters())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := v.Status(); st.Suite == nil || !strings.Contains(st.Suite.Protocols, "Established") {
		t.Errorf("status does not show the session: %+v", st.Suite)
	}
}
