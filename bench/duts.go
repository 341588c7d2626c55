package bench

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf/link"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb"
)

// setupDUT prepares the device under test once its lab is up and the sink
// is attached; it returns what undoes it. The linux and none DUTs are
// ready as their lab files build them.
func setupDUT(dut string, spec *lab.Spec) (func(), error) {
	if dut != "lb" {
		return func() {}, nil
	}
	_, undo, err := setupLB(spec)
	return undo, err
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
