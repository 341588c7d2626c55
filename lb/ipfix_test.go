package lb

import (
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
)

// TestIPFIXFlows: samples summed into flows by addresses, ports and the
// port they came in by, each counted as rate packets of its IP length;
// a flow reported once its active timeout is up (and summed anew), and a
// last time once idle, then forgotten; a new flow past maxFlows counted,
// not summed.
func TestIPFIXFlows(t *testing.T) {
	col, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	a := &Agent{cfg: &AgentConfig{}, log: slog.Default()}
	a.cfg.ID = 5
	a.routes = newRouteCache("", nil)
	e, err := newExporter(a)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.setExport(&lbapi.SFlowExport{From: lbapi.SFlowFromVCP, AgentAddress: netip.MustParseAddr("192.0.2.1"), CounterInterval: 20,
		IPFIX: &lbapi.IPFIXExport{Collectors: []netip.AddrPort{col.LocalAddr().(*net.UDPAddr).AddrPort()}, ActiveTimeout: 10, IdleTimeout: 2}})
	pkt := func(f []byte) trace.Packet {
		p, err := trace.ParsePacket(f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	frame := eth(macExt0, macHost, 0x0800, udp(ipHostA, ipHostB, 1000, 2000)) // 46 bytes of IP
	other := eth(macExt0, macHost, 0x0800, udp(ipHostA, ipHostB, 1001, 2000))
	t0 := time.Now()
	e.mu.Lock()
	e.addFlow(t0, pkt(frame), 10, 100)
	e.addFlow(t0.Add(time.Second), pkt(frame), 10, 100)
	e.addFlow(t0.Add(time.Second), pkt(frame), 11, 100) // another port in: another flow
	e.addFlow(t0.Add(time.Second), pkt(other), 10, 50)
	e.mu.Unlock()

	read := func() map[uint32][2]uint64 { // by ingress and source port: octets, packets
		t.Helper()
		col.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 2048)
		n, err := col.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		b := buf[:n]
		if binary.BigEndian.Uint32(b[12:]) != 5 {
			t.Errorf("observation domain %d, want the LB's id", binary.BigEndian.Uint32(b[12:]))
		}
		out := map[uint32][2]uint64{}
		for o := 16; o+4 <= len(b); {
			id, l := binary.BigEndian.Uint16(b[o:]), int(binary.BigEndian.Uint16(b[o+2:]))
			if id == 256 {
				for r := b[o+4 : o+l]; len(r) >= 59; r = r[59:] {
					out[binary.BigEndian.Uint32(r[32:])<<16|uint32(binary.BigEndian.Uint16(r[52:]))] = [2]uint64{binary.BigEndian.Uint64(r[16:]), binary.BigEndian.Uint64(r[24:])}
				}
			}
			o += l
		}
		return out
	}
	// Idle at 3 s: all three flows, for the last time.
	e.reportFlows(t0.Add(3 * time.Second))
	got := read()
	if got[10<<16|1000] != [2]uint64{2 * 100 * 46, 200} || got[11<<16|1000] != [2]uint64{100 * 46, 100} || got[10<<16|1001] != [2]uint64{50 * 46, 50} || len(got) != 3 {
		t.Errorf("records %v", got)
	}
	if e.flows.status.Flows != 0 || e.flows.status.Records != 3 {
		t.Errorf("after the idle report: %+v", e.flows.status)
	}
	// A flow sampled every second: reported at its active timeout, summed anew.
	e.mu.Lock()
	for i := range 11 {
		e.addFlow(t0.Add(time.Duration(i)*time.Second), pkt(frame), 10, 10)
	}
	e.mu.Unlock()
	e.reportFlows(t0.Add(10500 * time.Millisecond))
	if got := read(); got[10<<16|1000] != [2]uint64{11 * 10 * 46, 110} {
		t.Errorf("the active report %v", got)
	}
	if e.flows.status.Flows != 1 {
		t.Errorf("the active flow forgotten: %+v", e.flows.status)
	}
	e.mu.Lock()
	clear(e.flows.table)
	for i := range maxFlows + 5 {
		e.addFlow(t0, pkt(eth(macExt0, macHost, 0x0800, udp(ipHostA, ipHostB, uint16(i), uint16(i>>16)))), 10, 1)
	}
	e.mu.Unlock()
	if e.flows.status.Overflow != 5 || len(e.flows.table) != maxFlows {
		t.Errorf("past maxFlows: %d flows, overflow %d", len(e.flows.table), e.flows.status.Overflow)
	}
}
