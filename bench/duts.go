package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/traffic"
)

// A loadedDUT is a device under test set up in its lab: its XDP programs
// by stage (none for none and linux), whose run times the bench reads;
// what undoes it; and, for the LB and the back-end alone, what reads the
// frames it forwarded by CPU (its own per-CPU counters: the frames it
// took that the lab's hosts sent of their own, neighbour discovery and
// the like, are not among them).
type loadedDUT struct {
	progs           map[string]*ebpf.Program
	undo            func()
	forwardedPerCPU func() ([]uint64, error)
}

// setupDUT prepares the device under test once its lab is up and the sink
// is attached, with its element's cap if o sets one.
func setupDUT(o FwdOptions, spec *lab.Spec, routes []netip.Prefix) (*loadedDUT, error) {
	dut, ipv6 := o.DUT, o.IPv6
	switch dut {
	case "lb", "lb-int-ext", "lb-both":
		dp, undo, err := setupLB(dut, spec)
		if err != nil {
			return nil, err
		}
		l := &loadedDUT{progs: map[string]*ebpf.Program{"lb": dp.Program()}, undo: undo, forwardedPerCPU: func() ([]uint64, error) {
			// e0 (index 0) from outside, i0 (1) from a back-end.
			var sum []uint64
			for i := range uint8(2) {
				c, err := dp.Stats(i)
				if err != nil {
					return nil, err
				}
				sum = addPerCPU(sum, c.TxPerCPU)
			}
			return sum, nil
		}}
		if err := dp.SetCap(lb.CapElement, o.CapPPS); err != nil {
			undo()
			return nil, err
		}
		if o.SFlowRate > 0 {
			if l.undo, err = sampleLB(spec, dp, o.SFlowRate, undo); err != nil {
				undo()
				return nil, err
			}
		}
		return l, nil
	case "router":
		dp, undo, err := setupRouter(spec, routes, ipv6, o.URPF)
		if err != nil {
			return nil, err
		}
		if err := dp.SetCap(o.CapPPS); err != nil {
			undo()
			return nil, err
		}
		return &loadedDUT{progs: map[string]*ebpf.Program{"router": dp.Program()}, undo: undo, forwardedPerCPU: func() ([]uint64, error) {
			c, err := dp.Stats(0)
			if err != nil {
				return nil, err
			}
			return c.ForwardedPerCPU, nil
		}}, nil
	case "xdp-fib":
		p, undo, err := setupXDPFib(spec, routes, ipv6)
		return &loadedDUT{progs: map[string]*ebpf.Program{"xdp-fib": p}, undo: undo}, err
	case "msr", "msr-switch", "msr-xdpswitch":
		progs, undo, err := setupMsr(spec, routes, ipv6)
		return &loadedDUT{progs: progs, undo: undo}, err
	case "xdp-min":
		p, undo, err := setupXDPMin(spec)
		return &loadedDUT{progs: map[string]*ebpf.Program{"xdp-min": p}, undo: undo}, err
	case "linux":
		return &loadedDUT{undo: func() {}}, installLinuxRoutes(spec, routes)
	}
	return &loadedDUT{undo: func() {}}, nil
}

// sampleLB has the LB sample 1 in rate of the frames into e0, and reads
// the samples as its agent does, until the returned undo (which then
// does undo's work).
func sampleLB(spec *lab.Spec, dp *lb.Dataplane, rate uint32, undo func()) (func(), error) {
	err := netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		e0, err := net.InterfaceByName("e0")
		if err != nil {
			return err
		}
		return dp.SetSampleRate(e0.Index, rate)
	})
	if err != nil {
		return nil, err
	}
	rd, err := dp.SampleReader()
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := rd.Read(); errors.Is(err, perf.ErrClosed) {
				return
			}
		}
	}()
	go func() { // the samples short of a wakeup, as the agent flushes them
		for t := time.NewTicker(100 * time.Millisecond); ; <-t.C {
			select {
			case <-done:
				t.Stop()
				return
			default:
				rd.Flush()
			}
		}
	}()
	return func() { rd.Close(); <-done; undo() }, nil
}

