// Package traffic is msr's traffic instrument: a generator that transmits
// test frames with BPF_PROG_RUN in live-frames mode (bpf/trafficgen.bpf.c)
// and a sink that counts them with XDP (bpf/trafficsink.bpf.c): rate,
// loss, per-flow order and latency. Package bench builds benchmarks with
// it; tests of the data paths use it as traffic and as back-end stand-ins.
package traffic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/inet"
)

// Frame sizes, counted as RFC 2544 does: with the 4-byte FCS the kernel
// does not carry.
const (
	MinFrameSize = 64
	// MinFrameSize6 is the smallest IPv6 test frame: Ethernet 14, IPv6
	// 40, UDP 8, the payload's 16, FCS 4.
	MinFrameSize6 = 82
	MaxFrameSize  = 1518
	FCSLen        = 4
	// MaxFlows is the number of distinct flow ids the payload can carry.
	MaxFlows = 65536
	// MaxDsts is the most destinations a generator walks (bench.h's
	// BENCH_MAX_DSTS): more than MaxFlows, a million and more.
	MaxDsts = 1 << 20
)

// benchMagic marks a test frame's payload: bench.h's BENCH_MAGIC.
const benchMagic = 0x4d53

// vlanTagLen is an 802.1Q tag's length.
const vlanTagLen = 4

// Test addresses: RFC 2544 Appendix C's 198.18.0.0/15, split in two: the
// generator's side sends from 198.18.0.0/16 to 198.19.0.0/16.
var (
	srcBase = [4]byte{198, 18, 0, 0}
	dstBase = [4]byte{198, 19, 0, 0}
)

// IPv6 test addresses: RFC 5180 §5's 2001:2::/48, split in two: the
// generator's side sends from 2001:2::/49 to 2001:2:0:8000::/49, host i
// in the last 16 bits.
var (
	srcBase6 = netip.MustParseAddr("2001:2::").As16()
	dstBase6 = netip.MustParseAddr("2001:2:0:8000::").As16()
	// Dst6 is where IPv6 test frames go without a table.
	Dst6 = netip.MustParsePrefix("2001:2:0:8000::/49")
)

// GenConfig sets up a generator.
type GenConfig struct {
	// Ifname is the interface frames leave by; the generator must be
	// created and run in its network namespace.
	Ifname string
	DstMAC net.HardwareAddr
	Size   int // frame size with FCS, 64..1518
	Flows  int // 1..65536
	// FirstFlow is the first flow's id (0 by default): generators on
	// several CPUs send flows FirstFlow..FirstFlow+Flows-1 each, every
	// flow's frames from one CPU, in order.
	FirstFlow int
	// Rate is the offered load in frames per second; 0 is flat out.
	Rate float64
	// Dsts, if set, gives flow i the destination Dsts[i % len(Dsts)]
	// instead of one in 198.19.0.0/16 (a FIB benchmark spreads its flows
	// over a routing table). With more Dsts than Flows (up to MaxDsts),
	// the frames walk them instead: frame k goes to Dsts[k % len(Dsts)],
	// whatever its flow, so that a DUT sees as many destinations as there
	// are Dsts and the sink counts Flows sequences (UDP test frames only).
	Dsts []netip.Addr
	// IPv6 makes the frames IPv6/UDP test frames (RFC 5180), tagged as
	// Ports say, from 2001:2::/49 to 2001:2:0:8000::/49 or Dsts (then IPv6's).
	IPv6 bool
	// HasXDP says the interfaces (Ifname's and the Ports') already have
	// an XDP program (a sink on them): xdp_pass is not attached.
	HasXDP bool
	// Protos are what the frames are, flow i's Protos[i % len]: UDP test
	// frames (none given: all), or TCP SYNs or ICMP echo requests, a flood
	// aimed at a router's own address (not counted by a sink).
	Protos []Proto
	// Src, if set, is every flow's source address (a host's own) instead
	// of one in 198.18.0.0/16; DstPort, if set, every flow's destination
	// port (179: BGP).
	Src     netip.Addr
	DstPort uint16
	// Ports, if set, are the interfaces the flows leave by instead, flow
	// i by Ports[i % len(Ports)]: several sources from one generator (in
	// one namespace), as two test machines would be.
	Ports []GenPort
}

// Proto is a generator's kind of frame.
type Proto uint8

// The kinds: the IP protocol numbers.
const (
	ProtoUDP  Proto = unix.IPPROTO_UDP
	ProtoTCP  Proto = unix.IPPROTO_TCP  // SYNs
	ProtoICMP Proto = unix.IPPROTO_ICMP // echo requests
)

