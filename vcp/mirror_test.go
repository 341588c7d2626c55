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

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/lb"
)

// A BGP peer outside (h1) opens TCP to the router's address on port 179:
// the LB's Virtual-CP module sends it, tagged, to the VCP, whose mirror of
// the port delivers it to a listener on the router's address; the answers
// (ARP for the peer included) go back out through the LB.
const mirrorLab = `name: t-mirror
hosts:
  h1:
    interfaces:
      eth0: {addresses: [192.0.2.10/24], xdp_pass: on, tx_checksum: off}
  lb1:
    interfaces:
      e0: {mac: "02:00:00:00:e0:00"}
      i0: {mac: "02:00:00:00:10:00", vlan_offload: off}
  vcp:
    interfaces:
      eth0: {mac: "02:00:00:00:cc:01", vlan_offload: off, tx_checksum: off}
switches:
  sw:
    interfaces:
      p0: {xdp_pass: on, vlan_offload: off}
      p1: {vlan_offload: off}
links:
  - ends: [h1:eth0, lb1:e0]
  - ends: [lb1:i0, sw:p0]
  - ends: [vcp:eth0, sw:p1]
`

func TestMirrorCarriesControlTraffic(t *testing.T) {
	labtest.Up(t, mirrorLab)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "key"), []byte(keyHex), 0o600)
	cfg := &FileConfig{Name: "t-mirror", KeyFile: filepath.Join(dir, "key"), Interface: "eth0",
		ExternalPorts: []ExternalPortConfig{{LB: "lb1", MAC: "02:00:00:00:e0:00", Address: netip.MustParsePrefix("192.0.2.1/24"), VLAN: 10}}}
	if err := cfg.complete(); err != nil {
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
	accepted := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
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

	out, err := exec.Command("nsenter", "--net="+netns.Path(lab.Namespace("t-mirror", "h1")), "--",
		"timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.1/179 && timeout 3 head -1 <&3").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "OPEN" {
		t.Fatalf("TCP to the router's BGP port from outside: %v %q\nmirrors %v\nLB %+v\n%+v", err, out, v.mirrors.Counters(), l.Status().Ports[0].Stats, l.Status().Ports[1].Stats)
	}
	select {
	case from := <-accepted:
		if !strings.HasPrefix(from, "192.0.2.10:") {
			t.Errorf("accepted from %s, want the peer 192.0.2.10", from)
		}
	case <-time.After(time.Second):
		t.Error("the listener accepted nothing")
	}
	c := v.mirrors.Counters()
	if c["inward"] == 0 || c["outward"] == 0 {
		t.Errorf("mirror counters %v", c)
	}
	if vcp := l.Status().Ports[0].Stats.Modules["vcp"]; vcp == 0 {
		t.Errorf("the LB's Virtual-CP module counted nothing")
	}
}