// addPerCPU adds b to a, CPU by CPU.
func addPerCPU(a, b []uint64) []uint64 {
	for len(a) < len(b) {
		a = append(a, 0)
	}
	for i, v := range b {
		a[i] += v
	}
	return a
}

// installLinuxRoutes puts the routes into the Linux DUT's FIB, all via the
// sink (10.10.2.2, 2001:db8:2::2 for IPv6), with one `ip -batch`.
func installLinuxRoutes(spec *lab.Spec, routes []netip.Prefix) error {
	if routes == nil {
		return nil
	}
	var b strings.Builder
	writeRoutes(&b, routes, "10.10.2.2", "2001:db8:2::2", "")
	cmd := exec.Command("ip", "-n", lab.Namespace(spec.Name, "dut"), "-batch", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := onGenCPU(cmd); err != nil {
		return fmt.Errorf("install %d routes in Linux: %v: %s", len(routes), err, out)
	}
	return nil
}

// writeRoutes writes an `ip -batch` line for each route, via via4 or via6
// by its family, and with " dev DEV" when dev is set.
func writeRoutes(b *strings.Builder, routes []netip.Prefix, via4, via6, dev string) {
	if dev != "" {
		dev = " dev " + dev
	}
	for _, p := range routes {
		via := via4
		if p.Addr().Is6() {
			via = via6
		}
		fmt.Fprintf(b, "route replace %s via %s%s\n", p, via, dev)
	}
}

// dataPaths are the programs, links and data paths a bench DUT loaded,
// undone in one call.
type dataPaths struct {
	links   []link.Link
	closers []interface{ Close() error }
}

func (d *dataPaths) undo() {
	for _, l := range d.links {
		l.Close()
	}
	for _, c := range d.closers {
		c.Close()
	}
}

// loadRouter loads a back-end's data path on ifname, in the calling
// thread's namespace: its external ports, one next hop (gw, on port gwPort,
// with MAC gwMAC), every route via it; then attaches it.
func (d *dataPaths) loadRouter(ifname string, ports []router.Port, gw netip.Addr, gwPort int, gwMAC net.HardwareAddr,
	routes []netip.Prefix) (*router.Dataplane, error) {
	all := make(map[netip.Prefix]uint32, len(routes))
	for _, p := range routes {
		all[p] = 1
	}
	return d.loadRouterHops(ifname, ports, []benchHop{{gw, gwPort, gwMAC}}, all)
}

// A benchHop is a next hop of a bench back-end: its address, the index of
// the port it is on, its MAC.
type benchHop struct {
	addr netip.Addr
	port int
	mac  net.HardwareAddr
}

// loadRouterHops loads a back-end's data path on ifname, in the calling
// thread's namespace: its external ports, the next hops (hop i is next
// hop and group i+1), the routes each to its group; then attaches it.
func (d *dataPaths) loadRouterHops(ifname string, ports []router.Port, hops []benchHop, routes map[netip.Prefix]uint32) (*router.Dataplane, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	var v6 []netip.Prefix
	for p := range routes {
		if p.Addr().Is6() {
			v6 = append(v6, p)
		}
	}
	dp, err := router.LoadDataplane("", router.Sizes{FIB6Lines: max(router.DefaultFIB6Lines, routerapi.FIB6LinesFor(v6, 16)*5/4)}, false)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, dp)
	if err := dp.SetConfig(ifi.HardwareAddr, 0); err != nil {
		return nil, err
	}
	for _, p := range ports {
		if err := dp.SetPort(p); err != nil {
			return nil, err
		}
	}
	for i, h := range hops {
		id := uint32(i + 1)
		steps := []func() error{
			func() error { return dp.SetNextHop(id, h.addr, uint16(h.port)) },
			func() error { return dp.SetGroup(id, []uint32{id}) },
			func() error { return dp.SetNeighbor(h.addr, ports[h.port].VLAN, h.mac) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return nil, err
			}
		}
	}
	routes4, routes6 := map[netip.Prefix]uint32{}, map[netip.Prefix]uint32{}
	for p, g := range routes {
		if p.Addr().Is6() {
			routes6[p] = g
		} else {
			routes4[p] = g
		}
	}
	if err := dp.FIB.SetAll(routes4); err != nil {
		return nil, err
	}
	if err := dp.FIB6.SetAll(routes6); err != nil {
		return nil, err
	}
	l, err := dp.Attach(ifi.Index)
	if err != nil {
		return nil, err
	}
	d.links = append(d.links, l)
	return dp, nil
}

