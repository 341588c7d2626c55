package lb

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/perf"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
)

// The fixture LB has two external ports (e0: VLAN 10, e1: VLAN 11), two
// internal ports (i0, the default, and i1) and one port of unknown role
// (u0), all veths of one lab host. The XDP test run resolves the ingress
// ifindex, so the ports must exist; it never transmits.
var fixtureLab = msrtest.Testdata("t-lbfix.yaml")

type fixture struct {
	dp    *Dataplane
	model *Model
	ports map[string]Port
}

// withFixture builds the lab, loads the data path and its model with the
// same state, and runs fn inside the LB's namespace on one pinned CPU (the
// WRR counter is per CPU).
func withFixture(t *testing.T, mode Mode, fn func(f *fixture)) {
	t.Helper()
	spec, _ := labtest.Up(t, fixtureLab)
	err := netns.Do(lab.Namespace(spec.Name, "lb"), func() error {
		var set unix.CPUSet
		set.Set(runtime.NumCPU() - 1)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return err
		}
		f, err := newFixture(mode)
		if err != nil {
			return err
		}
		defer f.dp.Close()
		fn(f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func newFixture(mode Mode) (*fixture, error) {
	dp, err := LoadDataplane("", false)
	if err != nil {
		return nil, err
	}
	f := &fixture{dp: dp, ports: map[string]Port{}}
	roles := []struct {
		name string
		role uint8
		vlan uint16
		addr netip.Addr
		v6   netip.Addr
	}{{"e0", RoleExternal, 10, ipExt0, ip6Ext0}, {"e1", RoleExternal, 11, ipExt1, ip6Ext1}, {"i0", RoleInternal, 0, netip.Addr{}, netip.Addr{}},
		{"i1", RoleInternal, 0, netip.Addr{}, netip.Addr{}}, {"u0", RoleUnknown, 0, netip.Addr{}, netip.Addr{}}}
	m := &Model{Ports: map[int]Port{}, RouterAddrs: map[netip.Addr]uint32{}}
	for i, r := range roles {
		ifi, err := net.InterfaceByName(r.name)
		if err != nil {
			return nil, err
		}
		p := Port{Ifindex: ifi.Index, Index: uint8(i), Role: r.role, MAC: ifi.HardwareAddr, VLAN: r.vlan, Addr: r.addr, Addr6: r.v6}
		if err := dp.SetPort(p); err != nil {
			return nil, err
		}
		f.ports[r.name] = p
		m.Ports[p.Ifindex] = p
	}
	for a, fl := range map[netip.Addr]uint32{ipExt0: AddrRouter, ipExt1: AddrRouter, ipMgmt: AddrMgmt, ip6Ext0: AddrRouter, ip6Ext1: AddrRouter,
		ll6Ext0: AddrRouter, inet.LinkLocal(macExt1): AddrRouter} {
		if err := dp.SetRouterAddr(a, fl); err != nil {
			return nil, err
		}
		m.RouterAddrs[a] = fl
	}
	m.Infra = []netip.Prefix{infraNet, infraNet6}
	if err := dp.SetInfra(m.Infra); err != nil {
		return nil, err
	}
	m.Config = Config{VCPMAC: macVCP, DefaultIntIfindex: f.ports["i0"].Ifindex, ManagementAddr: ipMgmt}
	if err := dp.SetConfig(m.Config); err != nil {
		return nil, err
	}
	// The policing hash's key: the data path drew its own.
	if m.Config.PoliceSeed, err = dp.PoliceSeed(); err != nil || m.Config.PoliceSeed == 0 {
		return nil, fmt.Errorf("the data path's policing seed %d: %v", m.Config.PoliceSeed, err)
	}
	var bs []Backend
	for i, mac := range macR {
		for _, pn := range []string{"i0", "i1"} {
			bs = append(bs, Backend{MAC: mac, Ifindex: f.ports[pn].Ifindex, PortIndex: f.ports[pn].Index, Weight: uint16(1 + i%2)})
		}
	}
	t, err := BuildTable(mode, bs)
	if err != nil {
		return nil, err
	}
	if err := dp.InstallTable(t); err != nil {
		return nil, err
	}
	m.Table = *t
	// The model's round robin starts where this CPU's does (seeded at
	// random at load).
	if m.RR, err = dp.roundRobin(runtime.NumCPU() - 1); err != nil {
		return nil, err
	}
	f.model = m
	return f, nil
}

// run processes a frame in the kernel and returns the verdict and the
// frame as it left.
func (f *fixture) run(ifindex int, frame []byte) (int, []byte, error) {
	return f.dp.Run(ifindex, frame)
}

// stats reads every port's counters from the kernel, in the model's shape.
func (f *fixture) stats() ([MaxPorts]ModelStats, error) {
	var all [MaxPorts]ModelStats
	for i := range all {
		var per []lbxdpLbPortStats
		if err := f.dp.objs.LbStats.Lookup(uint32(i), &per); err != nil {
			return all, err
		}
		for _, c := range per {
			s := &all[i]
			s.RxPackets += c.RxPackets
			s.RxBytes += c.RxBytes
			s.TxPackets += c.TxPackets
			s.TxBytes += c.TxBytes
			for j := range s.Module {
				s.Module[j] += c.Module[j]
			}
			for j := range s.Drop {
				s.Drop[j] += c.Drop[j]
			}
		}
	}
	return all, nil
}

// compare runs frame through kernel and model and reports any difference
// in verdict, output bytes, or (when checkCounters) any counter.
func (f *fixture) compare(ifindex int, frame []byte, checkCounters bool) (Result, error) {
	want := f.model.Process(ifindex, frame)
	ret, out, err := f.run(ifindex, frame)
	if err != nil {
		return want, err
	}
	if ret != want.Verdict {
		return want, fmt.Errorf("verdict %d, model %d", ret, want.Verdict)
	}
	if want.Verdict != XDPDrop && !bytes.Equal(out, want.Out) {
		return want, fmt.Errorf("output\n got %x\nwant %x", out, want.Out)
	}
	if checkCounters {
		got, err := f.stats()
		if err != nil {
			return want, err
		}
		if got != f.model.Stats {
			for i := range got {
				if got[i] != f.model.Stats[i] {
					return want, fmt.Errorf("port %d counters\n got %+v\nwant %+v", i, got[i], f.model.Stats[i])
				}
			}
		}
	}
	return want, nil
}

type fixtureCase struct {
	name    string
	in      string // ingress port
	frame   []byte
	verdict int
	out     string // egress port, for TX and REDIRECT
	module  string // counted module, or
	drop    string // counted drop reason
	check   func(t *testing.T, out []byte)
}

func fixtureCases() []fixtureCase {
	return slices.Concat(externalCases(), insideCases(), externalCases6(), internalCases())
}

// externalCases are Table 1 from an external port.
func externalCases() []fixtureCase {
	return []fixtureCase{
		// Table 1, from an external port.
		{name: "ARP request for the port's address", in: "e0", frame: eth(bcastMAC, macHost, etherTypeARP, arp(1, macHost, ipHostA, make(net.HardwareAddr, 6), ipExt0)),
			verdict: XDPTx, out: "e0", module: "ext_arp", check: func(t *testing.T, out []byte) {
				want := eth(macHost, macExt0, etherTypeARP, arp(2, macExt0, ipExt0, macHost, ipHostA))
				if !bytes.Equal(out[:len(want)], want) {
					t.Errorf("reply\n got %x\nwant %x", out[:len(want)], want)
				}
			}},
		{name: "ARP request for another port's address", in: "e0", frame: eth(bcastMAC, macHost, etherTypeARP, arp(1, macHost, ipHostA, make(net.HardwareAddr, 6), ipExt1)),
			verdict: XDPDrop, drop: "arp_not_ours"},
		{name: "ARP reply from outside", in: "e1", frame: eth(macExt1, macHost, etherTypeARP, arp(2, macHost, ipHostB, macExt1, ipExt1)),
			verdict: XDPRedirect, out: "i0", module: "int_arp_in", check: func(t *testing.T, out []byte) {
				want := tagged(bcastMAC, macHost, 11, etherTypeARP, arp(2, macHost, ipHostB, macExt1, ipExt1))
				if !bytes.Equal(out[:len(want)], want) {
					t.Errorf("to back-ends\n got %x\nwant %x", out[:len(want)], want)
				}
			}},
		{name: "ARP with another op", in: "e0", frame: eth(bcastMAC, macHost, etherTypeARP, arp(3, macHost, ipHostA, macHost, ipExt0)), verdict: XDPDrop, drop: "bad_arp"},
		{name: "BGP to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipExt0, 40000, 179)),
			verdict: XDPRedirect, out: "i0", module: "vcp", check: func(t *testing.T, out []byte) {
				want := tagged(macVCP, macHost, 10, etherTypeIPv4, tcp(ipHostA, ipExt0, 40000, 179))
				if !bytes.Equal(out[:len(want)], want) {
					t.Errorf("to VCP\n got %x\nwant %x", out[:len(want)], want)
				}
			}},
		{name: "BGP reply from the peer (source port 179)", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipExt0, 179, 40000)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "BGP between two other hosts is data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipHostB, 40000, 179)), verdict: XDPRedirect, module: "balance"},
		{name: "OSPF hello to AllSPFRouters", in: "e1", frame: eth(ospfMAC, macHost, etherTypeIPv4, inet.IPv4(ipHostB, netip.MustParseAddr("224.0.0.5"), 89, make([]byte, 44))), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "RIP to its group", in: "e1", frame: eth(netAddrMAC(9), macHost, etherTypeIPv4, udp(ipHostB, netip.MustParseAddr("224.0.0.9"), 520, 520)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "SNMP to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipExt0, 5555, 161)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "BFD to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, withTTL(udp(ipHostA, ipExt0, 49152, 3784), 255)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "single-hop BFD from beyond the segment (TTL 64)", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipExt0, 49152, 3784)), verdict: XDPDrop, drop: "gtsm"},
		{name: "single-hop BFD over IPv6 at hop limit 254", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, withTTL(udp6(ip6HostA, ip6Ext0, 49152, 3784), 254)), verdict: XDPDrop, drop: "gtsm"},
		{name: "multi-hop BFD at TTL 64", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipExt0, 49152, 4784)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "BFD between two other hosts is data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 49152, 3784)), verdict: XDPRedirect, module: "balance"},
		{name: "anything to the management address", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipMgmt, 5555, 22)), verdict: XDPRedirect, out: "i0", module: "vcp"},
	}
}

