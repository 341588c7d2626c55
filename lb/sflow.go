package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/sflow"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
)

// sFlow: the data path samples 1 in N of the frames each external port
// takes in (lb.bpf.c, sample()); the agent sends them, and every port's
// counters each interval, to the collectors as sFlow v5 datagrams from
// the router's agent address with this LB's sub-agent id. A port's
// ifIndex is its VLAN, as the VCP's SNMP agent numbers the router's ports.

// sflowFlush is the longest a sample waits for others to share its
// datagram; sflowBatch the most samples a datagram carries (8 of 128-byte
// headers stay under 1,400 bytes).
const (
	sflowFlush = 100 * time.Millisecond
	sflowBatch = 8
)

// exporter sends the LB's samples and counters. Its export is the LB
// file's, or the router's the VCP sets in its place (SetSFlow); its
// reader starts with the first export and runs while the agent does.
type exporter struct {
	a     *Agent
	start time.Time
	// file is the LB file's export (nil: none).
	file *lbapi.SFlowExport
	// reconf tells run that the export changed.
	reconf chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// export is the export in force (nil: none), cfg it as sent.
	export  *lbapi.SFlowExport
	cfg     *SFlowConfig
	ctx     context.Context // the agent's run; nil before
	running bool
	conn    *net.UDPConn
	// seq numbers the datagrams; flowSeq and counterSeq each port's
	// samples, by index.
	seq                 uint32
	flowSeq, counterSeq [MaxPorts]uint32
	stats               lbapi.SFlowStatus
	// refused counts the exports the API refused.
	refused uint64
	talkers talkers
	flows   flows // IPFIX (ipfix.go)
}

// newExporter is the agent's exporter, with the file's export in force.
// Its socket is opened here, in the agent's network namespace; it only
// sends, so what comes to it is left to its smallest buffer.
func newExporter(a *Agent) (*exporter, error) {
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, fmt.Errorf("sflow: %w", err)
	}
	conn.SetReadBuffer(1)
	e := &exporter{a: a, start: time.Now(), reconf: make(chan struct{}, 1), conn: conn}
	if c := a.cfg.SFlow; c != nil {
		e.file = &lbapi.SFlowExport{From: lbapi.SFlowFromFile, Collectors: c.Collectors, AgentAddress: c.AgentAddress, SubAgent: c.SubAgent,
			CounterInterval: uint32(c.CounterInterval / time.Second), Rates: map[string]uint32{}, IPFIX: lbapi.IPFIXOf(c.IPFIX)}
		for _, p := range a.ports {
			if p.sflowRate > 0 {
				e.file.Rates[p.mac.String()] = p.sflowRate
			}
		}
	}
	e.setExport(e.file)
	return e, nil
}

// setExport puts x in force (nil: none).
func (e *exporter) setExport(x *lbapi.SFlowExport) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.export, e.cfg = x, nil
	if x != nil {
		e.cfg = &SFlowConfig{Collectors: x.Collectors, AgentAddress: x.AgentAddress, SubAgent: x.SubAgent,
			CounterInterval: time.Duration(x.CounterInterval) * time.Second}
		if e.cfg.SubAgent == 0 {
			e.cfg.SubAgent = uint32(e.a.cfg.ID)
		}
	}
	select {
	case e.reconf <- struct{}{}:
	default:
	}
}

// SetSFlow puts the router's export, x, in place of the file's (nil: the
// file's again) and samples each external port at its rate. An export
// that does not check is refused and counted.
func (a *Agent) SetSFlow(x *lbapi.SFlowExport) error {
	e := a.sflow
	if x != nil {
		if err := a.checkExport(x); err != nil {
			e.countRefused()
			a.log.Warn("sflow export refused", "err", err)
			return err
		}
		x.From = lbapi.SFlowFromVCP
	} else {
		x = e.file
	}
	e.setExport(x)
	a.mu.Lock()
	a.applySampleRates()
	a.mu.Unlock()
	a.log.Info("sflow export", "from", fromOf(x), "collectors", collectorsOf(x))
	return e.ensureRunning()
}