// lbPort is one LB port a bench names: the interface, its role, VLAN and
// address.
type lbPort struct {
	name string
	role uint8
	vlan uint16
	addr netip.Addr
}

// loadLB loads an LB's data path in the calling thread's namespace: ports
// (the first internal one the default), and a table of every back-end
// through every internal port in mode, back-end j with weights[j] (nil:
// 1 each), flowlets ended by the default gap; then attaches it to every
// port. It returns the ports as loaded and the table.
func (d *dataPaths) loadLB(ports []lbPort, backends []net.HardwareAddr, weights []uint16, mode lb.Mode) (*lb.Dataplane, []lb.Port, *lb.Table, error) {
	dp, err := lb.LoadDataplane("", false)
	if err != nil {
		return nil, nil, nil, err
	}
	d.closers = append(d.closers, dp)
	var set []lb.Port
	var table []lb.Backend
	cfg := lb.Config{FlowletGap: lb.DefaultFlowletGap}
	for i, bp := range ports {
		ifi, err := net.InterfaceByName(bp.name)
		if err != nil {
			return nil, nil, nil, err
		}
		p := lb.Port{Ifindex: ifi.Index, Index: uint8(i), Role: bp.role, MAC: ifi.HardwareAddr, VLAN: bp.vlan, Addr: bp.addr}
		if err := dp.SetPort(p); err != nil {
			return nil, nil, nil, err
		}
		set = append(set, p)
		if p.Role != lb.RoleInternal {
			continue
		}
		if cfg.DefaultIntIfindex == 0 {
			cfg.DefaultIntIfindex = p.Ifindex
		}
		for j, mac := range backends {
			w := uint16(1)
			if weights != nil {
				w = weights[j]
			}
			table = append(table, lb.Backend{MAC: mac, Ifindex: p.Ifindex, PortIndex: p.Index, Weight: w})
		}
	}
	if cfg.DefaultIntIfindex == 0 {
		return nil, nil, nil, errors.New("an LB needs an internal port")
	}
	if err := dp.SetConfig(cfg); err != nil {
		return nil, nil, nil, err
	}
	t, err := lb.BuildTable(mode, table)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := dp.InstallTable(t); err != nil {
		return nil, nil, nil, err
	}
	for _, p := range set {
		l, err := dp.Attach(p.Ifindex)
		if err != nil {
			return nil, nil, nil, err
		}
		d.links = append(d.links, l)
	}
	return dp, set, t, nil
}

// loadHashLB loads an LB as loadLB does, with one back-end in a hash
// table: the bench labs' LB.
func (d *dataPaths) loadHashLB(ports []lbPort, backend net.HardwareAddr) (*lb.Dataplane, error) {
	dp, _, _, err := d.loadLB(ports, []net.HardwareAddr{backend}, nil, lb.ModeHash)
	return dp, err
}

// macs looks up the MACs the lab file gives these endpoints.
func macs(spec *lab.Spec, ends ...lab.Endpoint) ([]net.HardwareAddr, error) {
	var out []net.HardwareAddr
	for _, e := range ends {
		mac, ok := spec.MAC(e)
		if !ok {
			return nil, fmt.Errorf("lab %s: %s:%s has no MAC", spec.Name, e.Node, e.Iface)
		}
		out = append(out, mac)
	}
	return out, nil
}

