package vcp

import (
	"maps"
	"slices"
	"strconv"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/metrics"
)

// The VCP's metrics: the router as one box (docs/operations.md lists
// every agent's).
var (
	vcpActive       = metrics.Desc("vcp_active", "1 on the active VCP (VRRP master), 0 on a standby.")
	vcpElements     = metrics.Desc("vcp_elements", "Elements the VCP hears, by role and whether their hellos are current.", "role", "alive")
	vcpPortPackets  = metrics.Desc("vcp_router_port_packets_total", "Frames on each port of the router as its LBs count them, received (rx) and sent (tx).", "port", "role", "direction")
	vcpPortBytes    = metrics.Desc("vcp_router_port_bytes_total", "Bytes on each port of the router as its LBs count them, received (rx) and sent (tx).", "port", "role", "direction")
	vcpPortUp       = metrics.Desc("vcp_router_port_up", "1 while an external port of the router is operationally up (its LB alive, its link up).", "port", "vlan")
	vcpPortChanges  = metrics.Desc("vcp_router_port_changes_total", "An external port's operational state changes since the VCP started.", "port", "vlan")
	vcpRouterPkts   = metrics.Desc("vcp_router_packets_total", "Frames on the router's external ports together: the router as one box.", "direction")
	vcpBackendRx    = metrics.Desc("vcp_backend_received_packets_total", "Frames each back-end received, as its hellos report: its share of the router's traffic.", "backend")
	vcpBackendRoute = metrics.Desc("vcp_backend_fib_routes", "Routes in each back-end's FIB, as its hellos report.", "backend")
	vcpBackendLoad  = metrics.Desc("vcp_backend_load_factor", "The factor the VCP scales a back-end's weight by when it drops for want of capacity (1: none).", "backend")
	vcpWeight       = metrics.Desc("vcp_table_weight", "Each back-end's weight in each LB's table.", "lb", "backend")
	vcpTableGen     = metrics.Desc("vcp_table_generation", "The table generation the VCP last sent each LB, and whether the LB holds it.", "lb", "applied")
	vcpSession      = metrics.Desc("vcp_suite_session_up", "1 while a session of the routing suite is up (BGP Established, OSPF running), by protocol name and kind.", "protocol", "kind")
	vcpSuiteRoutes  = metrics.Desc("vcp_suite_routes", "Routes a session of the routing suite imported from its peer and exported to it.", "protocol", "direction")
	vcpDIST         = metrics.Desc("vcp_dist_frames_total", "DIST control frames the VCP sent, accepted and refused, by counter.", "counter")
	vcpLimitHits    = metrics.Desc("vcp_prefix_limit_hits_total", "Times the suite shut a BGP session for max_prefixes, by peer.", "peer")
	vcpAllSilent    = metrics.Desc("vcp_all_backends_silent_total", "Times every back-end fell silent at once and the LBs' tables kept them all.")
)

// Metrics is the VCP's collector for /metrics: the router as one box
// (its ports summed from the LBs, each back-end's share, the suite's
// sessions) and the VCP's own state, read at each scrape.
func (a *Agent) Metrics() *metrics.Collector {
	return metrics.NewCollector(func(emit metrics.Emit) {
		s := a.Status()
		emit(vcpActive, metrics.Gauge, metrics.Bool(s.Role == "active"))
		count := map[[2]string]int{}
		for _, e := range s.Elements {
			count[[2]string{e.Role, strconv.FormatBool(e.Alive)}]++
			if e.Role != "router" {
				continue
			}
			for _, p := range e.Ports {
				if p.Role == dist.PortInternal.String() {
					emit(vcpBackendRx, metrics.Counter, float64(p.RxPackets), e.Name)
				}
			}
			emit(vcpBackendRoute, metrics.Gauge, float64(e.Installed), e.Name)
			emit(vcpBackendLoad, metrics.Gauge, e.LoadFactor, e.Name)
		}
		for _, role := range []string{"lb", "router", "vcp"} {
			for _, alive := range []string{"true", "false"} {
				emit(vcpElements, metrics.Gauge, float64(count[[2]string{role, alive}]), role, alive)
			}
		}
		ports := a.Ports()
		for _, p := range ports.Ports {
			emit(vcpPortPackets, metrics.Counter, float64(p.Counters.RxPackets), p.Name, p.Role, "rx")
			emit(vcpPortPackets, metrics.Counter, float64(p.Counters.TxPackets), p.Name, p.Role, "tx")
			emit(vcpPortBytes, metrics.Counter, float64(p.Counters.RxBytes), p.Name, p.Role, "rx")
			emit(vcpPortBytes, metrics.Counter, float64(p.Counters.TxBytes), p.Name, p.Role, "tx")
		}
		states := a.PortStates()
		for _, v := range slices.Sorted(maps.Keys(states)) {
			st := states[v]
			emit(vcpPortUp, metrics.Gauge, metrics.Bool(st.Up), st.Name, strconv.Itoa(int(v)))
			emit(vcpPortChanges, metrics.Counter, float64(st.Changes), st.Name, strconv.Itoa(int(v)))
		}
		emit(vcpRouterPkts, metrics.Counter, float64(ports.External.RxPackets), "rx")
		emit(vcpRouterPkts, metrics.Counter, float64(ports.External.TxPackets), "tx")
		for _, t := range s.Tables {
			emit(vcpTableGen, metrics.Gauge, float64(t.Generation), t.LB, strconv.FormatBool(t.Applied))
			for _, b := range slices.Sorted(maps.Keys(t.Weights)) {
				emit(vcpWeight, metrics.Gauge, float64(t.Weights[b]), t.LB, b)
			}
		}
		if suite := a.currentSuite(); suite != nil {
			for _, p := range suite.Protocols() {
				if p.Proto != "BGP" && p.Proto != "OSPF" && p.Proto != "RIP" && p.Proto != "BFD" {
					continue
				}
				up := p.State == "up" && (p.Proto != "BGP" || p.Info == "Established")
				emit(vcpSession, metrics.Gauge, metrics.Bool(up), p.Name, p.Proto)
				emit(vcpSuiteRoutes, metrics.Gauge, float64(p.Imported), p.Name, "imported")
				emit(vcpSuiteRoutes, metrics.Gauge, float64(p.Exported), p.Name, "exported")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.DIST)) {
			emit(vcpDIST, metrics.Counter, float64(s.DIST[k]), k)
		}
		for _, k := range slices.Sorted(maps.Keys(s.PrefixLimitHits)) {
			emit(vcpLimitHits, metrics.Counter, float64(s.PrefixLimitHits[k]), k)
		}
		emit(vcpAllSilent, metrics.Counter, float64(s.AllBackendsSilent))
	}, vcpActive, vcpElements, vcpPortPackets, vcpPortBytes, vcpPortUp, vcpPortChanges, vcpRouterPkts, vcpBackendRx, vcpBackendRoute, vcpBackendLoad, vcpWeight, vcpTableGen,
		vcpSession, vcpSuiteRoutes, vcpDIST, vcpLimitHits, vcpAllSilent)
}
