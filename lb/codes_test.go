package lb

import (
	"encoding/binary"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/internal/xdp"
)

// Every code Go shares with bpf/lb.h comes from it: the limits and enums
// are generated (bpf2go -type); the counters' names and DIST's balancing
// modes are Go's own words for them, checked here against the compiled
// program's BTF, so that a C change without its Go side fails.
func TestCodesMatchTheDataPath(t *testing.T) {
	spec, err := loadLbxdp()
	if err != nil {
		t.Fatal(err)
	}
	if err := xdp.CheckEnumNames(spec, "lb_module", "LB_MOD_", ModuleNames[:]); err != nil {
		t.Error(err)
	}
	if err := xdp.CheckEnumNames(spec, "lb_drop", "LB_DROP_", DropNames[:]); err != nil {
		t.Error(err)
	}
	if int(lbxdpIp6LimitIP6EXT_MAX) != inet.IP6ExtMax || int(lbxdpIp6LimitIP6EXT_BYTES) != inet.IP6ExtBytes {
		t.Errorf("ipv6.h walks %d headers and %d bytes, inet.WalkIPv6 %d and %d", lbxdpIp6LimitIP6EXT_MAX, lbxdpIp6LimitIP6EXT_BYTES, inet.IP6ExtMax, inet.IP6ExtBytes)
	}
	for _, m := range []struct {
		lb   Mode
		dist dist.BalanceMode
	}{{ModeWRR, dist.ModeWRR}, {ModeHash, dist.ModeHash}, {ModeMaglev, dist.ModeMaglev}, {ModeFlowlet, dist.ModeFlowlet}} {
		if uint32(m.lb) != uint32(m.dist) || m.lb.String() != m.dist.String() {
			t.Errorf("mode %s is %d in lb.h, %s %d in DIST", m.lb, m.lb, m.dist, m.dist)
		}
	}
	if uint16(lbxdpMsrEthertypeETH_P_DIST) != dist.EtherType {
		t.Errorf("DIST's EtherType is %#x in common.h, %#x in dist", lbxdpMsrEthertypeETH_P_DIST, dist.EtherType)
	}
	for name, size := range map[string]int{"lb_ports": MaxPorts, "lb_stats": MaxPorts, "lb_table_0": TableSlots, "lb_table_1": TableSlots} {
		if got := int(spec.Maps[name].MaxEntries); got != size {
			t.Errorf("map %s holds %d, Go's limit is %d", name, got, size)
		}
	}
	if int(lbxdpMsrInfraLimitMSR_INFRA_PREFIXES) != xdp.InfraPrefixes || binary.Size(lbxdpMsrInfra{}) != xdp.InfraSize {
		t.Errorf("infra.h holds %d prefixes a family in %d bytes, xdp.Infra %d in %d", lbxdpMsrInfraLimitMSR_INFRA_PREFIXES, binary.Size(lbxdpMsrInfra{}), xdp.InfraPrefixes, xdp.InfraSize)
	}
}
