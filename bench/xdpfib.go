package bench

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/lab"
)

// The xdp-fib DUT: the back-end's peer, XDP forwarding by the kernel's
// own FIB (bpf/xdpfib.bpf.c). On the router DUT's topology, the kernel
// holds the same table, every route via the generator's side on eth0, the
// neighbour's MAC permanent; the program looks each frame up with
// bpf_fib_lookup and sends it back out of eth0 tagged with VLAN 10
// (routerBenchVLAN), as msr's back-end does. These VMs' kernel has no
// VLAN devices (CONFIG_VLAN_8021Q is off), so eth0 is the egress device
// and the program's fib_vlans tags it, as the back-end's ports' table
// does; on a kernel with them, eth0.10 → (eth0, 10) is the same map.

// setupXDPFib builds the kernel's side in host dut (xdpFibKernel), loads
// the program and attaches it to eth0.
func setupXDPFib(spec *lab.Spec, routes []netip.Prefix, ipv6 bool) (*ebpf.Program, func(), error) {
	if err := xdpFibKernel(spec, routes, ipv6); err != nil {
		return nil, nil, err
	}
	var err error
	var d dataPaths
	var prog *ebpf.Program
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		prog, err = d.loadXDPFib("eth0", "eth0", routerBenchVLAN)
		return err
	})
	if err != nil {
		d.undo()
		return nil, nil, err
	}
	return prog, d.undo, nil
}

// xdpFibKernel gives the kernel in host dut eth0's addresses, the next
// hop's neighbour entry and the routes, in one `ip -batch` that can be run
// again (after the reset test's bounce of the host's links, which flushes
// them).
func xdpFibKernel(spec *lab.Spec, routes []netip.Prefix, ipv6 bool) error {
	m, err := macs(spec, lab.Endpoint{Node: "gen", Iface: "g0"})
	if err != nil {
		return err
	}
	gw := benchGateway(netip.MustParseAddr("10.10.1.2"), ipv6)
	var b strings.Builder
	b.WriteString("addr replace 10.10.1.1/24 dev eth0\naddr replace 2001:db8:1::1/64 dev eth0 nodad\n")
	fmt.Fprintf(&b, "neigh replace %s lladdr %s dev eth0 nud permanent\n", gw, m[0])
	writeRoutes(&b, benchRoutes(routes, ipv6), gw.String(), gw.String(), "eth0")
	cmd := exec.Command("ip", "-n", lab.Namespace(spec.Name, "dut"), "-batch", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := onGenCPU(cmd); err != nil {
		return fmt.Errorf("the kernel's FIB for xdp-fib: %v: %s", err, out)
	}
	return nil
}

// loadXDPFib loads xdpfib on ifname, in the calling thread's namespace:
// what the kernel routes to egress (ifname itself, or a VLAN device on
// it) leaves by ifname tagged with vid.
func (d *dataPaths) loadXDPFib(ifname, egress string, vid uint16) (*ebpf.Program, error) {
	lower, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	vl, err := netlink.LinkByName(egress)
	if err != nil {
		return nil, err
	}
	var objs xdpfibObjects
	if err := loadXdpfibObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("load xdpfib: %w", err)
	}
	d.closers = append(d.closers, &objs)
	key := uint32(vl.Attrs().Index)
	if err := objs.FibVlans.Put(&key, &xdpfibFibVlan{Lower: uint32(lower.Index), Vid: vid}); err != nil {
		return nil, err
	}
	l, err := xdp.Attach(objs.Xdpfib, lower.Index)
	if err != nil {
		return nil, err
	}
	d.links = append(d.links, l)
	return objs.Xdpfib, nil
}
