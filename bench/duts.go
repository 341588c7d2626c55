package bench

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/router"
)

// setupDUT prepares the device under test once its lab is up and the sink
// is attached; it returns the DUT's XDP programs by stage (none for none
// and linux), whose run times the bench reads, and what undoes it.
func setupDUT(dut string, spec *lab.Spec, routes []netip.Prefix) (map[string]*ebpf.Program, func(), error) {
	switch dut {
	case "lb":
		dp, undo, err := setupLB(spec)
		if err != nil {
			return nil, nil, err
		}
		return map[string]*ebpf.Program{"lb": dp.Program()}, undo, nil
	case "router":
		p, undo, err := setupRouter(spec, routes)
		return map[string]*ebpf.Program{"router": p}, undo, err
	case "msr":
		return setupMsr(spec, routes)
	case "linux":
		return nil, func() {}, installLinuxRoutes(spec, routes)
	}
	return nil, func() {}, nil
}

// installLinuxRoutes puts the routes into the Linux DUT's FIB, all via the
// sink, with one `ip -batch`.
func installLinuxRoutes(spec *lab.Spec, routes []netip.Prefix) error {
	if routes == nil {
		return nil
	}
	var b strings.Builder
	for _, p := range routes {
		fmt.Fprintf(&b, "route replace %s via 10.10.2.2\n", p)
	}
	cmd := exec.Command("ip", "-n", lab.Namespace(spec.Name, "dut"), "-batch", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install %d routes in Linux: %v: %s", len(routes), err, out)
	}
	return nil
}

// setupRouter loads the back-end router's data path on host dut: one
// external port (VLAN 10), one next hop (the generator's side, whose MAC
// is the sink's), the routes (or 198.19.0.0/16, where the generator sends)
// all through it.
func setupRouter(spec *lab.Spec, routes []netip.Prefix) (*ebpf.Program, func(), error) {
	genMAC, ok := spec.MAC(lab.Endpoint{Node: "gen", Iface: "g0"})
	if !ok {
		return nil, nil, fmt.Errorf("lab %s: gen:g0 has no MAC", spec.Name)
	}
	if routes == nil {
		routes = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}
	}
	var dp *router.Dataplane
	var l link.Link
	undo := func() {
		if l != nil {
			l.Close()
		}
		if dp != nil {
			dp.Close()
		}
	}
	err := netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		if dp, err = router.LoadDataplane(""); err != nil {
			return err
		}
		gw := netip.MustParseAddr("10.10.1.2")
		steps := []func() error{
			func() error { return dp.SetConfig(ifi.HardwareAddr, 0) },
			func() error {
				return dp.SetPort(router.Port{Index: 0, VLAN: 10, MTU: 1500, Addr: netip.MustParsePrefix("10.10.1.1/24")})
			},
			func() error { return dp.SetNextHop(1, gw, 0) },
			func() error { return dp.SetGroup(1, []uint32{1}) },
			func() error { return dp.SetNeighbor(gw, 10, genMAC) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		all := make(map[netip.Prefix]uint32, len(routes))
		for _, p := range routes {
			all[p] = 1
		}
		if err := dp.FIB.SetAll(all); err != nil {
			return err
		}
		l, err = dp.Attach(ifi.Index)
		return err
	})
	if err != nil {
		undo()
		return nil, nil, err
	}
	return dp.Program(), undo, nil
}

// setupLB loads the LB data path on host dut: e0 external, i0 internal,
// one back-end (the sink's MAC) in a hash table. No agent runs: the bench
// measures the data path.
func setupLB(spec *lab.Spec) (*lb.Dataplane, func(), error) {
	sinkMAC, ok := spec.MAC(lab.Endpoint{Node: "sink", Iface: "s0"})
	if !ok {
		return nil, nil, fmt.Errorf("lab %s: sink:s0 has no MAC", spec.Name)
	}
	var dp *lb.Dataplane
	var links []link.Link
	undo := func() {
		for _, l := range links {
			l.Close()
		}
		if dp != nil {
			dp.Close()
		}
	}
	err := netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		var err error
		if dp, err = lb.LoadDataplane(""); err != nil {
			return err
		}
		var in, out *net.Interface
		if in, err = net.InterfaceByName("e0"); err != nil {
			return err
		}
		if out, err = net.InterfaceByName("i0"); err != nil {
			return err
		}
		if err := dp.SetPort(lb.Port{Ifindex: in.Index, Index: 0, Role: lb.RoleExternal, MAC: in.HardwareAddr, VLAN: 10}); err != nil {
			return err
		}
		if err := dp.SetPort(lb.Port{Ifindex: out.Index, Index: 1, Role: lb.RoleInternal, MAC: out.HardwareAddr}); err != nil {
			return err
		}
		if err := dp.SetConfig(lb.Config{DefaultIntIfindex: out.Index}); err != nil {
			return err
		}
		t, err := lb.BuildTable(lb.ModeHash, []lb.Backend{{MAC: sinkMAC, Ifindex: out.Index, PortIndex: 1, Weight: 1}})
		if err != nil {
			return err
		}
		if err := dp.InstallTable(t); err != nil {
			return err
		}
		for _, ifi := range []*net.Interface{in, out} {
			l, err := dp.Attach(ifi.Index)
			if err != nil {
				return err
			}
			links = append(links, l)
		}
		return nil
	})
	if err != nil {
		undo()
		return nil, nil, err
	}
	return dp, undo, nil
}

