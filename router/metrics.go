package router

import (
	"maps"
	"slices"
	"strconv"

	"github.com/msr-router/msr/internal/metrics"
)

// The back-end's metrics (docs/operations.md lists every agent's).
var (
	rtPackets   = metrics.Desc("router_packets_total", "Frames the back-end's data path received, and of them those it forwarded.", "what")
	rtBytes     = metrics.Desc("router_bytes_total", "Bytes the back-end's data path received, and of them those it forwarded.", "what")
	rtDropped   = metrics.Desc("router_dropped_packets_total", "Frames the back-end's data path dropped, by reason.", "reason")
	rtSlow      = metrics.Desc("router_slow_path_packets_total", "Frames the data path handed to the agent (the slow path), by reason.", "reason")
	rtSlowDrop  = metrics.Desc("router_slow_path_dropped_packets_total", "Frames the data path dropped rather than hand to the agent, over their reason's rate (slow_path), by reason.", "reason")
	rtSlowEvent = metrics.Desc("router_slow_path_events_total", "What the slow path did: ICMP errors sent and rate-limited, ARP, packets held and released.", "event")
	rtRoutes    = metrics.Desc("router_fib_routes", "Routes in the back-end's FIB.")
	rtRoutes6   = metrics.Desc("router_fib6_routes", "Routes in the back-end's IPv6 FIB.")
	rtGroups6   = metrics.Desc("router_fib6_groups", "The IPv6 FIB's trie groups (each compressed into 64-byte lines).")
	rtLines6    = metrics.Desc("router_fib6_lines", "The IPv6 FIB's 64-byte lines: in use, and in the pool (fib6_lines, allocated at start).", "kind")
	rtFIBChange = metrics.Desc("router_fib_changes_total", "Routes added, changed and deleted in the FIBs since the agent started.")
	rtReady     = metrics.Desc("router_ready", "1 when the back-end serves the router's ports and its FIB holds the RIB feed's table (it takes flows).")
	rtRIBUp     = metrics.Desc("router_rib_session_up", "1 while the RIB feed's iBGP session with the VCP is established.")
	rtRIBPrefix = metrics.Desc("router_rib_prefixes", "Prefixes and paths the RIB feed holds (stale: kept from a session that went).", "kind")
	rtRIBUpdate = metrics.Desc("router_rib_updates_total", "BGP UPDATE messages the RIB feed received.")
	rtACL       = metrics.Desc("router_acl_matches_total", "Packets each rule of the router's ACL matched, by its position and action.", "rule", "action")
	rtNeighbors = metrics.Desc("router_neighbors", "Neighbours the back-end knows on the router's ports.")
	rtBusy      = metrics.Desc("router_busy_cores", "The data path's CPU time per second, in cores (router/busy.go; 0 until measured).")
	rtCapDrop   = metrics.Desc("router_cap_dropped_packets_total", "Frames the back-end's capacity cap dropped (capacity_pps).")
	rtHellos    = metrics.Desc("router_hellos_total", "Hellos the back-end sent, and of them those sent two intervals or more after the one before.", "kind")
	rtDIST      = metrics.Desc("router_dist_frames_total", "DIST control frames the back-end sent, accepted and refused, by counter (role_refused: configuring frames without the VCP's key).", "counter")
	rtMemory    = metrics.Desc("router_memory_bytes", "The back-end's memory by part: the RIB feed's paths (reckoned), the data path's BPF maps (as the kernel charges them), the agent's Go heap, its resident set.", "part")
	rtHelloGap  = metrics.Desc("router_hello_longest_gap_seconds", "The longest time between two of the back-end's hellos since it started (the LBs and VCPs drop it after a hold, 3 intervals).")
)