// insideCases are the router's inside from outside, and the rest of
// IPv4 from an external port.
func insideCases() []fixtureCase {
	dataA := udp(ipHostA, ipHostB, 4000, 5000)
	return []fixtureCase{
		// The router's inside: neither reached nor claimed from outside,
		// whatever the protocol; the management address in it is the
		// router's own, and Table 1 takes it (above).
		{name: "SYN to an element's API on the inside", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipInfra, 40001, 8180)), verdict: XDPDrop, drop: "infra"},
		{name: "BGP to an inside address", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipInfra, 40001, 179)), verdict: XDPDrop, drop: "infra"},
		{name: "a source on the inside, from outside", in: "e1", frame: eth(macExt1, macHost, etherTypeIPv4, udp(ipInfra, ipHostA, 4000, 5000)), verdict: XDPDrop, drop: "infra"},
		{name: "a source on the inside, to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, tcp(ipInfra, ipExt0, 40000, 179)), verdict: XDPDrop, drop: "infra"},
		{name: "IPv6 to an inside address", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, udp6(ip6HostA, ip6Infra, 4000, 161)), verdict: XDPDrop, drop: "infra"},
		{name: "IPv6 from an inside source", in: "e1", frame: eth(macExt1, macHost, etherTypeIPv6, tcp6(ip6Infra, ip6HostB, 4000, 80)), verdict: XDPDrop, drop: "infra"},
		{name: "ICMP echo to the router is data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, inet.IPv4(ipHostA, ipExt0, 1, make([]byte, 16))), verdict: XDPRedirect, module: "balance"},
		{name: "data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, dataA), verdict: XDPRedirect, module: "balance", check: func(t *testing.T, out []byte) {
			if !bytes.Equal(out[14:14+len(dataA)], dataA) || !bytes.Equal(out[6:12], macHost) {
				t.Error("balance changed more than the destination MAC")
			}
			found := false
			for _, m := range macR {
				found = found || bytes.Equal(out[0:6], m)
			}
			if !found {
				t.Errorf("destination %x is no back-end", out[0:6])
			}
		}},
		{name: "data for another MAC", in: "e0", frame: eth(macHost, macR[0], etherTypeIPv4, dataA), verdict: XDPDrop, drop: "not_ours"},
		{name: "broadcast data", in: "e0", frame: eth(bcastMAC, macHost, etherTypeIPv4, udp(ipHostA, netip.MustParseAddr("255.255.255.255"), 68, 67)), verdict: XDPDrop, drop: "mcast_external"},
		{name: "multicast data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, netip.MustParseAddr("239.1.1.1"), 1, 2)), verdict: XDPDrop, drop: "mcast_external"},
		{name: "DIST from outside", in: "e0", frame: eth(macExt0, macHost, etherTypeDIST, make([]byte, 80)), verdict: XDPDrop, drop: "dist_external"},
		{name: "tagged frame from outside", in: "e0", frame: tagged(macExt0, macHost, 10, etherTypeIPv4, dataA), verdict: XDPDrop, drop: "tagged_external"},
		{name: "another EtherType (no rule)", in: "e0", frame: eth(macExt0, macHost, 0x88cc, make([]byte, 60)), verdict: XDPDrop, drop: "no_rule"},
	}
}