func fromOf(x *lbapi.SFlowExport) string {
	if x == nil {
		return "none"
	}
	return x.From
}

func collectorsOf(x *lbapi.SFlowExport) []netip.AddrPort {
	if x == nil {
		return nil
	}
	return x.Collectors
}

// checkExport checks an export from the API: collectors, agent address,
// interval, and rates for ports this LB has (their MACs made canonical).
func (a *Agent) checkExport(x *lbapi.SFlowExport) error {
	if x.From != "" {
		return errors.New("sflow: from is the LB's to say")
	}
	if len(x.Collectors) == 0 && x.IPFIX == nil {
		return errors.New("sflow: no collectors (sFlow's, or ipfix's)")
	}
	if err := sflow.CheckCollectors(x.Collectors); err != nil {
		return fmt.Errorf("sflow: %w", err)
	}
	if f := x.IPFIX; f != nil {
		if err := sflow.CheckIPFIX(f.Collectors, time.Duration(f.ActiveTimeout)*time.Second, time.Duration(f.IdleTimeout)*time.Second); err != nil {
			return fmt.Errorf("sflow %w", err)
		}
	}
	if !sflow.Unicast(x.AgentAddress) {
		return fmt.Errorf("sflow agent_address %s: a unicast address", x.AgentAddress)
	}
	if err := sflow.CheckInterval(time.Duration(x.CounterInterval) * time.Second); err != nil {
		return fmt.Errorf("sflow counter_interval_s: %w", err)
	}
	if len(x.Rates) > MaxPorts {
		return fmt.Errorf("sflow: %d rates, at most %d", len(x.Rates), MaxPorts)
	}
	rates := map[string]uint32{}
	for s, rate := range x.Rates {
		mac, err := net.ParseMAC(s)
		if err != nil || len(mac) != 6 || a.portByMAC(mac) == nil {
			return fmt.Errorf("sflow rate of %q: not a port of this LB", s)
		}
		if rate > sflow.MaxRate {
			return fmt.Errorf("sflow rate of %s: %d, at most %d", mac, rate, sflow.MaxRate)
		}
		if rate > 0 {
			rates[mac.String()] = rate
		}
	}
	x.Rates = rates
	return nil
}

// portByMAC is the port with the MAC (nil: none).
func (a *Agent) portByMAC(mac net.HardwareAddr) *agentPort {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.ports {
		if bytes.Equal(p.mac, mac) {
			return p
		}
	}
	return nil
}

// applySampleRates samples each external port at the export's rate for
// it, the others not at all. Call with a.mu.
func (a *Agent) applySampleRates() {
	e := a.sflow
	e.mu.Lock()
	x := e.export
	e.mu.Unlock()
	for _, p := range a.ports {
		var rate uint32
		if x != nil && p.role == RoleExternal {
			rate = x.Rates[p.mac.String()]
		}
		if rate == p.sflowRate {
			continue
		}
		if err := a.dp.SetSampleRate(p.ifindex, rate); err != nil {
			a.log.Error("sflow rate", "port", a.portName(p), "err", err)
			continue
		}
		p.sflowRate = rate
	}
}

// exportOf is the export in force (nil: none).
func (e *exporter) exportOf() *lbapi.SFlowExport {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.export
}

// runFrom starts the exporter at the agent's run if an export is in
// force, else at the first one; it stops with ctx.
func (e *exporter) runFrom(ctx context.Context) error {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	return e.ensureRunning()
}

// ensureRunning starts the reader and run once there is an export and a
// run to tie them to.
func (e *exporter) ensureRunning() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running || e.ctx == nil || e.export == nil {
		return nil
	}
	rd, err := e.a.dp.SampleReader()
	if err != nil {
		return fmt.Errorf("sflow: %w", err)
	}
	e.running = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.run(e.ctx, rd)
	}()
	return nil
}