// setupMsr loads the LB's data path on host dut (e0 external, VLAN 10; e1
// external, VLAN 20; i0 internal, r1 its one back-end) and the back-end's
// on r1 (the same two ports; the routes, or 198.19.0.0/16, via the sink on
// VLAN 20). No agents: the bench measures the data paths. It returns both
// programs (the LB's runs twice on every packet).
func setupMsr(spec *lab.Spec, routes []netip.Prefix) (map[string]*ebpf.Program, func(), error) {
	sinkMAC, ok1 := spec.MAC(lab.Endpoint{Node: "sink", Iface: "s0"})
	r1MAC, ok2 := spec.MAC(lab.Endpoint{Node: "r1", Iface: "r0"})
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("lab %s: sink:s0 and r1:r0 need MACs", spec.Name)
	}
	if routes == nil {
		routes = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}
	}
	var lbdp *lb.Dataplane
	var rdp *router.Dataplane
	var links []link.Link
	undo := func() {
		for _, l := range links {
			l.Close()
		}
		if lbdp != nil {
			lbdp.Close()
		}
		if rdp != nil {
			rdp.Close()
		}
	}
	err := netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		var err error
		if lbdp, err = lb.LoadDataplane(""); err != nil {
			return err
		}
		ifs := map[string]*net.Interface{}
		for _, n := range []string{"e0", "e1", "i0"} {
			if ifs[n], err = net.InterfaceByName(n); err != nil {
				return err
			}
		}
		ports := []lb.Port{
			{Ifindex: ifs["e0"].Index, Index: 0, Role: lb.RoleExternal, MAC: ifs["e0"].HardwareAddr, VLAN: 10, Addr: netip.MustParseAddr("10.10.1.1")},
			{Ifindex: ifs["e1"].Index, Index: 1, Role: lb.RoleExternal, MAC: ifs["e1"].HardwareAddr, VLAN: 20, Addr: netip.MustParseAddr("10.10.2.1")},
			{Ifindex: ifs["i0"].Index, Index: 2, Role: lb.RoleInternal, MAC: ifs["i0"].HardwareAddr},
		}
		for _, p := range ports {
			if err := lbdp.SetPort(p); err != nil {
				return err
			}
		}
		if err := lbdp.SetConfig(lb.Config{DefaultIntIfindex: ifs["i0"].Index}); err != nil {
			return err
		}
		t, err := lb.BuildTable(lb.ModeHash, []lb.Backend{{MAC: r1MAC, Ifindex: ifs["i0"].Index, PortIndex: 2, Weight: 1}})
		if err != nil {
			return err
		}
		if err := lbdp.InstallTable(t); err != nil {
			return err
		}
		for _, p := range ports {
			l, err := lbdp.Attach(p.Ifindex)
			if err != nil {
				return err
			}
			links = append(links, l)
		}
		return nil
	})
	if err == nil {
		err = netns.Do(lab.Namespace(spec.Name, "r1"), func() error {
			ifi, err := net.InterfaceByName("r0")
			if err != nil {
				return err
			}
			if rdp, err = router.LoadDataplane(""); err != nil {
				return err
			}
			gw := netip.MustParseAddr("10.10.2.2")
			steps := []func() error{
				func() error { return rdp.SetConfig(ifi.HardwareAddr, 0) },
				func() error {
					return rdp.SetPort(router.Port{Index: 0, VLAN: 10, MTU: 1500, Addr: netip.MustParsePrefix("10.10.1.1/24")})
				},
				func() error {
					return rdp.SetPort(router.Port{Index: 1, VLAN: 20, MTU: 1500, Addr: netip.MustParsePrefix("10.10.2.1/24")})
				},
				func() error { return rdp.SetNextHop(1, gw, 1) },
				func() error { return rdp.SetGroup(1, []uint32{1}) },
				func() error { return rdp.SetNeighbor(gw, 20, sinkMAC) },
			}
			for _, step := range steps {
				if err := step(); err != nil {
					return err
				}
			}
			all := make(map[netip.Prefix]uint32, len(routes))
			for _, p := range routes {
				all[p] = 1
			}
			if err := rdp.FIB.SetAll(all); err != nil {
				return err
			}
			l, err := rdp.Attach(ifi.Index)
			if err == nil {
				links = append(links, l)
			}
			return err
		})
	}
	if err != nil {
		undo()
		return nil, nil, err
	}
	return map[string]*ebpf.Program{"lb": lbdp.Program(), "router": rdp.Program()}, undo, nil
}