// externalCases6 are Table 1 for IPv6 from an external port.
func externalCases6() []fixtureCase {
	return []fixtureCase{
		// Table 1 for IPv6 (bpf/lb.bpf.c classify_ipv6), from outside.
		{name: "NS for the port's address", in: "e0", frame: eth(netAddr6MAC(ip6Ext0), macHost, etherTypeIPv6, ns(ip6HostA, macHost, ip6Ext0, netip.Addr{})),
			verdict: XDPTx, out: "e0", module: "ext_ndp", check: func(t *testing.T, out []byte) {
				want := eth(macHost, macExt0, etherTypeIPv6, icmp6(ip6Ext0, ip6HostA, 255, 136, append(append([]byte{0xe0, 0, 0, 0}, ip6Ext0.AsSlice()...), 2, 1, 2, 0, 0, 0, 0xe0, 0)))
				if !bytes.Equal(out, want) {
					t.Errorf("NA\n got %x\nwant %x", out, want)
				}
			}},
		{name: "NS for the port's link-local address, no option (grown)", in: "e0", frame: eth(netAddr6MAC(ll6Ext0), macHost, etherTypeIPv6, ns(ll6Host, nil, ll6Ext0, netip.Addr{})),
			verdict: XDPTx, out: "e0", module: "ext_ndp", check: func(t *testing.T, out []byte) {
				if len(out) != 86 || netip.AddrFrom16([16]byte(out[22:38])) != ll6Ext0 || inet.PseudoChecksum6(ll6Ext0, ll6Host, 58, out[54:]) != 0 {
					t.Errorf("NA %x", out)
				}
			}},
		{name: "NS padded to 100 bytes (cut)", in: "e0", frame: append(eth(macExt0, macHost, etherTypeIPv6, ns(ip6HostA, macHost, ip6Ext0, ip6Ext0)), make([]byte, 14)...),
			verdict: XDPTx, out: "e0", module: "ext_ndp", check: func(t *testing.T, out []byte) {
				if len(out) != 86 {
					t.Errorf("NA of %d bytes", len(out))
				}
			}},
		{name: "DAD NS for the port's address", in: "e0", frame: eth(netAddr6MAC(ip6Ext0), macHost, etherTypeIPv6, ns(netip.IPv6Unspecified(), nil, ip6Ext0, netip.Addr{})),
			verdict: XDPTx, out: "e0", module: "ext_ndp", check: func(t *testing.T, out []byte) {
				allNodes := netip.MustParseAddr("ff02::1")
				if !bytes.Equal(out[0:6], []byte{0x33, 0x33, 0, 0, 0, 1}) || netip.AddrFrom16([16]byte(out[38:54])) != allNodes || out[58] != 0xa0 ||
					inet.PseudoChecksum6(ip6Ext0, allNodes, 58, out[54:]) != 0 {
					t.Errorf("unsolicited NA %x", out)
				}
			}},
		{name: "NS for another port's address", in: "e0", frame: eth(netAddr6MAC(ip6Ext1), macHost, etherTypeIPv6, ns(ip6HostA, macHost, ip6Ext1, netip.Addr{})), verdict: XDPDrop, drop: "ndp_not_ours"},
		{name: "NS that crossed a router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, func() []byte { b := ns(ip6HostA, macHost, ip6Ext0, ip6Ext0); b[7] = 64; return b }()), verdict: XDPDrop, drop: "bad_ndp"},
		{name: "NS cut short", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, func() []byte { b := ns(ip6HostA, nil, ip6Ext0, ip6Ext0)[:50]; b[5] = 10; return b }()), verdict: XDPDrop, drop: "bad_ndp"},
		{name: "NA from outside", in: "e1", frame: eth(macExt1, macHost, etherTypeIPv6, na(ip6HostB, ip6Ext1, ip6HostB, macHost)),
			verdict: XDPRedirect, out: "i0", module: "int_ndp_in", check: func(t *testing.T, out []byte) {
				want := tagged(bcastMAC, macHost, 11, etherTypeIPv6, na(ip6HostB, ip6Ext1, ip6HostB, macHost))
				if !bytes.Equal(out, want) {
					t.Errorf("to back-ends\n got %x\nwant %x", out, want)
				}
			}},
		{name: "router solicitation", in: "e0", frame: eth(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}, macHost, etherTypeIPv6, icmp6(ll6Host, netip.MustParseAddr("ff02::2"), 255, 133, make([]byte, 4))),
			verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "BGP over IPv6 to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, tcp6(ip6HostA, ip6Ext0, 40000, 179)),
			verdict: XDPRedirect, out: "i0", module: "vcp", check: func(t *testing.T, out []byte) {
				want := tagged(macVCP, macHost, 10, etherTypeIPv6, tcp6(ip6HostA, ip6Ext0, 40000, 179))
				if !bytes.Equal(out, want) {
					t.Errorf("to VCP\n got %x\nwant %x", out, want)
				}
			}},
		{name: "BGP over IPv6 to the port's link-local address", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, tcp6(ll6Host, ll6Ext0, 179, 40000)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "BGP over IPv6 between two other hosts is data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, tcp6(ip6HostA, ip6HostB, 40000, 179)), verdict: XDPRedirect, module: "balance"},
		{name: "OSPFv3 hello to AllSPFRouters", in: "e1", frame: eth(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 5}, macHost, etherTypeIPv6, inet.IPv6(ll6Host, netip.MustParseAddr("ff02::5"), 89, make([]byte, 36))), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "RIPng to its group", in: "e1", frame: eth(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 9}, macHost, etherTypeIPv6, udp6(ll6Host, netip.MustParseAddr("ff02::9"), 521, 521)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "ICMPv6 echo to the router goes to the VCP", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, icmp6(ip6HostA, ip6Ext0, 64, 128, make([]byte, 12))), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "SNMP over IPv6 to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, udp6(ip6HostA, ip6Ext0, 5555, 161)), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "IPv6 data", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, udp6(ip6HostA, ip6HostB, 4000, 5000)), verdict: XDPRedirect, module: "balance", check: func(t *testing.T, out []byte) {
			if want := udp6(ip6HostA, ip6HostB, 4000, 5000); !bytes.Equal(out[14:], want) || !bytes.Equal(out[6:12], macHost) {
				t.Error("balance changed more than the destination MAC")
			}
		}},
		{name: "IPv6 data behind 3 extension headers", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, withExtensions(udp6(ip6HostA, ip6HostB, 4000, 5000), 0, 60, 43)), verdict: XDPRedirect, module: "balance"},
		{name: "IPv6 to the router behind a chain longer than the walk is balanced", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, withExtensions(tcp6(ip6HostA, ip6Ext0, 40000, 179), 60, 60, 60, 60, 60, 60, 60)), verdict: XDPRedirect, module: "balance"},
		{name: "the first fragment of a BGP segment to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, func() []byte { b := tcp(ipHostA, ipExt0, 40000, 179); b[6] = 0x20; return b }()), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "a later fragment to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, func() []byte { b := tcp(ipHostA, ipExt0, 40000, 179); b[7] = 0x10; return b }()), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "an IPv6 fragment to the router", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, func() []byte { b := withExtensions(udp6(ip6HostA, ip6Ext0, 1, 3784), 44); b[43] = 1; return b }()), verdict: XDPRedirect, out: "i0", module: "vcp"},
		{name: "IPv6 fragment", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, func() []byte { b := withExtensions(udp6(ip6HostA, ip6HostB, 1, 2), 44); b[43] = 1; return b }()), verdict: XDPRedirect, module: "balance"},
		{name: "IPv6 extension chain past the packet", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, func() []byte { b := withExtensions(udp6(ip6HostA, ip6HostB, 1, 2), 0, 60); b[41] = 10; return b }()), verdict: XDPDrop, drop: "bad_ip"},
		{name: "IPv6 longer than the frame", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, udp6(ip6HostA, ip6HostB, 1, 2))[:60], verdict: XDPDrop, drop: "bad_ip"},
		{name: "IPv6 multicast data", in: "e0", frame: eth(net.HardwareAddr{0x33, 0x33, 0, 0, 1, 1}, macHost, etherTypeIPv6, udp6(ip6HostA, netip.MustParseAddr("ff0e::101"), 1, 2)), verdict: XDPDrop, drop: "mcast_external"},
		{name: "truncated IPv6", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv6, make([]byte, 30)), verdict: XDPDrop, drop: "runt"},
		{name: "IPv4 with a bad IHL", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, func() []byte { b := udp(ipHostA, ipHostB, 1, 2); b[0] = 0x44; return b }()), verdict: XDPDrop, drop: "bad_ip"},
		{name: "IPv4 longer than the frame", in: "e0", frame: eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 1, 2))[:40], verdict: XDPDrop, drop: "bad_ip"},
		{name: "truncated ARP", in: "e0", frame: eth(bcastMAC, macHost, etherTypeARP, make([]byte, 10)), verdict: XDPDrop, drop: "runt"},
	}
}

