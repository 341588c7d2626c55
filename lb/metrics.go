package lb

import (
	"maps"
	"slices"

	"github.com/msr-router/msr/internal/metrics"
)

// The LB's metrics (docs/operations.md lists every agent's).
var (
	lbPortPackets  = metrics.Desc("lb_port_packets_total", "Frames the LB's data path received (rx) on a port or sent (tx) out of it.", "port", "role", "direction")
	lbPortBytes    = metrics.Desc("lb_port_bytes_total", "Bytes the LB's data path received (rx) on a port or sent (tx) out of it.", "port", "role", "direction")
	lbModule       = metrics.Desc("lb_module_packets_total", "Frames each module of the LB's data path (docs/lb.md) handled, by ingress port.", "port", "module")
	lbDropped      = metrics.Desc("lb_dropped_packets_total", "Frames the LB's data path dropped, by ingress port and reason.", "port", "reason")
	lbPolice       = metrics.Desc("lb_police_packets_total", "Packets to the router itself, by policing class and what became of them (passed, dropped_source, dropped_class).", "class", "verdict")
	lbPoliceRate   = metrics.Desc("lb_police_rate_pps", "Control-plane policing's rate for a class, as a whole and per source (0: no limit).", "class", "scope")
	lbTableGen     = metrics.Desc("lb_table_generation", "The generation of the balancing table the LB holds from the VCP (0: none).")
	lbTableSlots   = metrics.Desc("lb_table_slots", "Slots of the LB's balancing table per back-end (its MAC).", "backend")
	lbBackendUp    = metrics.Desc("lb_backend_up", "1 while a back-end's hellos are current and it does not ask for no flows.", "backend", "name")
	lbFlowletGap   = metrics.Desc("lb_flowlet_gap_seconds", "The gap after which a flow may move in flowlet mode.")
	lbDIST         = metrics.Desc("lb_dist_frames_total", "DIST control frames on a port, by counter (sent, received, refused by reason).", "port", "counter")
	lbPortUp       = metrics.Desc("lb_port_up", "1 while a port is operationally up (administratively up with carrier), as the LB's kernel says.", "port", "role")
	lbPortSpeed    = metrics.Desc("lb_port_speed_bytes", "A port's link speed in bytes per second as its driver reports it (0: unknown), as node_exporter's node_network_speed_bytes.", "port", "role")
	lbPortMTU      = metrics.Desc("lb_port_mtu_bytes", "A port's MTU.", "port", "role")
	lbPortChanges  = metrics.Desc("lb_port_link_changes_total", "A port's operational state changes since the agent started.", "port", "role")
	lbCapacityDrop = metrics.Desc("lb_cap_dropped_packets_total", "Frames the LB's capacity caps dropped (capacity_pps, internal ports' too).")
)

// Metrics is the LB's collector for /metrics: its status, read at each
// scrape.
func (a *Agent) Metrics() *metrics.Collector {
	return metrics.NewCollector(func(emit metrics.Emit) {
		s := a.Status()
		for _, p := range s.Ports {
			emit(lbPortUp, metrics.Gauge, metrics.Bool(p.Link.Up), p.Name, p.Role)
			emit(lbPortSpeed, metrics.Gauge, float64(p.Link.SpeedMbps)*1e6/8, p.Name, p.Role)
			emit(lbPortMTU, metrics.Gauge, float64(p.Link.MTU), p.Name, p.Role)
			emit(lbPortChanges, metrics.Counter, float64(p.Link.Changes), p.Name, p.Role)
			if p.Stats == nil {
				continue
			}
			emit(lbPortPackets, metrics.Counter, float64(p.Stats.RxPackets), p.Name, p.Role, "rx")
			emit(lbPortPackets, metrics.Counter, float64(p.Stats.TxPackets), p.Name, p.Role, "tx")
			emit(lbPortBytes, metrics.Counter, float64(p.Stats.RxBytes), p.Name, p.Role, "rx")
			emit(lbPortBytes, metrics.Counter, float64(p.Stats.TxBytes), p.Name, p.Role, "tx")
			for _, m := range slices.Sorted(maps.Keys(p.Stats.Modules)) {
				emit(lbModule, metrics.Counter, float64(p.Stats.Modules[m]), p.Name, m)
			}
			for _, d := range slices.Sorted(maps.Keys(p.Stats.Drops)) {
				emit(lbDropped, metrics.Counter, float64(p.Stats.Drops[d]), p.Name, d)
			}
		}
		for _, c := range s.Police {
			emit(lbPolice, metrics.Counter, float64(c.Passed), c.Class, "passed")
			emit(lbPolice, metrics.Counter, float64(c.DroppedSource), c.Class, "dropped_source")
			emit(lbPolice, metrics.Counter, float64(c.DroppedClass), c.Class, "dropped_class")
			emit(lbPoliceRate, metrics.Gauge, float64(c.PPS), c.Class, "class")
			emit(lbPoliceRate, metrics.Gauge, float64(c.PerSourcePPS), c.Class, "source")
		}
		emit(lbTableGen, metrics.Gauge, float64(s.Table.Generation))
		for _, mac := range slices.Sorted(maps.Keys(s.Table.Shares)) {
			emit(lbTableSlots, metrics.Gauge, float64(s.Table.Shares[mac]), mac)
		}
		for _, b := range s.Backends {
			emit(lbBackendUp, metrics.Gauge, metrics.Bool(b.Alive && !b.Draining), b.MAC, b.Name)
		}
		emit(lbFlowletGap, metrics.Gauge, float64(s.FlowletGapUs)/1e6)
		for _, port := range slices.Sorted(maps.Keys(s.DIST)) {
			for _, k := range slices.Sorted(maps.Keys(s.DIST[port])) {
				emit(lbDIST, metrics.Counter, float64(s.DIST[port][k]), port, k)
			}
		}
		emit(lbCapacityDrop, metrics.Counter, float64(s.CapDrop))
	}, lbPortUp, lbPortSpeed, lbPortMTU, lbPortChanges, lbPortPackets, lbPortBytes, lbModule, lbDropped, lbPolice, lbPoliceRate, lbTableGen, lbTableSlots, lbBackendUp, lbFlowletGap, lbDIST, lbCapacityDrop)
}