// run reads the samples and sends them, and the counters each interval,
// until ctx ends.
func (e *exporter) run(ctx context.Context, rd *perf.Reader) {
	defer e.conn.Close()
	var pending []portSample
	flush := time.NewTicker(sflowFlush)
	defer flush.Stop()
	counters := time.NewTicker(time.Hour)
	defer counters.Stop()
	records := time.NewTicker(time.Second)
	defer records.Stop()
	samples := make(chan portSample, 1024)
	go e.read(ctx, rd, samples)
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.reconf:
			if c := e.config(); c != nil {
				counters.Reset(c.CounterInterval)
			}
		case s := <-samples:
			if pending = append(pending, s); len(pending) >= sflowBatch {
				e.sendFlows(pending)
				pending = nil
			}
		case <-flush.C:
			// The samples short of a wakeup, out to the reader.
			rd.Flush()
			if len(pending) > 0 {
				e.sendFlows(pending)
				pending = nil
			}
		case <-counters.C:
			e.sendCounters()
		case now := <-records.C:
			e.reportFlows(now)
		}
	}
}

// config is the export as sent (nil: none).
func (e *exporter) config() *SFlowConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

// portSample is a flow sample and the index of the port it was taken on.
type portSample struct {
	index    uint8
	src, dst netip.Addr // the sampled packet's (invalid: not IP)
	sflow.FlowSample
}

// sendFlows sends samples as one datagram, each with its port's sample
// pool and drops, read once per port for the datagram.
func (e *exporter) sendFlows(samples []portSample) {
	type pool struct{ pool, drops uint32 }
	pools := map[uint8]pool{}
	d := &sflow.Datagram{Flows: make([]sflow.FlowSample, 0, len(samples))}
	for _, s := range samples {
		p, ok := pools[s.index]
		if !ok {
			n, drops, _ := e.a.dp.SamplePool(s.index)
			p = pool{uint32(n), uint32(drops)}
			pools[s.index] = p
		}
		s.Pool, s.Drops = p.pool, p.drops
		e.a.routeSample(&s.FlowSample, s.src, s.dst)
		d.Flows = append(d.Flows, s.FlowSample)
	}
	e.send(d)
}

// read turns the data path's records into flow samples.
func (e *exporter) read(ctx context.Context, rd *perf.Reader, out chan<- portSample) {
	go func() { <-ctx.Done(); rd.Close() }()
	for {
		rec, err := rd.Read()
		if errors.Is(err, perf.ErrClosed) {
			return
		}
		if err != nil { // ErrFlushed: what was there is read
			continue
		}
		e.mu.Lock()
		e.stats.Lost += rec.LostSamples
		e.mu.Unlock()
		if rec.LostSamples > 0 {
			continue
		}
		index, length, header, err := ParseSample(rec.RawSample)
		vlan, rate := e.a.sampling(index)
		if err != nil || rate == 0 {
			e.mu.Lock()
			e.stats.Malformed++
			e.mu.Unlock()
			continue
		}
		s := portSample{index: index, FlowSample: sflow.FlowSample{SourceIndex: uint32(vlan), Rate: rate,
			Input: uint32(vlan), FrameLength: length + 4, Stripped: 4, Header: header}}
		p, perr := trace.ParsePacket(header)
		e.mu.Lock()
		if now := time.Now(); perr == nil {
			s.src, s.dst = p.Src, p.Dst
			e.talkers.addPacket(now, p, length, rate)
			e.addFlow(now, p, vlan, rate)
		}
		e.flowSeq[index]++
		s.Sequence = e.flowSeq[index]
		e.stats.Samples++
		e.mu.Unlock()
		select {
		case out <- s:
		case <-ctx.Done():
			return
		}
	}
}

// sendCounters sends each external port's counters.
func (e *exporter) sendCounters() {
	d := &sflow.Datagram{}
	for _, p := range e.a.externalPorts() {
		st, err := e.a.dp.Stats(p.index)
		if err != nil {
			continue
		}
		e.mu.Lock()
		e.counterSeq[p.index]++
		seq := e.counterSeq[p.index]
		e.mu.Unlock()
		c := sflow.CounterSample{Sequence: seq, IfIndex: uint32(p.vlan), IfType: 6, Speed: uint64(p.speedMbps()) * 1_000_000, Direction: 1,
			InOctets: st.RxBytes, InUcast: uint32(st.RxPackets), OutOctets: st.TxBytes, OutUcast: uint32(st.TxPackets)}
		if p.link.AdminUp {
			c.Status |= 1
		}
		if p.link.OperState == "up" {
			c.Status |= 2
		}
		d.Counters = append(d.Counters, c)
	}
	if len(d.Counters) > 0 {
		e.send(d)
	}
}