// GenPort is an interface a generator's flows leave by, and the MAC they
// are sent to there. With a VLAN, its flows carry an 802.1Q tag with that
// id, and their frames are 4 bytes longer than Size (a back-end's routed
// frame on an LB's internal port: it leaves the LB at Size).
type GenPort struct {
	Ifname string
	DstMAC net.HardwareAddr
	VLAN   uint16
	// SrcMACs, if set, are the source MACs the port's flows take in
	// turn, as from hosts on a LAN behind it (else the port's own): an LB
	// picks its internal port by source MAC, so DTX-n spreads only the
	// frames of several hosts.
	SrcMACs []net.HardwareAddr
}

// Check refuses sizes, flow counts and rates the instrument cannot do.
func (c *GenConfig) Check() error {
	switch {
	case c.Size < MinFrameSize || c.Size > MaxFrameSize:
		return fmt.Errorf("frame size %d: use %d to %d bytes", c.Size, MinFrameSize, MaxFrameSize)
	case c.Flows < 1 || c.Flows > MaxFlows:
		return fmt.Errorf("%d flows: use 1 to %d", c.Flows, MaxFlows)
	case c.FirstFlow < 0 || c.FirstFlow+c.Flows > MaxFlows:
		return fmt.Errorf("flows %d to %d: flow ids are 0 to %d", c.FirstFlow, c.FirstFlow+c.Flows-1, MaxFlows-1)
	case c.Rate < 0 || (c.Rate > 0 && c.Rate < 1):
		return fmt.Errorf("rate %v: use at least 1 frame per second, or 0 for flat out", c.Rate)
	case len(c.DstMAC) != 6:
		return errors.New("generator needs a destination MAC")
	case c.Src.IsValid() && !c.Src.Is4():
		return fmt.Errorf("source %v is not IPv4", c.Src)
	case c.IPv6 && c.Size < MinFrameSize6:
		return fmt.Errorf("frame size %d: an IPv6 test frame is %d bytes at least (Ethernet, IPv6, UDP, the 16-byte payload, FCS)", c.Size, MinFrameSize6)
	case c.IPv6 && (c.Src.IsValid() || c.DstPort != 0 || len(c.Protos) > 0):
		return errors.New("IPv6 test frames are UDP from the test addresses: no source, port or protocol to set")
	}
	if c.walks() && (len(c.Dsts) > MaxDsts || len(c.Protos) > 0) {
		return fmt.Errorf("%d destinations for %d flows: at most %d, of UDP test frames", len(c.Dsts), c.Flows, MaxDsts)
	}
	for _, d := range c.Dsts {
		if d.Is6() != c.IPv6 {
			return fmt.Errorf("destination %v: the frames are %s", d, map[bool]string{false: "IPv4", true: "IPv6"}[c.IPv6])
		}
	}
	for _, p := range c.Protos {
		if p != ProtoUDP && p != ProtoTCP && p != ProtoICMP {
			return fmt.Errorf("protocol %d: UDP, TCP or ICMP", p)
		}
	}
	for _, p := range c.Ports {
		for _, m := range p.SrcMACs {
			if len(m) != 6 {
				return fmt.Errorf("port %s: source MAC %v is not 6 bytes", p.Ifname, m)
			}
		}
	}
	return nil
}

// walks says whether the frames walk Dsts rather than each flow having
// its own.
func (c *GenConfig) walks() bool { return len(c.Dsts) > c.Flows }

// Generator transmits test frames out of one interface.
type Generator struct {
	objs    trafficgenObjects
	pass    []link.Link
	ifindex int
	data    []byte
	rate    float64
	// callLimit bounds a paced Blast's calls (SetCallLimit; 0: none).
	callLimit time.Duration
}

// SetCallLimit has a paced Blast make its frames in calls of at most d
// each (0: one call for the whole time, the most accurate). A paced call
// spins on its core for its whole length with that core's softirqs off
// and its migration disabled, and the core's own kernel threads
// (ksoftirqd, its kworkers) wait: the soak's cpu.csv and procs.csv showed
// them runnable for 5-12 s without the CPU, while whatever waits on them
// (an RCU grace period, a flush of per-CPU work, the netlink calls that
// need one) waited with them. Between calls the thread returns to user
// space and the core's waiting threads run. Each call costs tens of
// milliseconds of setup, time without frames, which the program's
// schedule catches up on or skips (pace_skipped_ns).
func (g *Generator) SetCallLimit(d time.Duration) { g.callLimit = d }