// benchRoutes are the routes a bench DUT holds: those given, or where the
// generator sends, 198.19.0.0/16 (IPv6: 2001:2:0:8000::/49).
func benchRoutes(routes []netip.Prefix, ipv6 bool) []netip.Prefix {
	switch {
	case routes != nil:
		return routes
	case ipv6:
		return []netip.Prefix{traffic.Dst6}
	}
	return []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}
}

// benchGateway is a bench back-end's next hop: gw, or for IPv6 the
// address of the same host on the IPv6 side (2001:db8:N::2 for
// 10.10.N.2).
func benchGateway(gw netip.Addr, ipv6 bool) netip.Addr {
	if !ipv6 {
		return gw
	}
	a := gw.As4()
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, a[2], 15: a[3]})
}

// setupRouter loads the back-end router's data path on host dut: one
// external port (VLAN 10), one next hop (the generator's side, whose MAC
// is the sink's), the routes all through it.
func setupRouter(spec *lab.Spec, routes []netip.Prefix, ipv6 bool, urpf string) (*router.Dataplane, func(), error) {
	m, err := macs(spec, lab.Endpoint{Node: "gen", Iface: "g0"})
	if err != nil {
		return nil, nil, err
	}
	all := benchRoutes(routes, ipv6)
	if urpf != "" {
		// The sources, through the port they come in by.
		src := netip.MustParsePrefix("198.18.0.0/16")
		if ipv6 {
			src = netip.MustParsePrefix("2001:2::/49")
		}
		all = append(slices.Clone(all), src)
	}
	mode, _ := dist.ParseURPF(urpf)
	var d dataPaths
	var dp *router.Dataplane
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() (err error) {
		dp, err = d.loadRouter("eth0", []router.Port{{Index: 0, VLAN: routerBenchVLAN, MTU: 1500, Addr: netip.MustParsePrefix("10.10.1.1/24"),
			Addr6: netip.MustParsePrefix("2001:db8:1::1/64")}},
			benchGateway(netip.MustParseAddr("10.10.1.2"), ipv6), 0, m[0], all)
		if err == nil && urpf != "" {
			err = dp.SetURPFs(map[uint16]dist.URPFMode{routerBenchVLAN: mode})
		}
		return err
	})
	if err != nil {
		d.undo()
		return nil, nil, err
	}
	return dp, d.undo, nil
}

// routerBenchVLAN is the bench back-end's one port's VLAN.
const routerBenchVLAN = 10

// setupLB loads the LB data path on host dut: e0 external (VLAN 10), i0
// internal, one back-end in a hash table: the sink's MAC, or for
// lb-int-ext and lb-both the generator's interface that stands for the
// back-end. No agent runs: the bench measures the data path.
func setupLB(dut string, spec *lab.Spec) (*lb.Dataplane, func(), error) {
	ext := lbPort{"e0", lb.RoleExternal, lbBenchVLAN, netip.Addr{}}
	in := lbPort{"i0", lb.RoleInternal, 0, netip.Addr{}}
	backend := lab.Endpoint{Node: "sink", Iface: "s0"}
	switch dut {
	case "lb-int-ext":
		backend = lab.Endpoint{Node: "gen", Iface: "g0"}
	case "lb-both":
		backend = lab.Endpoint{Node: "gen", Iface: "g1"}
	}
	m, err := macs(spec, backend)
	if err != nil {
		return nil, nil, err
	}
	var d dataPaths
	var dp *lb.Dataplane
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() (err error) {
		dp, err = d.loadHashLB([]lbPort{ext, in}, m[0])
		return err
	})
	if err != nil {
		d.undo()
		return nil, nil, err
	}
	return dp, d.undo, nil
}

