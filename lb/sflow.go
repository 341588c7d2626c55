package lb

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/sflow"
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

// exporter sends the LB's samples and counters.
type exporter struct {
	cfg   *SFlowConfig
	a     *Agent
	conn  *net.UDPConn
	start time.Time

	mu sync.Mutex
	// seq numbers the datagrams; flowSeq and counterSeq each port's
	// samples, by index.
	seq                 uint32
	flowSeq, counterSeq [MaxPorts]uint32
	stats               lbapi.SFlowStatus
	talkers             talkers
}

func newExporter(a *Agent) (*exporter, error) {
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	return &exporter{cfg: a.cfg.SFlow, a: a, conn: conn, start: time.Now()}, nil
}

// run reads the samples and sends them, and the counters each interval,
// until ctx ends.
func (e *exporter) run(ctx context.Context, rd *perf.Reader) {
	defer e.conn.Close()
	var pending []portSample
	flush := time.NewTicker(sflowFlush)
	defer flush.Stop()
	counters := time.NewTicker(e.cfg.CounterInterval)
	defer counters.Stop()
	samples := make(chan portSample, 1024)
	go e.read(ctx, rd, samples)
	for {
		select {
		case <-ctx.Done():
			return
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
		}
	}
}

// portSample is a flow sample and the index of the port it was taken on.
type portSample struct {
	index uint8
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
		p := e.a.portByIndex(index)
		if err != nil || p == nil || p.role != RoleExternal || p.sflowRate == 0 {
			e.mu.Lock()
			e.stats.Malformed++
			e.mu.Unlock()
			continue
		}
		e.mu.Lock()
		e.talkers.add(time.Now(), header, length, p.sflowRate)
		e.flowSeq[index]++
		s := portSample{index, sflow.FlowSample{Sequence: e.flowSeq[index], SourceIndex: uint32(p.vlan), Rate: p.sflowRate,
			Input: uint32(p.vlan), FrameLength: length + 4, Stripped: 4, Header: header}}
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
	e.seq++
	d.Agent, d.SubAgent, d.Sequence, d.UptimeMs = e.cfg.AgentAddress, e.cfg.SubAgent, e.seq, uint32(time.Since(e.start).Milliseconds())
	e.mu.Unlock()
	b, err := d.Marshal()
	if err != nil {
		return
	}
	for _, c := range e.cfg.Collectors {
		_, err := e.conn.WriteToUDPAddrPort(b, c)
		e.mu.Lock()
		if err != nil {
			e.stats.SendErrors++
		} else {
			e.stats.Datagrams++
		}
		e.mu.Unlock()
	}
}

// status is the export's counters.
func (e *exporter) status() *lbapi.SFlowStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Top = e.talkers.top(time.Now())
	return &s
}

// portByIndex is the port of an index (nil: none). A port's index, role
// (an external one's), VLAN and sampling rate do not change while the
// agent runs.
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