// NewGenerator loads the generator program, fills its flow table and
// attaches xdp_pass to the interface. Call it inside the interface's
// namespace.
func NewGenerator(c GenConfig) (*Generator, error) {
	ifi, err := net.InterfaceByName(c.Ifname)
	if err != nil {
		return nil, fmt.Errorf("generator interface: %w", err)
	}
	var ports []port
	for _, p := range c.Ports {
		pi, err := net.InterfaceByName(p.Ifname)
		if err != nil {
			return nil, fmt.Errorf("generator port: %w", err)
		}
		if p.VLAN > 4094 {
			return nil, fmt.Errorf("generator port %s: VLAN %d: use 1 to 4094", p.Ifname, p.VLAN)
		}
		ports = append(ports, port{ifindex: pi.Index, src: pi.HardwareAddr, dst: p.DstMAC, vlan: p.VLAN, srcs: p.SrcMACs})
	}
	g, err := loadGenerator(c, ifi.HardwareAddr, ports)
	if err != nil {
		return nil, err
	}
	g.ifindex = ifi.Index
	attach := []int{}
	if !c.HasXDP {
		attach = append(attach, ifi.Index)
		for _, p := range ports {
			if p.ifindex != ifi.Index {
				attach = append(attach, p.ifindex)
			}
		}
	}
	for _, index := range attach {
		l, err := link.AttachXDP(link.XDPOptions{Program: g.objs.XdpPass, Interface: index})
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("attach xdp to interface %d: %w", index, err)
		}
		g.pass = append(g.pass, l)
	}
	return g, nil
}

// port is a GenPort resolved in the generator's namespace.
type port struct {
	ifindex  int
	src, dst net.HardwareAddr
	vlan     uint16
	srcs     []net.HardwareAddr // hosts behind the port; none: src alone
}

// loadGenerator loads the program for frames from src (or from ports),
// without attaching anything.
func loadGenerator(c GenConfig, src net.HardwareAddr, ports []port) (*Generator, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	spec, err := loadTrafficgen()
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	cfg := trafficgenGenConfig{Flows: uint32(c.Flows), Batch: batchSize(c.Rate), FirstFlow: uint32(c.FirstFlow)}
	if c.walks() {
		cfg.Dsts = uint32(len(c.Dsts))
		spec.Maps["gen_dsts"].MaxEntries = cfg.Dsts
	}
	copy(cfg.DstMac[:], c.DstMAC)
	copy(cfg.SrcMac[:], src)
	frameLen := c.Size - FCSLen
	for _, p := range ports {
		if p.vlan != 0 {
			cfg.TagRoom = vlanTagLen
		}
	}
	if err := spec.Variables["cfg"].Set(cfg); err != nil {
		return nil, fmt.Errorf("configure generator: %w", err)
	}
	g := &Generator{data: make([]byte, frameLen+int(cfg.TagRoom)), rate: c.Rate}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	if err := g.objs.GapNs.Set(gap(c.Rate)); err != nil {
		g.Close()
		return nil, fmt.Errorf("configure generator: %w", err)
	}
	if err := g.fillDsts(c); err != nil {
		g.Close()
		return nil, err
	}
	for i := 0; i < c.Flows; i++ {
		// A walking flow's checksums are made with the destination zero:
		// the program adds each frame's.
		dst := netip.Addr{}
		switch {
		case c.walks() && c.IPv6:
			dst = netip.IPv6Unspecified()
		case c.walks():
			dst = netip.IPv4Unspecified()
		case len(c.Dsts) > 0:
			dst = c.Dsts[(c.FirstFlow+i)%len(c.Dsts)]
		}
		id := c.FirstFlow + i
		f := FlowOf(id, c.Size-FCSLen)
		if dst.IsValid() && !c.IPv6 {
			f = flowTo(f, dst, c.Size-FCSLen)
		}
		if c.IPv6 {
			f = flowOf6(id, f, dst, c.Size-FCSLen)
		}
		if c.Src.IsValid() || c.DstPort != 0 || len(c.Protos) > 0 {
			proto := ProtoUDP
			if len(c.Protos) > 0 {
				proto = c.Protos[id%len(c.Protos)]
			}
			f = reshape(f, c, proto, c.Size-FCSLen)
		}
		if len(ports) > 0 {
			p := ports[id%len(ports)]
			f.Ifindex = uint32(p.ifindex)
			copy(f.SrcMac[:], p.src)
			if len(p.srcs) > 0 {
				copy(f.SrcMac[:], p.srcs[id/len(ports)%len(p.srcs)])
			}
			copy(f.DstMac[:], p.dst)
			f.Vlan = p.vlan
		}
		if err := g.objs.GenFlows.Put(uint32(i), &f); err != nil {
			g.Close()
			return nil, fmt.Errorf("fill generator flows: %w", err)
		}
	}
	return g, nil
}

