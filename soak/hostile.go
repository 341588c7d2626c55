package soak

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The soak's hostile fault (a DIST flood and forged frames from
// outside): h2, an outside host on lb1's port e1, sends for
// hostileFor a flood of control frames — DIST sealed with a wrong key
// (an active VCP's announcement, a back-end's hello, a table for lb1) and
// DIST sealed with the router's own key (a stolen key, or frames replayed
// from inside) — and of random and malformed frames, to lb1's MAC and to
// broadcast; among them, as a hostile neighbour would, ARP
// replies and overriding Neighbor Advertisements claiming ospf1's
// addresses with h2's MAC, and SYNs to the router's inside (every
// back-end's API). The goal: nothing of the soak's traffic lost, every
// DIST frame and every SYN to the inside dropped at the router's edge and
// counted (lb1's e1 counts them, dist_external and infra: DIST is the
// interconnect's, never an external port's), nothing changed (no
// element's state is the forger's, no back-end takes h2's MAC for
// ospf1).

// hostileFor is how long the flood lasts; hostileDIST and hostileJunk
// how many frames of each it sends (about 25,000 frames a second, the
// soak's traffic's rate again).
const (
	hostileFor   = time.Second
	hostileDIST  = 4000
	hostileJunk  = 20000
	hostilePort  = "lb1/e1"
	hostileHost  = "h2"
	lb1PortE1MAC = "02:00:00:00:e1:00"
	// ospf1's addresses on h2's segment, which h2 claims.
	ospf1Addr, ospf1Addr6 = "198.51.100.20", "2001:db8:11::20"
)

// The inside's addresses h2 sends SYNs to: every back-end's API.
var hostileInside = []string{"10.0.0.11", "10.0.0.12", "10.0.0.13"}

// forgedGeneration is the generation of the forged table: an LB that
// took it would say so.
const forgedGeneration = 1 << 30

// flood is a hostile fault: what it sent, what lb1's e1 counted, and what
// changed that the forger asked for ("": nothing).
type flood struct {
	quiet
	dist, junk    uint64
	counted       uint64 // lb1's e1 dist_external drops while it ran
	claims        uint64 // forged ARP replies and advertisements for ospf1
	inside        uint64 // SYNs to the inside
	insideCounted uint64 // lb1's e1 infra drops while it ran
	gtsm          uint64 // single-hop BFD to the router at TTL 64
	gtsmCounted   uint64 // lb1's e1 gtsm drops while it ran
	changed       string
}

func (f *flood) inject(*bench.RouterLab) error {
	before, err := portDrops(hostilePort)
	if err != nil {
		return err
	}
	h2MAC, err := demo.MAC(hostileHost, "eth0")
	if err != nil {
		return err
	}
	if err := f.send(); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the LB's counters are read from its maps: the last frames in
	after, err := portDrops(hostilePort)
	if err != nil {
		return err
	}
	grown := func(why string) uint64 { return after[why] - before[why] }
	f.counted, f.insideCounted, f.gtsmCounted = grown("dist_external"), grown("infra"), grown("gtsm")
	// A claimed change waits for the old MAC's silence (2 s): look after.
	time.Sleep(3 * time.Second)
	f.changed = forgedChanges(h2MAC)
	return nil
}

// forgedChanges says what of the forged frames' asking the router shows:
// a back-end r9 known to a VCP, a table of the forged generation on an
// LB, a back-end that took h2's MAC (forger) for ospf1.
func forgedChanges(forger string) string {
	var changed []string
	for _, b := range demo.Backends {
		st, err := routerapi.Local(b, "").Status()
		if err != nil {
			continue // not running (a fault)
		}
		for _, k := range []string{ospf1Addr + " vlan 11", ospf1Addr6 + " vlan 11"} {
			if st.Neighbors[k] == forger {
				changed = append(changed, fmt.Sprintf("%s took h2's MAC for %s", b, k))
			}
		}
	}
	for _, v := range demo.VCPs {
		es, err := vcpapi.Local(v, "").Elements()
		if err != nil {
			continue // not running (a fault): nothing to take in
		}
		for _, e := range es {
			if e.Name == "r9" {
				changed = append(changed, v+" took in the forged back-end r9")
			}
		}
	}
	for _, lb := range demo.LBs {
		if st, err := demo.LBStatus(lb); err == nil && st.Table.Generation == forgedGeneration {
			changed = append(changed, lb+" installed the forged table")
		}
	}
	return strings.Join(changed, "; ")
}

