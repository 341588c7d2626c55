package lb

import (
	"encoding/binary"
	"testing"

	"github.com/msr-router/msr/dist"
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
	if err := xdp.CheckCodes(spec, xdp.Codes{Enums: []xdp.Enum{{Name: "lb_module", Prefix: "LB_MOD_", Names: ModuleNames[:]}, {Name: "lb_drop", Prefix: "LB_DROP_", Names: DropNames[:]}},
		IP6ExtMax: int(lbxdpIp6LimitIP6EXT_MAX), IP6ExtBytes: int(lbxdpIp6LimitIP6EXT_BYTES),
		InfraPrefixes: int(lbxdpMsrInfraLimitMSR_INFRA_PREFIXES), InfraSize: binary.Size(lbxdpMsrInfra{})}); err != nil {
		t.Error(err)
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
}