// internalCases are from an internal port and a port of unknown role.
func internalCases() []fixtureCase {
	dataA := udp(ipHostA, ipHostB, 4000, 5000)
	return []fixtureCase{
		// From an internal port.
		{name: "DIST from inside, to the agent", in: "i0", frame: eth(macInt0, macR[0], etherTypeDIST, make([]byte, 80)), verdict: XDPPass, module: "dist"},
		{name: "back-end ARP request", in: "i1", frame: tagged(bcastMAC, macR[1], 11, etherTypeARP, arp(1, macR[1], ipExt1, make(net.HardwareAddr, 6), ipHostB)),
			verdict: XDPRedirect, out: "e1", module: "int_arp_out", check: func(t *testing.T, out []byte) {
				want := eth(bcastMAC, macExt1, etherTypeARP, arp(1, macExt1, ipExt1, make(net.HardwareAddr, 6), ipHostB))
				if !bytes.Equal(out[:len(want)], want) {
					t.Errorf("ARP out\n got %x\nwant %x", out[:len(want)], want)
				}
			}},
		{name: "back-end NS for a next hop", in: "i1", frame: tagged(netAddr6MAC(ip6HostB), macR[1], 11, etherTypeIPv6, ns(ip6Ext1, macR[1], ip6HostB, netip.Addr{})),
			verdict: XDPRedirect, out: "e1", module: "int_ndp_out", check: func(t *testing.T, out []byte) {
				want := eth(netAddr6MAC(ip6HostB), macExt1, etherTypeIPv6, ns(ip6Ext1, macExt1, ip6HostB, netip.Addr{}))
				if !bytes.Equal(out, want) {
					t.Errorf("NS out\n got %x\nwant %x", out, want)
				}
			}},
		{name: "routed packet out of its VLAN's port", in: "i0", frame: tagged(macHost, macR[2], 10, etherTypeIPv4, dataA),
			verdict: XDPRedirect, out: "e0", module: "int_to_ext", check: func(t *testing.T, out []byte) {
				want := eth(macHost, macExt0, etherTypeIPv4, dataA)
				if !bytes.Equal(out[:len(want)], want) {
					t.Errorf("int to ext\n got %x\nwant %x", out[:len(want)], want)
				}
			}},
		{name: "broadcast from inside goes out its VLAN's port", in: "i1", frame: tagged(bcastMAC, macVCP, 11, etherTypeIPv4, udp(ipExt1, netip.MustParseAddr("224.0.0.9"), 520, 520)), verdict: XDPRedirect, out: "e1", module: "int_to_ext"},
		{name: "VLAN of another LB", in: "i0", frame: tagged(macHost, macR[0], 12, etherTypeIPv4, dataA), verdict: XDPDrop, drop: "vlan_not_ours"},
		{name: "VLAN in VLAN", in: "i0", frame: tagged(macHost, macR[0], 10, etherTypeQ, append([]byte{0, 10, 8, 0}, dataA...)), verdict: XDPDrop, drop: "vlan_in_vlan"},
		{name: "untagged from inside", in: "i0", frame: eth(macHost, macR[0], etherTypeIPv4, dataA), verdict: XDPDrop, drop: "untagged_internal"},
		{name: "own source MAC from inside", in: "i1", frame: tagged(bcastMAC, macInt0, 11, etherTypeARP, arp(2, macHost, ipHostB, macExt1, ipExt1)), verdict: XDPDrop, drop: "own_frame"},
		// A port of unknown role.
		{name: "DIST on an unknown port (sensing)", in: "u0", frame: eth(macUnk, macR[0], etherTypeDIST, make([]byte, 80)), verdict: XDPPass, module: "dist"},
		{name: "data on an unknown port", in: "u0", frame: eth(macUnk, macHost, etherTypeIPv4, dataA), verdict: XDPDrop, drop: "port_unknown"},
	}
}