// fillDsts puts the destinations walked into gen_dsts, in batches.
func (g *Generator) fillDsts(c GenConfig) error {
	if !c.walks() {
		return nil
	}
	keys := make([]uint32, len(c.Dsts))
	vals := make([]trafficgenGenDst, len(c.Dsts))
	for i, d := range c.Dsts {
		keys[i] = uint32(i)
		if c.IPv6 {
			vals[i].Daddr6 = d.As16()
		} else {
			a := d.As4()
			vals[i].Daddr = binary.NativeEndian.Uint32(a[:])
		}
	}
	if _, err := g.objs.GenDsts.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("fill the generator's destinations: %w", err)
	}
	return nil
}

// FlowOf returns flow i of a run with frames of frameLen bytes (no FCS).
// Addresses step through the test networks; ports are pseudorandom, as
// RFC 4814 §4.5 asks, so that hashing devices see realistic spread.
func FlowOf(i, frameLen int) trafficgenGenFlow {
	src, dst := srcBase, dstBase
	host := uint16(i%65534 + 1)
	binary.BigEndian.PutUint16(src[2:], host)
	binary.BigEndian.PutUint16(dst[2:], host)
	h := mix32(uint32(i) + 1)
	f := trafficgenGenFlow{
		Saddr: binary.NativeEndian.Uint32(src[:]),
		Daddr: binary.NativeEndian.Uint32(dst[:]),
		Sport: htons(uint16(1024 + h%64512)),
		Dport: htons(uint16(1024 + (h>>16)%64512)),
	}
	f.IpCheck = htons(ipv4Checksum(src, dst, uint16(frameLen-14)))
	return f
}

