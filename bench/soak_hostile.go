package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The soak's hostile fault (issue 17 §1: a DIST flood and forged frames
// from outside): h2, an outside host on lb1's port e1, sends for
// hostileFor a flood of control frames — DIST sealed with a wrong key
// (an active VCP's announcement, a back-end's hello, a table for lb1) and
// DIST sealed with the router's own key (a stolen key, or frames replayed
// from inside) — and of random and malformed frames, to lb1's MAC and to
// broadcast. The goal: nothing of the soak's traffic lost, every DIST
// frame dropped at the router's edge and counted (lb1's e1 counts them,
// dist_external: DIST is the interconnect's, never an external port's),
// nothing changed (no element's state is the forger's).

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
)

// forgedGeneration is the generation of the forged table: an LB that
// took it would say so.
const forgedGeneration = 1 << 30

// flood is a hostile fault: what it sent, what lb1's e1 counted, and what
// changed that the forger asked for ("": nothing).
type flood struct {
	dist, junk uint64
	counted    uint64 // lb1's e1 dist_external drops while it ran
	changed    string
}

func (f *flood) run(*session) error {
	before, err := portDrops(hostilePort, "dist_external")
	if err != nil {
		return err
	}
	if err := f.send(); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the LB's counters are read from its maps: the last frames in
	after, err := portDrops(hostilePort, "dist_external")
	if err != nil {
		return err
	}
	f.counted = after - before
	f.changed = forgedChanges()
	return nil
}

// forgedChanges says what of the forged frames' asking the router shows:
// a back-end r9 known to a VCP, a table of the forged generation on an
// LB.
func forgedChanges() string {
	var changed []string
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
	key, err := dist.ReadKeyFile(filepath.Join(demo.RunDir, "key"), 1)
	if err != nil {
		return err
	}
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
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
		types := []uint16{0x0800, 0x0806, dist.EtherType, 0x8100, 0x86dd, 0x88cc}
		total := hostileDIST + hostileJunk
		start := time.Now()
		junk := make([]byte, 256)
		for i := range total {
			var b []byte
			if i%6 == 0 && f.dist < hostileDIST { // DIST, one in six
				b = frames[int(f.dist)%len(frames)]
				f.dist++
			} else {
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

// portDrops is an LB port's count of drops for why, read from its agent
// (again for up to opWait while it restarts: an overlapping fault's).
func portDrops(port, why string) (uint64, error) {
	lb, _, _ := strings.Cut(port, "/")
	st, err := demo.LBStatus(lb)
	for start := time.Now(); err != nil && time.Since(start) < opWait; st, err = demo.LBStatus(lb) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return 0, err
	}
	for _, p := range st.Ports {
		if p.Name == port && p.Stats != nil {
			return p.Stats.Drops[why], nil
		}
	}
	return 0, fmt.Errorf("%s: no port %s", lb, port)
}

// met says whether the flood's DIST frames were all dropped and counted
// at the edge, and it changed nothing.
func (f *flood) met() bool { return f != nil && f.dist > 0 && f.counted >= f.dist && f.changed == "" }

// report puts the flood's figures in its entry of the report.
func (f *flood) report(into *SoakFault) {
	if f == nil {
		return
	}
	into.DISTSent, into.JunkSent, into.DISTDropped, into.Changed = f.dist, f.junk, f.counted, f.changed
}
