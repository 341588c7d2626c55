package e2e

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
)

// TestDefaultLabHostileInput: an outside host (h1) sends forged DIST
// frames, replayed genuine ones, 10^6 random and malformed frames and an
// ARP storm at the router, while h2 pings h3 through it. The others'
// traffic keeps flowing, no process dies, and the LB counts what it drops.
func TestDefaultLabHostileInput(t *testing.T) {
	upDefaultLab(t, 100)
	before, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	ping := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h2", "ping", "-c", "600", "-i", "0.01", demo.H3)
		ping <- out
	}()

	var sent, malformed int
	err = netns.Do(lab.Namespace(demo.LabName, "h1"), func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
			return err
		}
		send := func(b []byte) error {
			for {
				err := unix.Send(fd, b, 0)
				if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
					time.Sleep(50 * time.Microsecond) // the qdisc is full: wait, lose nothing
					continue
				}
				if err == nil {
					sent++
				}
				return err
			}
		}
		lbMAC := net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}
		// Forged DIST (another key) and genuine DIST replayed, to the
		// group and to the LB: control frames from outside.
		forger, _ := dist.NewSender(0xbad, dist.Key{ID: 1, Secret: []byte(strings.Repeat("x", 32))})
		key, err := dist.ReadKeyFile(filepath.Join(demo.RunDir, "key"), 1)
		if err != nil {
			return err
		}
		genuine, _ := dist.NewSender(dist.ElementID("vcp", "vcp1"), key)
		forged, err := forger.Seal(dist.GroupMAC, ifi.HardwareAddr, &dist.VCPAnnounce{State: dist.VCPActive, APIAddr: netip.IPv4Unspecified()})
		if err != nil {
			return err
		}
		replay, err := genuine.Seal(lbMAC, ifi.HardwareAddr, &dist.TableUpdate{Target: dist.ElementID("lb", "lb1"), Generation: 99, Mode: 2,
			Flags: dist.TableFlush | dist.TableLast})
		if err != nil {
			return err
		}
		for i := 0; i < 1000; i++ {
			if err := send(forged); err != nil {
				return err
			}
			if err := send(replay); err != nil {
				return err
			}
			malformed += 2
		}
		// 10^6 random and malformed frames.
		r := rand.New(rand.NewPCG(1, 2))
		types := []uint16{0x0800, 0x0806, dist.EtherType, 0x8100, 0x86dd, uint16(r.Uint32())}
		b := make([]byte, 256)
		for i := 0; i < 1_000_000; i++ {
			n := 14 + r.IntN(200)
			for j := range b[:n] {
				b[j] = byte(r.Uint32())
			}
			switch i % 3 {
			case 0:
				copy(b, lbMAC)
			case 1:
				copy(b, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			}
			binary.BigEndian.PutUint16(b[12:], types[r.IntN(len(types))])
			if err := send(b[:n]); err != nil {
				return err
			}
			malformed++
		}
		// An ARP storm: who-has the router's address, from 100,000
		// made-up senders.
		for i := 0; i < 100_000; i++ {
			mac := net.HardwareAddr{2, 0xee, byte(i >> 16), byte(i >> 8), byte(i), 1}
			a := make([]byte, 42)
			copy(a, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			copy(a[6:], mac)
			binary.BigEndian.PutUint16(a[12:], 0x0806)
			copy(a[14:], []byte{0, 1, 8, 0, 6, 4, 0, 1})
			copy(a[22:], mac)
			copy(a[28:], []byte{192, 0, 2, byte(20 + i%200)})
			copy(a[38:], []byte{192, 0, 2, 1})
			if err := send(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := <-ping
	t.Logf("h1 sent %d hostile frames; h2 -> h3 meanwhile: %s", sent, lastLine(out, "packets transmitted"))
	if !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h2's pings to h3 during the attack:\n%s", lastLine(out, "packets transmitted"))
	}
	// Every process is still there.
	st, _, _ := msr(t, "lab", "status", demo.LabName, "-o", "json")
	if strings.Count(st, `"running": true`) != 10 || strings.Contains(st, `"running": false`) { // bird, bgpd, 2 LBs, 3 back-ends, 2 VCPs, mon
		t.Errorf("processes after the attack: %s", st)
	}
	// The LB counted what it dropped on h1's port, and its table is still
	// the VCP's.
	after, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	rx, drops := portDelta(before, after, "lb1/e0")
	t.Logf("lb1's e0: %d frames received, %d dropped and counted by reason", rx, drops)
	if rx < uint64(sent)*99/100 || drops < uint64(malformed)*9/10 {
		t.Errorf("lb1's e0 received %d and dropped %d of %d frames sent, %d of them malformed", rx, drops, sent, malformed)
	}
	if after.Table.Generation == 99 {
		t.Error("a replayed TABLE_UPDATE from outside was applied")
	}
	if out, err := demo.Exec("h1", "ping", "-c", "2", "-i", "0.2", demo.H3); err != nil {
		t.Errorf("h1 itself cannot use the router afterwards: %v\n%s", err, out)
	}
}