// flowOf6 makes flow i (f, from FlowOf: its ports) an IPv6 one, to dst
// or, if not valid, to host i of 2001:2:0:8000::/49, with the checksum sum
// of its frame of frameLen bytes but for seq and tx_ns (bench.h).
func flowOf6(i int, f trafficgenGenFlow, dst netip.Addr, frameLen int) trafficgenGenFlow {
	src, d := srcBase6, dstBase6
	host := uint16(i%65534 + 1)
	binary.BigEndian.PutUint16(src[14:], host)
	binary.BigEndian.PutUint16(d[14:], host)
	if dst.IsValid() {
		d = dst.As16()
	}
	f.Saddr, f.Daddr, f.IpCheck = 0, 0, 0
	f.Ipv6, f.Saddr6, f.Daddr6 = 1, src, d
	udpLen := frameLen - 14 - 40
	// The pseudo-header (RFC 8200 §8.1), the UDP header with checksum
	// zero, the payload with seq and tx_ns zero, the padding's zeros.
	b := make([]byte, 40+udpLen)
	copy(b, src[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint32(b[32:], uint32(udpLen))
	b[39] = unix.IPPROTO_UDP
	u := b[40:]
	binary.NativeEndian.PutUint16(u[0:], f.Sport)
	binary.NativeEndian.PutUint16(u[2:], f.Dport)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	binary.BigEndian.PutUint16(u[8:], benchMagic)
	binary.NativeEndian.PutUint16(u[10:], uint16(i))
	for j := 0; j+1 < len(b); j += 2 {
		f.Csum6 += uint32(binary.NativeEndian.Uint16(b[j:]))
	}
	return f
}

// flowTo re-aims flow f at dst.
func flowTo(f trafficgenGenFlow, dst netip.Addr, frameLen int) trafficgenGenFlow {
	var src [4]byte
	binary.NativeEndian.PutUint32(src[:], f.Saddr)
	d := dst.As4()
	f.Daddr = binary.NativeEndian.Uint32(d[:])
	f.IpCheck = htons(ipv4Checksum(src, d, uint16(frameLen-14)))
	return f
}

// reshape gives flow f the config's source address and destination port,
// protocol proto, and the checksums that go with them.
func reshape(f trafficgenGenFlow, c GenConfig, proto Proto, frameLen int) trafficgenGenFlow {
	var src, dst [4]byte
	binary.NativeEndian.PutUint32(src[:], f.Saddr)
	binary.NativeEndian.PutUint32(dst[:], f.Daddr)
	if c.Src.IsValid() {
		src = c.Src.As4()
		f.Saddr = binary.NativeEndian.Uint32(src[:])
	}
	if c.DstPort != 0 {
		f.Dport = htons(c.DstPort)
	}
	totalLen := uint16(frameLen - 14)
	switch proto {
	case ProtoTCP:
		totalLen = uint16(trafficgenGenLenGEN_SYN_LEN)
		syn := make([]byte, 20)
		binary.NativeEndian.PutUint16(syn[0:], f.Sport)
		binary.NativeEndian.PutUint16(syn[2:], f.Dport)
		binary.BigEndian.PutUint32(syn[4:], uint32(trafficgenGenLenGEN_SYN_SEQ))
		syn[12], syn[13] = 5<<4, 0x02 // data offset 5 words; SYN
		binary.BigEndian.PutUint16(syn[14:], uint16(trafficgenGenLenGEN_SYN_WINDOW))
		f.L4Check = htons(inet.Checksum(append(pseudoHeader(src, dst, unix.IPPROTO_TCP, len(syn)), syn...)))
	case ProtoICMP:
		totalLen = uint16(trafficgenGenLenGEN_ECHO_LEN)
		echo := []byte{8, 0, 0, 0, 0, 0, 0, 0}
		binary.NativeEndian.PutUint16(echo[4:], f.Sport) // the echo id
		f.L4Check = htons(inet.Checksum(echo))
	}
	f.Proto = uint8(proto)
	h := ipv4Header(src, dst, totalLen, uint8(proto))
	f.IpCheck = htons(inet.Checksum(h))
	return f
}

// pseudoHeader is TCP's and UDP's checksum pseudo-header (RFC 793).
func pseudoHeader(src, dst [4]byte, proto uint8, length int) []byte {
	b := append(append([]byte{}, src[:]...), dst[:]...)
	return append(b, 0, proto, byte(length>>8), byte(length))
}

// ipv4Header is the header trafficgen writes, checksum zero: version 4,
// IHL 5, TTL 64, no ID, no flags.
func ipv4Header(src, dst [4]byte, totalLen uint16, proto uint8) []byte {
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], totalLen)
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	return h
}

// ipv4Checksum is the RFC 791 header checksum of the UDP test frame's
// header.
func ipv4Checksum(src, dst [4]byte, totalLen uint16) uint16 {
	return inet.Checksum(ipv4Header(src, dst, totalLen, unix.IPPROTO_UDP))
}

// mix32 is a 32-bit integer hash (murmur3's finalizer).
func mix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	return x ^ x>>16
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// Each BPF_PROG_RUN call in live-frames mode that makes more than one
// frame costs about 20 ms of setup here, whatever its size (measured: 64
// frames and 1024 frames both took 20-25 ms a call). Calls are therefore
// sized to last about callTarget at the rate seen so far (or set), and
// never fewer than minBatch frames.
const (
	callTarget = 100 * time.Millisecond
	minBatch   = 1 << 14
	maxBatch   = 1 << 22
)

// Blast transmits for about d, flat out or paced at the generator's rate,
// and returns how many frames the program built. Call it in the
// interface's namespace: the kernel resolves ingress_ifindex there.
func (g *Generator) Blast(d time.Duration) (uint64, error) {
	start := time.Now()
	first := g.Sent()
	batch := uint64(minBatch)
	for {
		elapsed := time.Since(start)
		if elapsed >= d {
			break
		}
		sent := g.Sent() - first
		switch {
		case g.rate > 0:
			// Paced by the program, in as few calls as possible: each
			// call's setup is time without frames.
			left := d - elapsed
			if g.callLimit > 0 {
				left = min(left, g.callLimit)
			}
			batch = uint64(g.rate*left.Seconds()) + 1
		case sent > 0:
			batch = max(uint64(float64(sent)/elapsed.Seconds()*min(callTarget, d-elapsed).Seconds()), minBatch)
		}
		if err := g.run(min(batch, maxBatch)); err != nil {
			return g.Sent() - first, err
		}
	}
	return g.Sent() - first, nil
}

// Burst transmits n frames back to back, flat out, in one run: RFC 2544's
// back-to-back burst. The generator must have no rate set.
func (g *Generator) Burst(n uint64) error {
	if g.rate > 0 {
		return fmt.Errorf("a burst is flat out: the generator has a rate")
	}
	return g.run(n)
}