// send sends the flood from h2's interface, paced over hostileFor.
func (f *flood) send() error {
	// The thief holds the VCP's key: frames from outside are dropped
	// whatever key seals them.
	keys, err := dist.ReadVCPKeys(filepath.Join(demo.RunDir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		return err
	}
	key := keys[0]
	return lab.Raw(demo.LabName, hostileHost, "eth0", func(ifi *net.Interface, send func([]byte) error) error {
		lbMAC, _ := net.ParseMAC(lb1PortE1MAC)
		forger, _ := dist.NewSender(0xbad, dist.Key{ID: 1, Secret: []byte(strings.Repeat("x", 32))})
		thief, _ := dist.NewSender(dist.ElementID("vcp", "vcp9"), key)
		lbID := dist.ElementID("lb", "lb1")
		forged := []dist.Message{
			&dist.VCPAnnounce{State: dist.VCPActive, Priority: 255, APIAddr: netip.IPv4Unspecified()},
			&dist.Hello{Role: dist.RoleRouter, Name: "r9", Capacity: 100000, HelloIntervalMs: 100, HoldMultiplier: 3},
			&dist.TableUpdate{Target: lbID, Generation: forgedGeneration, Mode: dist.ModeHash, Flags: dist.TableFlush | dist.TableLast},
		}
		var frames [][]byte
		for i, m := range forged {
			for _, s := range []*dist.Sender{forger, thief} {
				dst := dist.GroupMAC
				if i == 2 {
					dst = lbMAC
				}
				b, err := s.Seal(dst, ifi.HardwareAddr, m)
				if err != nil {
					return err
				}
				frames = append(frames, b)
			}
		}
		// A hostile neighbour's frames, one in twelve of the flood's.
		neighbourly := hostileNeighbourFrames(ifi.HardwareAddr, lbMAC)
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
		types := []uint16{0x0800, 0x0806, dist.EtherType, 0x8100, 0x86dd, 0x88cc}
		total := hostileDIST + hostileJunk
		start := time.Now()
		junk := make([]byte, 256)
		for i := range total {
			var b []byte
			switch {
			case i%6 == 0 && f.dist < hostileDIST: // DIST, one in six
				b = frames[int(f.dist)%len(frames)]
				f.dist++
			case i%12 == 3:
				k := i / 12 % len(neighbourly)
				b = neighbourly[k]
				switch {
				case k < 2:
					f.claims++
				case k < len(neighbourly)-1:
					f.inside++
				default:
					f.gtsm++
				}
			default:
				n := 14 + rng.IntN(200)
				for j := range junk[:n] {
					junk[j] = byte(rng.Uint32())
				}
				if i%2 == 0 {
					copy(junk, lbMAC)
				} else {
					copy(junk, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
				}
				copy(junk[6:], ifi.HardwareAddr)
				binary.BigEndian.PutUint16(junk[12:], types[rng.IntN(len(types))])
				b = junk[:n]
				f.junk++
			}
			if err := send(b); err != nil {
				return err
			}
			if ahead := time.Duration(i+1)*hostileFor/time.Duration(total) - time.Since(start); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
		}
		return nil
	})
}

// portDrops are an LB port's drops by reason, read from its agent
// (again for up to opWait while it restarts: an overlapping fault's).
func portDrops(port string) (map[string]uint64, error) {
	lb, _, _ := strings.Cut(port, "/")
	st, err := demo.LBStatus(lb)
	for start := time.Now(); err != nil && time.Since(start) < opWait; st, err = demo.LBStatus(lb) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range st.Ports {
		if p.Name == port && p.Stats != nil {
			return p.Stats.Drops, nil
		}
	}
	return nil, fmt.Errorf("%s: no port %s", lb, port)
}

// met says whether the flood's DIST frames were all dropped and counted
// at the edge, and it changed nothing.
func (f *flood) met() bool {
	return f != nil && f.dist > 0 && f.counted >= f.dist && f.insideCounted >= f.inside && f.gtsmCounted >= f.gtsm && f.changed == ""
}

// hostileNeighbourFrames are h2's (mac) claims and probes: an ARP reply
// and an overriding Neighbor Advertisement for ospf1's addresses with
// h2's MAC, broadcast, then a SYN to each inside address's API port, to
// lb1's port (lbMAC), and last a single-hop BFD packet to the router's
// address at TTL 64 (GTSM).
func hostileNeighbourFrames(mac, lbMAC net.HardwareAddr) [][]byte {
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ether := func(dst net.HardwareAddr, etherType uint16, payload []byte) []byte {
		b := append(append(append([]byte{}, dst...), mac...), byte(etherType>>8), byte(etherType))
		return append(b, payload...)
	}
	arp := make([]byte, 28)
	binary.BigEndian.PutUint16(arp[0:], 1)
	binary.BigEndian.PutUint16(arp[2:], 0x0800)
	arp[4], arp[5] = 6, 4
	binary.BigEndian.PutUint16(arp[6:], 2) // a reply
	copy(arp[8:], mac)
	copy(arp[14:], netip.MustParseAddr(ospf1Addr).AsSlice())
	copy(arp[18:], bcast)
	copy(arp[24:], netip.MustParseAddr("198.51.100.1").AsSlice())
	na := make([]byte, 32)
	na[0], na[4] = 136, 0x20 // Neighbor Advertisement, Override
	copy(na[8:], netip.MustParseAddr(ospf1Addr6).AsSlice())
	na[24], na[25] = 2, 1 // the target's link-layer address
	copy(na[26:], mac)
	frames := [][]byte{
		ether(bcast, 0x0806, arp),
		ether(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, 0x86dd, inet.ICMPv6(netip.MustParseAddr(ospf1Addr6), netip.MustParseAddr("ff02::1"), 255, na)),
	}
	syn := make([]byte, 20)
	binary.BigEndian.PutUint16(syn[0:], 40001)
	binary.BigEndian.PutUint16(syn[2:], 8180)
	syn[12], syn[13] = 5<<4, 0x02 // 20 bytes, SYN
	for _, a := range hostileInside {
		frames = append(frames, ether(lbMAC, 0x0800, inet.IPv4(netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr(a), 6, syn)))
	}
	bfd := make([]byte, 8+24)
	binary.BigEndian.PutUint16(bfd[0:], 49152)
	binary.BigEndian.PutUint16(bfd[2:], 3784)
	binary.BigEndian.PutUint16(bfd[4:], uint16(len(bfd)))
	frames = append(frames, ether(lbMAC, 0x0800, inet.IPv4(netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.1"), 17, bfd)))
	return frames
}

// report puts the flood's figures in its entry of the report.
func (f *flood) report(into *FaultReport) {
	if f == nil {
		return
	}
	into.DISTSent, into.JunkSent, into.DISTDropped, into.Changed = f.dist, f.junk, f.counted, f.changed
	into.ClaimsSent, into.InsideSent, into.InsideDropped = f.claims, f.inside, f.insideCounted
	into.GTSMSent, into.GTSMDropped = f.gtsm, f.gtsmCounted
}

func (f *flood) kind() string   { return "hostile" }
func (f *flood) target() string { return "lb1/e1, from h2" }

// allow is nothing lost, and every hostile frame dropped and counted.
func (f *flood) allow(Step, bool) allowance {
	return allowance{goal: "every DIST frame, SYN to the inside and BFD below TTL 255 dropped at the edge and counted, nothing changed", met: f.met()}
}

func (f *flood) text(row FaultReport) string {
	changed := ""
	if row.Changed != "" {
		changed = "; " + row.Changed
	}
	return fmt.Sprintf(" (%d DIST frames, %d claims for ospf1, %d SYNs to the inside, %d BFD at TTL 64 and %d random ones from h2: %d DIST, %d to the inside and %d BFD dropped at lb1/e1%s)",
		row.DISTSent, row.ClaimsSent, row.InsideSent, row.GTSMSent, row.JunkSent, row.DISTDropped, row.InsideDropped, row.GTSMDropped, changed)
}