// Metrics is the back-end's collector for /metrics: its status, read at
// each scrape.
func (a *Agent) Metrics() *metrics.Collector {
	return metrics.NewCollector(func(emit metrics.Emit) {
		s := a.Status()
		if st := s.Stats; st != nil {
			emit(rtPackets, metrics.Counter, float64(st.RxPackets), "received")
			emit(rtPackets, metrics.Counter, float64(st.Forwarded), "forwarded")
			emit(rtBytes, metrics.Counter, float64(st.RxBytes), "received")
			emit(rtBytes, metrics.Counter, float64(st.ForwardedBytes), "forwarded")
			for _, k := range slices.Sorted(maps.Keys(st.Drops)) {
				emit(rtDropped, metrics.Counter, float64(st.Drops[k]), k)
			}
			for _, k := range slices.Sorted(maps.Keys(st.Slow)) {
				emit(rtSlow, metrics.Counter, float64(st.Slow[k]), k)
			}
			for _, k := range slices.Sorted(maps.Keys(st.SlowDropped)) {
				emit(rtSlowDrop, metrics.Counter, float64(st.SlowDropped[k]), k)
			}
			for i := range min(len(st.ACLPermit), len(st.ACLDeny)) {
				emit(rtACL, metrics.Counter, float64(st.ACLPermit[i]), strconv.Itoa(i), "permit")
				emit(rtACL, metrics.Counter, float64(st.ACLDeny[i]), strconv.Itoa(i), "deny")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.SlowPath)) {
			emit(rtSlowEvent, metrics.Counter, float64(s.SlowPath[k]), k)
		}
		emit(rtRoutes, metrics.Gauge, float64(s.Routes))
		emit(rtRoutes6, metrics.Gauge, float64(s.Routes6))
		emit(rtGroups6, metrics.Gauge, float64(s.FIB6Groups))
		emit(rtLines6, metrics.Gauge, float64(s.FIB6LinesUsed), "used")
		emit(rtLines6, metrics.Gauge, float64(s.FIB6Lines), "pool")
		emit(rtFIBChange, metrics.Counter, float64(s.FIBChanges))
		emit(rtReady, metrics.Gauge, metrics.Bool(s.Ready))
		if r := s.RIB; r != nil {
			emit(rtRIBUp, metrics.Gauge, metrics.Bool(r.State == "established"))
			emit(rtRIBPrefix, metrics.Gauge, float64(r.Prefixes), "prefixes")
			emit(rtRIBPrefix, metrics.Gauge, float64(r.Paths), "paths")
			emit(rtRIBPrefix, metrics.Gauge, float64(r.Stale), "stale")
			emit(rtRIBUpdate, metrics.Counter, float64(r.Updates))
		}
		emit(rtNeighbors, metrics.Gauge, float64(len(s.Neighbors)))
		emit(rtBusy, metrics.Gauge, s.Busy)
		emit(rtCapDrop, metrics.Counter, float64(s.CapDrop))
		emit(rtHellos, metrics.Counter, float64(s.Hellos.Sent), "sent")
		emit(rtHellos, metrics.Counter, float64(s.Hellos.Late), "late")
		emit(rtHelloGap, metrics.Gauge, s.Hellos.LongestGapMs/1000)
		emit(rtMemory, metrics.Gauge, float64(s.Memory.RIBBytes), "rib")
		emit(rtMemory, metrics.Gauge, float64(s.Memory.MapsBytes), "maps")
		emit(rtMemory, metrics.Gauge, float64(s.Memory.HeapBytes), "heap")
		emit(rtMemory, metrics.Gauge, float64(s.Memory.RSSBytes), "resident")
		for _, k := range slices.Sorted(maps.Keys(s.DIST)) {
			emit(rtDIST, metrics.Counter, float64(s.DIST[k]), k)
		}
	}, rtPackets, rtBytes, rtDropped, rtSlow, rtSlowDrop, rtSlowEvent, rtRoutes, rtRoutes6, rtGroups6, rtLines6, rtFIBChange, rtReady, rtRIBUp, rtRIBPrefix, rtRIBUpdate, rtACL, rtNeighbors, rtBusy, rtCapDrop,
		rtHellos, rtHelloGap, rtDIST, rtMemory)
}