// Send transmits n frames in one run, at the generator's rate (flat out
// without one), changing rate where ChangeRate said.
func (g *Generator) Send(n uint64) error { return g.run(n) }

// ChangeRate sets the rate of every frame from the after-th frame the
// generator builds from now on, in the middle of a run without pausing
// (RFC 2544's recovery test lowers the rate so). A paced generator keeps
// the batch size of its first rate; one made flat out stays so.
func (g *Generator) ChangeRate(rate float64, after uint64) error {
	if g.rate == 0 || rate <= 0 {
		return fmt.Errorf("a rate change is from one rate to another")
	}
	if err := g.objs.GapNextNs.Set(gap(rate)); err != nil {
		return err
	}
	return g.objs.GapNextAt.Set(g.Sent() + max(after, 1))
}

// RateChanged is when (CLOCK_MONOTONIC) the rate ChangeRate set took
// over, 0 before it has.
func (g *Generator) RateChanged() time.Duration {
	var ns uint64
	g.objs.GapChangedNs.Get(&ns)
	return time.Duration(ns)
}

// gap is the time between frames at rate, in nanoseconds (0: flat out).
func gap(rate float64) uint64 {
	if rate <= 0 {
		return 0
	}
	return uint64(1e9 / rate)
}

// batchSize is how many frames the kernel builds before it transmits them
// together (each transmit costs microseconds: it wakes the peer's NAPI).
// Flat out, 64 amortizes it; paced, a batch leaves at once every batch
// gaps, so batches shrink to about pacedBatchTime of frames: the bursts
// the DUT sees stay short, and the generator keeps enough time in hand to
// catch up when its core is taken from it for a while.
func batchSize(rate float64) uint32 {
	if rate == 0 {
		return 64
	}
	return uint32(min(max(rate*pacedBatchTime.Seconds(), 1), 64))
}

const pacedBatchTime = 32 * time.Microsecond

// run makes n frames in one BPF_PROG_RUN call.
func (g *Generator) run(n uint64) error {
	ctx := trafficgenXdpMd{DataEnd: uint32(len(g.data)), IngressIfindex: uint32(g.ifindex)}
	// The run's batches start at its first frame.
	if err := g.objs.RunFrames.Set(uint64(0)); err != nil {
		return fmt.Errorf("run generator: %w", err)
	}
	// In live-frames mode the kernel reports no verdict (retval 0): Sent,
	// counted by the program, says what was built.
	_, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{
		Data: g.data, Repeat: uint32(n), Context: ctx,
		Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, BatchSize: batchSize(g.rate),
	})
	if err != nil {
		return fmt.Errorf("run generator: %w", err)
	}
	return nil
}

// Window is the time between the first and the last frame the program
// built since ResetWindow: the time the frames were offered in, without
// the runs' setup (tens of milliseconds each).
func (g *Generator) Window() time.Duration {
	var first, last uint64
	g.objs.FirstTxNs.Get(&first)
	g.objs.LastTxNs.Get(&last)
	if first == 0 || last < first {
		return 0
	}
	return time.Duration(last - first)
}

// TxSpan is when (CLOCK_MONOTONIC) the program built its first frame
// since ResetWindow and its last: generators on several CPUs offered
// their frames from the earliest first to the latest last.
func (g *Generator) TxSpan() (first, last time.Duration) {
	var f, l uint64
	g.objs.FirstTxNs.Get(&f)
	g.objs.LastTxNs.Get(&l)
	return time.Duration(f), time.Duration(l)
}

// ResetWindow starts a new sending window at the next frame.
func (g *Generator) ResetWindow() error { return g.objs.FirstTxNs.Set(uint64(0)) }

// Sent is how many frames the program has built.
func (g *Generator) Sent() uint64 {
	var n uint64
	g.objs.Sent.Get(&n)
	return n
}

// Close detaches and unloads the generator.
func (g *Generator) Close() error {
	for _, l := range g.pass {
		l.Close()
	}
	return g.objs.Close()
}

// PaceStats says how often a paced generator fell behind by more than
// PACE_MAX_DEBT frames and restarted its schedule, and the time it
// skipped.
func (g *Generator) PaceStats() (restarts uint64, skipped time.Duration) {
	var ns uint64
	g.objs.PaceRestarts.Get(&restarts)
	g.objs.PaceSkippedNs.Get(&ns)
	return restarts, time.Duration(ns)
}
