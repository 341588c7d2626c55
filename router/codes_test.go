package router

import (
	"encoding/binary"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/inet"
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
	if err := xdp.CheckEnumNames(spec, "rt_slow", "RT_SLOW_", SlowNames[:]); err != nil {
		t.Error(err)
	}
	if err := xdp.CheckEnumNames(spec, "rt_drop", "RT_DROP_", DropNames[:]); err != nil {
		t.Error(err)
	}
	if int(rtxdpIp6LimitIP6EXT_MAX) != inet.IP6ExtMax || int(rtxdpIp6LimitIP6EXT_BYTES) != inet.IP6ExtBytes {
		t.Errorf("ipv6.h walks %d headers and %d bytes, inet.WalkIPv6 %d and %d", rtxdpIp6LimitIP6EXT_MAX, rtxdpIp6LimitIP6EXT_BYTES, inet.IP6ExtMax, inet.IP6ExtBytes)
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
	if int(rtxdpMsrInfraLimitMSR_INFRA_PREFIXES) != xdp.InfraPrefixes || binary.Size(rtxdpMsrInfra{}) != xdp.InfraSize {
		t.Errorf("infra.h holds %d prefixes a family in %d bytes, xdp.Infra %d in %d", rtxdpMsrInfraLimitMSR_INFRA_PREFIXES, binary.Size(rtxdpMsrInfra{}), xdp.InfraPrefixes, xdp.InfraSize)
	}
}