// setupXDPMin attaches the minimal forwarder to the DUT's e0: every frame
// to the sink's MAC out of i0.
func setupXDPMin(spec *lab.Spec) (*ebpf.Program, func(), error) {
	m, err := macs(spec, lab.Endpoint{Node: "sink", Iface: "s0"})
	if err != nil {
		return nil, nil, err
	}
	var d dataPaths
	var p *ebpf.Program
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		in, err := net.InterfaceByName("e0")
		if err != nil {
			return err
		}
		out, err := net.InterfaceByName("i0")
		if err != nil {
			return err
		}
		objs, err := newMinfwd(out, m[0])
		if err != nil {
			return err
		}
		d.closers = append(d.closers, objs)
		l, err := xdp.Attach(objs.Minfwd, in.Index)
		if err != nil {
			return err
		}
		d.links = append(d.links, l)
		p = objs.Minfwd
		return nil
	})
	if err != nil {
		d.undo()
		return nil, nil, err
	}
	return p, d.undo, nil
}

// lbBenchVLAN is the VLAN of the bench LB's external port e0.
const lbBenchVLAN = 10

// lbPorts are where the flows of the LB's other directions leave the
// generator: for lb-int-ext, tagged with e0's VLAN into i0 as a back-end's
// routed frames, addressed to the sink (the next hop); for lb-both, every
// other flow so, to g0, and the others into e0 from outside. Nil for the
// other DUTs (g0, to its peer).
func lbPorts(dut string, spec *lab.Spec) ([]traffic.GenPort, error) {
	switch dut {
	case "lb-int-ext":
		m, err := macs(spec, lab.Endpoint{Node: "sink", Iface: "s0"})
		if err != nil {
			return nil, err
		}
		return []traffic.GenPort{{Ifname: "g0", DstMAC: m[0], VLAN: lbBenchVLAN}}, nil
	case "lb-both":
		m, err := macs(spec, lab.Endpoint{Node: "dut", Iface: "e0"}, lab.Endpoint{Node: "gen", Iface: "g0"})
		if err != nil {
			return nil, err
		}
		return []traffic.GenPort{{Ifname: "g0", DstMAC: m[0]}, {Ifname: "g1", DstMAC: m[1], VLAN: lbBenchVLAN}}, nil
	}
	return nil, nil
}

// setupMsr loads the LB's data path on host dut (e0 external, VLAN 10; e1
// external, VLAN 20; i0 internal, r1 its one back-end) and the back-end's
// on r1 (the same two ports; the routes via the sink on VLAN 20). No
// agents: the bench measures the data paths. It returns both programs (the
// LB's runs twice on every packet).
func setupMsr(spec *lab.Spec, routes []netip.Prefix, ipv6 bool) (map[string]*ebpf.Program, func(), error) {
	m, err := macs(spec, lab.Endpoint{Node: "sink", Iface: "s0"}, lab.Endpoint{Node: "r1", Iface: "r0"})
	if err != nil {
		return nil, nil, err
	}
	sinkMAC, r1MAC := m[0], m[1]
	var d dataPaths
	var lbdp *lb.Dataplane
	var rdp *router.Dataplane
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() (err error) {
		lbdp, err = d.loadHashLB([]lbPort{
			{"e0", lb.RoleExternal, 10, netip.MustParseAddr("10.10.1.1")},
			{"e1", lb.RoleExternal, 20, netip.MustParseAddr("10.10.2.1")},
			{"i0", lb.RoleInternal, 0, netip.Addr{}},
		}, r1MAC)
		return err
	})
	if err == nil {
		err = netns.Do(lab.Namespace(spec.Name, "r1"), func() (err error) {
			rdp, err = d.loadRouter("r0", []router.Port{
				{Index: 0, VLAN: 10, MTU: 1500, Addr: netip.MustParsePrefix("10.10.1.1/24"), Addr6: netip.MustParsePrefix("2001:db8:1::1/64")},
				{Index: 1, VLAN: 20, MTU: 1500, Addr: netip.MustParsePrefix("10.10.2.1/24"), Addr6: netip.MustParsePrefix("2001:db8:2::1/64")},
			}, benchGateway(netip.MustParseAddr("10.10.2.2"), ipv6), 1, sinkMAC, benchRoutes(routes, ipv6))
			return err
		})
	}
	if err != nil {
		d.undo()
		return nil, nil, err
	}
	return map[string]*ebpf.Program{"lb": lbdp.Program(), "router": rdp.Program()}, d.undo, nil
}