// netAddr6MAC is the Ethernet address of a's solicited-node group.
func netAddr6MAC(a netip.Addr) net.HardwareAddr { _, mac := inet.SolicitedNode(a); return mac }

// netAddrMAC is the Ethernet address of IPv4 group 224.0.0.n (RFC 1112).
func netAddrMAC(n byte) net.HardwareAddr { return net.HardwareAddr{1, 0, 0x5e, 0, 0, n} }

// Every LB's round robin starts at its own random slot on every CPU (not
// at 0, where the LBs' first flowlets would all pick the same back-ends).
func TestLBRoundRobinSeeded(t *testing.T) {
	starts := map[uint32]bool{}
	for range 2 {
		dp, err := LoadDataplane("", false)
		if err != nil {
			t.Fatal(err)
		}
		for cpu := range runtime.NumCPU() {
			rr, err := dp.roundRobin(cpu)
			if err != nil {
				t.Fatal(err)
			}
			starts[rr] = true
		}
		dp.Close()
	}
	if len(starts) < 2*runtime.NumCPU() {
		t.Errorf("two LBs' %d CPUs start their round robins at %d distinct slots, want %d", runtime.NumCPU(), len(starts), 2*runtime.NumCPU())
	}
}

// TestLBFixtures runs Table 1 row by row, every module and drop reason,
// checking verdict, egress port, counter and output frame, in the kernel
// and in the model.
func TestLBFixtures(t *testing.T) {
	withFixture(t, ModeWRR, func(f *fixture) {
		seenMod, seenDrop := map[string]bool{}, map[string]bool{}
		for _, c := range fixtureCases() {
			before, _ := f.stats()
			want, err := f.compare(f.ports[c.in].Ifindex, c.frame, true)
			if err != nil {
				t.Errorf("%s: kernel and model differ: %v\nframe %x", c.name, err, c.frame)
				continue
			}
			if want.Verdict != c.verdict {
				t.Errorf("%s: verdict %d, want %d\nframe %x", c.name, want.Verdict, c.verdict, c.frame)
				continue
			}
			after, _ := f.stats()
			in := f.ports[c.in].Index
			if c.module != "" {
				seenMod[c.module] = true
				if d := moduleDelta(before, after, in, c.module); d != 1 {
					t.Errorf("%s: module %s counted %d", c.name, c.module, d)
				}
			}
			if c.drop != "" {
				seenDrop[c.drop] = true
				if d := dropDelta(before, after, in, c.drop); d != 1 {
					t.Errorf("%s: drop %s counted %d", c.name, c.drop, d)
				}
			}
			if c.out != "" {
				o := f.ports[c.out].Index
				if after[o].TxPackets-before[o].TxPackets != 1 {
					t.Errorf("%s: did not leave by %s", c.name, c.out)
				}
			}
			if c.check != nil {
				c.check(t, want.Out)
			}
		}
		for _, m := range ModuleNames {
			if !seenMod[m] {
				t.Errorf("no fixture for module %s", m)
			}
		}
		// The drops of missing state, of caps and of policing have tests
		// of their own (TestLBDropsWithoutState, TestLBCaps, TestLBPolicing).
		for _, d := range DropNames {
			if !seenDrop[d] && d != "no_backend" && d != "no_vcp" && d != "no_internal" && d != "cap" && d != "port_cap" && d != "policed" {
				t.Errorf("no fixture for drop %s", d)
			}
		}
	})
}