// send completes d (agent, sequence, uptime) and sends it to every
// collector.
func (e *exporter) send(d *sflow.Datagram) {
	e.mu.Lock()
	cfg := e.cfg
	if cfg == nil {
		e.mu.Unlock()
		return
	}
	e.seq++
	d.Agent, d.SubAgent, d.Sequence, d.UptimeMs = cfg.AgentAddress, cfg.SubAgent, e.seq, uint32(time.Since(e.start).Milliseconds())
	e.mu.Unlock()
	b, err := d.Marshal()
	if err != nil {
		return
	}
	sent, failed := e.writeTo(cfg.Collectors, b)
	e.mu.Lock()
	e.stats.Datagrams += sent
	e.stats.SendErrors += failed
	e.mu.Unlock()
}

// writeTo sends b to every collector: how many took it, how many failed.
func (e *exporter) writeTo(collectors []netip.AddrPort, b []byte) (sent, failed uint64) {
	for _, c := range collectors {
		if _, err := e.conn.WriteToUDPAddrPort(b, c); err != nil {
			failed++
		} else {
			sent++
		}
	}
	return sent, failed
}

// status is the export and its counters (nil: no export in force).
func (e *exporter) status() *lbapi.SFlowStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.export == nil {
		return nil
	}
	s := e.stats
	s.Export, s.Refused, s.Routes = e.export, e.refused, e.a.routes.lookups()
	if e.export.IPFIX != nil {
		ipfix := e.flows.status
		s.IPFIX = &ipfix
	}
	s.Top = e.talkers.top(time.Now())
	return &s
}

// sampling is the VLAN of the port of an index and its sampling rate (0:
// none, or no such port).
func (a *Agent) sampling(index uint8) (vlan uint16, rate uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(index) < len(a.ports) && a.ports[index].role == RoleExternal {
		return a.ports[index].vlan, a.ports[index].sflowRate
	}
	return 0, 0
}

// portByIndex is the port of an index (nil: none). A port's index and name
// do not change while the agent runs.
func (a *Agent) portByIndex(index uint8) *agentPort {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(index) < len(a.ports) {
		return a.ports[index]
	}
	return nil
}

// externalPorts are copies of the external ports as they are now (their
// links' states with them).
func (a *Agent) externalPorts() []agentPort {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []agentPort
	for _, p := range a.ports {
		if p.role == RoleExternal {
			out = append(out, *p)
		}
	}
	return out
}

// speedMbps is the port's speed as its driver says, else as configured.
func (p *agentPort) speedMbps() uint32 {
	if p.link.SpeedMbps > 0 {
		return p.link.SpeedMbps
	}
	return p.speed
}

// close closes the exporter's socket (run closes it too, if it ran).
func (e *exporter) close() {
	e.conn.Close()
}

// countRefused counts an export the API refused.
func (e *exporter) countRefused() {
	e.mu.Lock()
	e.refused++
	e.mu.Unlock()
}

// routeSample gives a sample of a packet from src to dst its route,
// where known: the port it leaves by (Output) and the extended router
// data (next hop, the source's and the destination's prefix lengths).
func (a *Agent) routeSample(s *sflow.FlowSample, src, dst netip.Addr) {
	if !dst.IsValid() {
		return
	}
	now := time.Now()
	to, ok := a.routes.get(dst, now)
	if !ok || to.bits < 0 {
		return
	}
	from, _ := a.routes.get(src, now)
	s.Output = uint32(to.vlan)
	if to.nextHop.IsValid() {
		s.Router = &sflow.RouterData{NextHop: to.nextHop, DstMask: uint32(to.bits), SrcMask: uint32(max(from.bits, 0))}
	}
}
