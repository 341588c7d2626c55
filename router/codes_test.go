package router

import (
	"encoding/binary"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/xdp"
)

// Every code Go shares with bpf/router.h comes from it: the limits and
// enums are generated (bpf2go -type); the counters' names are Go's own
// words for them, checked here against the compiled program's BTF, and
// the maps' sizes against the limits, so that a C change without its Go
// side fails.
func TestCodesMatchTheDataPath(t *testing.T) {
	spec, err := loadRtxdp()
	if err != nil {
		t.Fatal(err)
	}
	if err := xdp.CheckCodes(spec, xdp.Codes{Enums: []xdp.Enum{{Name: "rt_slow", Prefix: "RT_SLOW_", Names: SlowNames[:]}, {Name: "rt_drop", Prefix: "RT_DROP_", Names: DropNames[:]}},
		IP6ExtMax: int(rtxdpIp6LimitIP6EXT_MAX), IP6ExtBytes: int(rtxdpIp6LimitIP6EXT_BYTES),
		InfraPrefixes: int(rtxdpMsrInfraLimitMSR_INFRA_PREFIXES), InfraSize: binary.Size(rtxdpMsrInfra{})}); err != nil {
		t.Error(err)
	}
	if uint8(rtxdpDistWireDIST_TYPE_PROBE) != uint8(dist.TypeProbe) {
		t.Errorf("DIST's PROBE is type %d in common.h, %d in dist", rtxdpDistWireDIST_TYPE_PROBE, dist.TypeProbe)
	}
	for name, size := range map[string]int{"rt_nexthops": MaxNextHops, "rt_nhgroups": MaxNHGroups, "rt_ports": DefaultPorts,
		"rt_acl": MaxACL, "rt_tbl8": Tbl8Groups} {
		if got := int(spec.Maps[name].MaxEntries); got != size {
			t.Errorf("map %s holds %d, Go's limit is %d", name, got, size)
		}
	}
	if MaxPorts != dist.MaxRouterPorts {
		t.Errorf("router.h holds %d external ports, dist.MaxRouterPorts %d", MaxPorts, dist.MaxRouterPorts)
	}
	var chunk rtxdpRtTbl24Chunk
	if got := int(spec.Maps["rt_tbl24"].MaxEntries) * len(chunk.E); got != Tbl24Entries {
		t.Errorf("rt_tbl24 holds %d entries, Go's FIB %d", got, Tbl24Entries)
	}
	var nhg rtxdpRtNhgroup
	if len(nhg.Nh) != ECMPMax {
		t.Errorf("a next-hop group holds %d next hops, Go's ECMP limit is %d", len(nhg.Nh), ECMPMax)
	}
}