func moduleDelta(before, after [MaxPorts]ModelStats, port uint8, name string) uint64 {
	for i, n := range ModuleNames {
		if n == name {
			return after[port].Module[i] - before[port].Module[i]
		}
	}
	return 0
}

func dropDelta(before, after [MaxPorts]ModelStats, port uint8, name string) uint64 {
	for i, n := range DropNames {
		if n == name {
			return after[port].Drop[i] - before[port].Drop[i]
		}
	}
	return 0
}

// TestLBCaps gives the LB a capacity, then its internal ports one each
// (DTX-n): a burst of data frames faster than any rate gets the bucket's
// worth through (element.CapBurst + 1) and the rest is dropped as cap or
// port_cap; frames that are not balanced (an ARP request) are not
// capped; with the caps off again everything passes.
func TestLBCaps(t *testing.T) {
	withFixture(t, ModeWRR, func(f *fixture) {
		e0 := f.ports["e0"]
		data := eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 1, 2))
		burst := func(n int) (passed int) {
			for range n {
				v, _, err := f.dp.Run(e0.Ifindex, data)
				if err != nil {
					t.Fatal(err)
				}
				if v == XDPRedirect {
					passed++
				}
			}
			return passed
		}
		const n = 400
		for _, c := range []struct {
			name string
			cap  uint32
			drop string
		}{{"the LB's", CapElement, "cap"}, {"port i0's and i1's", CapPort, "port_cap"}} {
			idx := []uint32{c.cap}
			if c.cap == CapPort {
				idx = []uint32{CapPort + uint32(f.ports["i0"].Index), CapPort + uint32(f.ports["i1"].Index)}
			}
			for _, i := range idx {
				if err := f.dp.SetCap(i, 1000); err != nil { // a frame a millisecond
					t.Fatal(err)
				}
			}
			before, _ := f.stats()
			passed := burst(n)
			after, _ := f.stats()
			// 400 frames take well under 3 ms here: at most 3 more frames'
			// worth of time passes.
			if passed < element.CapBurst+1 || passed > element.CapBurst+4 {
				t.Errorf("%s capacity of 1,000 pps passed %d of a burst of %d, want %d to %d", c.name, passed, n, element.CapBurst+1, element.CapBurst+4)
			}
			if d := dropDelta(before, after, e0.Index, c.drop); d != uint64(n-passed) {
				t.Errorf("%s capacity: %d frames dropped as %s, want %d", c.name, d, c.drop, n-passed)
			}
			arpReq := eth(bcastMAC, macHost, etherTypeARP, arp(1, macHost, ipHostA, make(net.HardwareAddr, 6), ipExt0))
			if v, _, _ := f.dp.Run(e0.Ifindex, arpReq); v != XDPTx {
				t.Errorf("%s capacity: an ARP request for the port got verdict %d, want XDP_TX (not capped)", c.name, v)
			}
			for _, i := range idx {
				if err := f.dp.SetCap(i, 0); err != nil {
					t.Fatal(err)
				}
			}
			if passed := burst(n); passed != n {
				t.Errorf("caps off: %d of %d passed", passed, n)
			}
		}
	})
}

// TestLBDropsWithoutState covers the drops that need missing state: no
// table, no VCP, no default internal port.
func TestLBDropsWithoutState(t *testing.T) {
	withFixture(t, ModeHash, func(f *fixture) {
		if err := f.dp.InstallTable(&Table{Mode: ModeHash}); err != nil {
			t.Fatal(err)
		}
		f.model.Table = Table{Mode: ModeHash}
		f.model.Config = Config{DefaultIntIfindex: 999}
		if err := f.dp.SetConfig(f.model.Config); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			frame []byte
			drop  string
		}{
			{eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 1, 2)), "no_backend"},
			{eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipExt0, 1, 179)), "no_vcp"},
			{eth(macExt0, macHost, etherTypeARP, arp(2, macHost, ipHostA, macExt0, ipExt0)), "no_internal"},
		}
		for _, c := range cases {
			before, _ := f.stats()
			if _, err := f.compare(f.ports["e0"].Ifindex, c.frame, true); err != nil {
				t.Errorf("%s: %v", c.drop, err)
			}
			after, _ := f.stats()
			if dropDelta(before, after, 0, c.drop) != 1 {
				t.Errorf("drop %s not counted", c.drop)
			}
		}
	})
}

