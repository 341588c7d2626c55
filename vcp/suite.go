package vcp

import (
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/vcp/vcpapi"
)

// Suite is the routing suite the VCP runs on its mirrors, speaking the
// router's protocols for the whole cluster and reflecting the RIB to the
// back-ends: BIRD 2 by default (bird.go), FRR as the alternative (frr.go).
// The console reads it through these methods whichever it is.
type Suite interface {
	Status() vcpapi.SuiteStatus // as the suite says it, for people
	Protocols() []vcpapi.Protocol
	Networks() (int, error) // prefixes in its table
	RoutesFor(addr netip.Addr) []vcpapi.SuiteRoute
	// IGPNeighbors are the OSPF and RIP neighbours it hears now, on
	// the external ports' mirrors.
	IGPNeighbors() []IGPNeighbor
	// Check says whether the suite would take a changed routing section
	// (its own error, with the line, if not), changing nothing;
	// Reconfigure applies it.
	Check(cfg *RoutingConfig) error
	Reconfigure(cfg *RoutingConfig) error
	// AskRIP has RIP and RIPng ask their neighbours for their tables
	// again. The request each sends when it starts went out before the
	// LBs relayed this VCP's mirrors (they follow a VCP once its first
	// table is in), and without it the neighbours' routes come only with
	// their next periodic update, up to 30 s later.
	AskRIP()
	Stop()
}

// IGPNeighbor is an OSPF or RIP neighbour: its address on the port of
// VLAN (its mirror xVLAN), link-local for OSPFv3 and RIPng.
type IGPNeighbor struct {
	Addr netip.Addr
	VLAN uint16
}

// mirrorVLAN is the VLAN of a mirror's name, xVLAN; 0 for another name.
func mirrorVLAN(name string) uint16 {
	v, err := strconv.ParseUint(strings.TrimPrefix(name, "x"), 10, 16)
	if !strings.HasPrefix(name, "x") || err != nil || v == 0 || v > 4094 {
		return 0
	}
	return uint16(v)
}

// StartSuite starts the suite the routing section names. With recovery (a
// VCP taking over) the suite starts in graceful-restart recovery where it
// has one.
//
// The suite restarts a daemon that dies; failed is called once they have
// died crashLimit times within crashWindow (child.go). A suite that does
// not start is a nil Suite, never a nil pointer in one.
func StartSuite(cfg *RoutingConfig, recovery bool, log *slog.Logger, failed func()) (Suite, error) {
	if cfg.Suite == "frr" {
		f, err := StartFRR(cfg, log, failed)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	b, err := StartBIRD(cfg, recovery, log, failed)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Convergence before the back-ends are fed: every external BGP session
// up for feedSettle and the imported routes grown to no new high for as
// long (a peer may send its End-of-RIB before its routes); or feedMaxWait
// at most (a peer that never comes must not keep the back-ends waiting).
//
// A table still arriving climbs to new highs; a table that has arrived
// only swings under its high, by churn, which must not keep the gate
// shut: an Internet table is never still, and the soak's churn swings a
// quarter of the lab's table. A count steady within 1% for feedSettle, the
// gate before, held the back-ends' feed for feedMaxWait after a takeover
// under that churn (docs/reliability.md, finding 41), and letting every probe move by up to
// 1,000 routes made a tiny table's late route count as steady (CI's
// TestFRRSuite). A new high counts when it passes the last by 1% or by one
// route, whichever is more; a session going down forgets the high, as its
// routes will arrive again.
//
// Either suite starts with the back-ends' sessions disabled, and feedGate
// enables them: a back-end that kept its routes through a VCP's restart or
// takeover (graceful restart) must not be sent a partial RIB and
// End-of-RIB, or it would drop, then relearn, every route the peers had not
// re-sent yet.
const (
	feedSettle  = time.Second
	feedMaxWait = 30 * time.Second
	// restartedPeerSettle is how long a peer that restarted itself may
	// take to send its first route after its session is up (holdFeed).
	restartedPeerSettle = 5 * time.Second
)

// feedGate asks probe (are the external sessions up, how many routes)
// every 200 ms, and calls enable once converged. It ends, its work not
// done, when stop closes (the suite stops) or exited does (the process it
// holds the feed of ended: the supervisor's new process has a gate of its
// own, and this one would judge that process by its own clock).
func feedGate(stop, exited <-chan struct{}, log *slog.Logger, probe func() (up bool, routes int, err error), enable func() error) {
	// high: the most routes since the sessions were last all up (-1:
	// none seen); since: when it was last passed; upSince: since when
	// every session has been up (zero: not now).
	start, high, since := time.Now(), -1, time.Now()
	var upSince time.Time
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-exited:
			return
		case <-t.C:
		}
		up, n, err := probe()
		if err != nil {
			continue
		}
		switch {
		case !up:
			upSince, high = time.Time{}, -1
		case upSince.IsZero():
			upSince = time.Now()
		}
		if high < 0 || n-high >= max(1, high/100) {
			high, since = n, time.Now()
		}
		waited := time.Since(start)
		if (up && time.Since(upSince) >= feedSettle && time.Since(since) >= feedSettle) || waited >= feedMaxWait {
			if err := enable(); err != nil {
				log.Error("enable the back-ends' sessions", "err", err)
				continue
			}
			log.Info("RIB to the back-ends", "after", waited.Round(time.Millisecond), "routes", n, "peers_up", up)
			return
		}
	}
}