// TestLBDifferential runs the fixture frames and 100,000 random and
// mutated frames through the kernel and the model, for each balancing
// mode: every verdict and output byte must agree, and all counters (hence
// every egress port) at each checkpoint. Flowlet mode runs with the
// longest gap (a flow keeps its first back-end) and with none (every
// packet a new flowlet, the round-robin's next): the model's clock and
// the kernel's agree on both without sharing one.
func TestLBDifferential(t *testing.T) {
	const frames = 100_000
	type run struct {
		mode  Mode
		gap   time.Duration
		label bool // IPv6: hash the flow label
	}
	for _, c := range []run{{ModeWRR, 0, false}, {ModeHash, 0, false}, {ModeHash, 0, true}, {ModeMaglev, 0, false},
		{ModeFlowlet, MaxFlowletGap, false}, {ModeFlowlet, 0, false}} {
		mode := c.mode
		t.Run(fmt.Sprintf("%v-%v-label-%v", mode, c.gap, c.label), func(t *testing.T) {
			withFixture(t, mode, func(f *fixture) {
				f.model.Config.FlowletGap, f.model.Config.FlowLabel = c.gap, c.label
				if err := f.dp.SetConfig(f.model.Config); err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(uint64(mode), 42))
				ports := []string{"e0", "e1", "i0", "i1", "u0"}
				fails := 0
				for i := 0; i < frames && fails < 5; i++ {
					frame := randomFrame(r)
					in := f.ports[ports[r.IntN(len(ports))]].Ifindex
					if _, err := f.compare(in, frame, i%1000 == 999); err != nil {
						t.Errorf("frame %d in %d: %v\nframe %x", i, in, err, frame)
						fails++
					}
				}
				got, _ := f.stats()
				if !reflect.DeepEqual(got, f.model.Stats) {
					t.Errorf("final counters differ")
				}
				var handled uint64
				for _, s := range got {
					for _, m := range s.Module {
						handled += m
					}
				}
				if handled < frames/20 {
					t.Errorf("only %d of %d random frames got past the classifier: the generator is too narrow", handled, frames)
				}
			})
		})
	}
}

// TestLBHostKeepsItsInternalPort: with two internal ports, all of one
// outside host's frames enter the switch by one port whatever back-end
// their flows go to (else the switch relearns the host's MAC from port to
// port, and traffic back to it alternates paths and reorders); different
// hosts use both ports. Kernel and model agree on each frame.
func TestLBHostKeepsItsInternalPort(t *testing.T) {
	for _, mode := range []Mode{ModeHash, ModeMaglev, ModeWRR} {
		t.Run(mode.String(), func(t *testing.T) {
			withFixture(t, mode, func(f *fixture) {
				ports, backends := map[int]bool{}, map[string]bool{}
				for sport := uint16(1000); sport < 1200; sport++ {
					r, err := f.compare(f.ports["e0"].Ifindex, eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, sport, 53)), false)
					if err != nil {
						t.Fatal(err)
					}
					ports[r.Egress] = true
					backends[net.HardwareAddr(r.Out[0:6]).String()] = true
				}
				if len(ports) != 1 || len(backends) < 2 {
					t.Errorf("%v: one host's 200 flows left by %d ports to %d back-ends, want 1 port, several back-ends", mode, len(ports), len(backends))
				}
				ports = map[int]bool{}
				for i := 0; i < 64; i++ {
					src := net.HardwareAddr{0x02, 0, 0, 0, 0xab, byte(i)}
					r, err := f.compare(f.ports["e0"].Ifindex, eth(macExt0, src, etherTypeIPv4, udp(ipHostA, ipHostB, 1000, 53)), false)
					if err != nil {
						t.Fatal(err)
					}
					ports[r.Egress] = true
				}
				if len(ports) != 2 {
					t.Errorf("%v: 64 hosts used %d internal ports, want both", mode, len(ports))
				}
			})
		})
	}
}

// TestLoadDataplaneMigratesOlderPin: a map pinned by an older version
// with another layout (lb_stats with fewer drop reasons) is migrated into
// the new layout, and the maps that still fit are adopted with their
// contents.
func TestLoadDataplaneMigratesOlderPin(t *testing.T) {
	if err := netns.EnsureBPFFS(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(netns.BPFFS, "msr-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: "lb_stats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8 * 8, MaxEntries: uint32(MaxPorts)})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Pin(filepath.Join(dir, "lb_stats")); err != nil {
		t.Fatal(err)
	}
	dp, err := LoadDataplane(dir, false)
	if err != nil {
		t.Fatalf("an incompatible pinned map stops the load: %v", err)
	}
	if len(dp.Migrated) != 1 || dp.Migrated[0].Map != "lb_stats" || dp.Migrated[0].Entries != MaxPorts || dp.Migrated[0].Empty {
		t.Errorf("migrated %+v, want lb_stats's %d entries", dp.Migrated, MaxPorts)
	}
	if err := dp.SetCap(CapElement, 1234); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	again, err := LoadDataplane(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var c lbxdpMsrCap
	if err := again.objs.LbCaps.Lookup(CapElement, &c); err != nil || c.IntervalNs != uint64(1_000_000_000/1234) {
		t.Errorf("the compatible pinned lb_caps was not adopted: %v, %+v", err, c)
	}
	if _, err := again.Stats(0); err != nil {
		t.Errorf("lb_stats made anew cannot be read: %v", err)
	}
}

// TestLBFlowlets runs flowlet mode in the kernel against real time: a
// flow's packets within the gap all go to one back-end (in order: one
// path); after a pause longer than the gap the flow may move, and over
// many flowlets it visits every back-end; with every packet a flowlet of
// its own (gap 0) the back-ends' shares follow the weights (1:2:1 here)
// within 2%, as WRR's do.
func TestLBFlowlets(t *testing.T) {
	withFixture(t, ModeFlowlet, func(f *fixture) {
		e0 := f.ports["e0"].Ifindex
		setGap := func(gap time.Duration) {
			f.model.Config.FlowletGap = gap
			if err := f.dp.SetConfig(f.model.Config); err != nil {
				t.Fatal(err)
			}
		}
		backendOf := func(sport uint16) string {
			v, out, err := f.dp.Run(e0, eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, sport, 53)))
			if err != nil || v != XDPRedirect {
				t.Fatalf("verdict %d, %v", v, err)
			}
			return net.HardwareAddr(out[0:6]).String()
		}
		setGap(5 * time.Millisecond)
		visited := map[string]bool{}
		for burst := range 12 {
			first := backendOf(4000)
			for i := range 30 {
				if b := backendOf(4000); b != first {
					t.Fatalf("burst %d: packet %d went to %s, the burst's first to %s", burst, i+1, b, first)
				}
			}
			visited[first] = true
			time.Sleep(15 * time.Millisecond)
		}
		if len(visited) != len(macR) {
			t.Errorf("one flow's 12 flowlets, 15 ms apart with a 5 ms gap, visited %d back-ends, want all %d", len(visited), len(macR))
		}
		setGap(0)
		count := map[string]int{}
		const n = 4000
		for range n {
			count[backendOf(4001)]++
		}
		weights := map[string]float64{}
		var total float64
		for i, mac := range macR {
			weights[mac.String()] = float64(1 + i%2)
			total += float64(1 + i%2)
		}
		for mac, w := range weights {
			if share := float64(count[mac]) / n; math.Abs(share-w/total) > 0.02 {
				t.Errorf("gap 0: back-end %s got %.3f of the packets, its weight %.3f", mac, share, w/total)
			}
		}
	})
}

// roundRobin is CPU cpu's round-robin counter.
func (d *Dataplane) roundRobin(cpu int) (uint32, error) {
	var per []uint32
	if err := d.objs.LbRr.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	if cpu >= len(per) {
		return 0, fmt.Errorf("CPU %d of %d", cpu, len(per))
	}
	return per[cpu], nil
}

// TestLBSampling: an external port samples 1 in its rate of the frames
// that come in (sFlow): at rate 1 every frame, each sample the frame's
// length and first bytes (at most SampleHeader) from its port; at rate 4
// about a quarter, at gaps drawn at random; the pool counts the frames;
// with no rate, nothing is sampled or counted. The frames go on as
// without sampling.
func TestLBSampling(t *testing.T) {
	withFixture(t, ModeWRR, func(f *fixture) {
		rd, err := f.dp.SampleReader()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		e0 := f.ports["e0"]
		short := eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 1, 2))
		long := eth(macExt0, macHost, etherTypeIPv4, inet.IPv4(ipHostA, ipHostB, 17, l4(1, 2, 300)))
		run := func(frame []byte, n int) {
			for range n {
				if v, _, err := f.dp.Run(e0.Ifindex, frame); err != nil || v != XDPRedirect {
					t.Fatalf("verdict %d, %v: sampling must not change what happens to a frame", v, err)
				}
			}
		}
		read := func() (n int) {
			rd.Flush() // the samples short of a wakeup too
			rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				rec, err := rd.Read()
				if errors.Is(err, perf.ErrFlushed) {
					continue
				}
				if err != nil {
					return n
				}
				port, length, header, err := ParseSample(rec.RawSample)
				if err != nil {
					t.Fatal(err)
				}
				want := short
				if int(length) == len(long) {
					want = long[:SampleHeader]
				}
				if port != e0.Index || (int(length) != len(short) && int(length) != len(long)) || !bytes.Equal(header, want) {
					t.Fatalf("sample: port %d, length %d, header %x", port, length, header)
				}
				n++
			}
		}
		run(short, 10)
		if n := read(); n != 0 {
			t.Errorf("no rate: %d samples", n)
		}
		e0.SampleRate = 1
		if err := f.dp.SetPort(e0); err != nil {
			t.Fatal(err)
		}
		run(short, 10)
		run(long, 10)
		if n := read(); n != 20 {
			t.Errorf("rate 1: %d samples of 20 frames", n)
		}
		e0.SampleRate = 4
		f.dp.SetPort(e0)
		run(short, 4000)
		// Gaps drawn from 1 to 7, mean 4: 1,000 samples, their spread
		// less than a binomial's (± 27 for 1/4 each); 5σ of that.
		if n := read(); n < 865 || n > 1135 {
			t.Errorf("rate 4: %d samples of 4,000 frames, want 1,000 ± 135", n)
		}
		// The pool counts the frames up to the last sample: all 4,020
		// sampled at rate 1 or 4 but the last gap's (at most 6).
		if pool, drops, err := f.dp.SamplePool(e0.Index); err != nil || pool > 4020 || pool < 4014 || drops != 0 {
			t.Errorf("pool %d, drops %d (%v): want 4,014 to 4,020 frames seen, none lost", pool, drops, err)
		}
	})
}
