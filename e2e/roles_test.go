package e2e

import (
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestDISTRoles: a compromised back-end (r1's host, which holds the
// element key every element holds) tries, on the interconnect, to
// configure another back-end (a static neighbour on r2 taking bgp1's
// address), to empty an LB's table (lb1) and to pose as the VCP: each
// frame is refused, counted as dist_role_refused, and changes nothing.
// The same kind of frame signed with the VCP's key is taken: the key
// decides, not the frame. Then r2's agent restarts and that signed frame,
// captured, is sent again: refused as a replay, since r2's replay state
// outlived its restart.
func TestDISTRoles(t *testing.T) {
	upDefaultLab(t, 10)
	element, err := dist.ReadKeyFile(filepath.Join(demo.RunDir, dist.ElementKeyFile), 1)
	if err != nil {
		t.Fatal(err)
	}
	vcps, err := dist.ReadVCPKeys(filepath.Join(demo.RunDir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		t.Fatal(err)
	}
	conn := disttest.Listen(t, lab.Namespace(demo.LabName, "r1"), "eth0", dist.Ring(element, vcps[0]))
	r2 := routerapi.Local("r2", "")
	r2ID, lb1ID := dist.ElementID("router", "r2"), dist.ElementID("lb", "lb1")
	r2Before, err := r2.Status()
	if err != nil {
		t.Fatal(err)
	}
	lb1Before, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	thief := net.HardwareAddr{2, 0, 0, 0, 0xba, 0xd0}
	neighbour := func(addr string) *dist.StaticNeighbors {
		return &dist.StaticNeighbors{Target: r2ID, Neighbors: []dist.StaticNeighbor{{Addr: netip.MustParseAddr(addr), VLAN: 12, MAC: thief}}}
	}
	send := func(s *dist.Sender, m dist.Message) []byte {
		t.Helper()
		b, err := s.Seal(dist.GroupMAC, conn.MAC(), m)
		if err == nil {
			err = conn.Send(b)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// The attack: configuring frames sealed with the element key.
	forger, _ := dist.NewSender(0xbad0001, element)
	send(forger, neighbour(demo.BGPPeer))
	send(forger, &dist.TableUpdate{Target: lb1ID, Generation: lb1Before.Table.Generation + 1, Mode: dist.ModeHash, Flags: dist.TableFlush | dist.TableLast})
	send(forger, &dist.VCPAnnounce{State: dist.VCPActive, Priority: 255, HelloIntervalMs: 100, APIAddr: netip.MustParseAddr("10.0.0.11")})
	var r2After *routerapi.Status
	waitFor(t, 3*time.Second, "r2 and lb1 to count three refused frames each", func() bool {
		r2After, err = r2.Status()
		lb1, lerr := demo.LBStatus("lb1")
		return err == nil && lerr == nil && r2After.DISTRoleRefused-r2Before.DISTRoleRefused >= 3 && lb1.DISTRoleRefused-lb1Before.DISTRoleRefused >= 3
	})
	time.Sleep(300 * time.Millisecond) // time to act on them, were they taken
	r2After, _ = r2.Status()
	lb1After, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	if n := r2After.DISTRoleRefused - r2Before.DISTRoleRefused; n != 3 {
		t.Errorf("r2 counted %d frames dist_role_refused, want 3", n)
	}
	if n := lb1After.DISTRoleRefused - lb1Before.DISTRoleRefused; n != 3 {
		t.Errorf("lb1 counted %d frames dist_role_refused, want 3", n)
	}
	bgp1 := demo.BGPPeer + " vlan 12"
	if mac := r2After.Neighbors[bgp1]; mac == thief.String() || slices.Contains(r2After.StaticNeighbors, bgp1) {
		t.Errorf("r2 took a static neighbour from a back-end: %s is at %s (static %v)", bgp1, mac, r2After.StaticNeighbors)
	}
	if len(lb1After.Table.Shares) != len(demo.Backends) || lb1After.VCPMAC != lb1Before.VCPMAC {
		t.Errorf("lb1 after a back-end's table and announce: table %+v, VCP %s (was %s)", lb1After.Table, lb1After.VCPMAC, lb1Before.VCPMAC)
	}
	t.Logf("refused: r2 %d, lb1 %d frames; r2's static neighbours %v, lb1's table %d back-ends", r2After.DISTRoleRefused-r2Before.DISTRoleRefused,
		lb1After.DISTRoleRefused-lb1Before.DISTRoleRefused, r2After.StaticNeighbors, len(lb1After.Table.Shares))

	// The legitimate case: the same message signed with the VCP's key.
	// Its neighbour is an unused address: the VCP's own set replaces it
	// within 10 s.
	legit, _ := dist.NewSender(0xbad0002, vcps[0])
	unused := "203.0.113.99 vlan 12"
	signed := send(legit, neighbour("203.0.113.99"))
	waitFor(t, 3*time.Second, "r2 to take the VCP-signed static neighbour", func() bool {
		st, err := r2.Status()
		return err == nil && slices.Contains(st.StaticNeighbors, unused)
	})
	waitFor(t, 15*time.Second, "the VCP's own set to replace it", func() bool {
		st, err := r2.Status()
		return err == nil && !slices.Contains(st.StaticNeighbors, unused)
	})

	// r2 restarts; the captured frame comes again.
	time.Sleep(1500 * time.Millisecond) // past the replay state's save interval
	if _, _, err := lab.Restart(demo.LabName, "r2", "router", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "r2's agent back and ready", func() bool {
		st, err := r2.Status()
		return err == nil && st.Ready
	})
	if err := conn.Send(signed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "r2 to refuse the replayed frame", func() bool {
		st, err := r2.Status()
		return err == nil && st.DIST["replay"] >= 1
	})
	time.Sleep(300 * time.Millisecond)
	st, err := r2.Status()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.StaticNeighbors, unused) {
		t.Errorf("r2 took a replayed frame after its restart: static neighbours %v", st.StaticNeighbors)
	}
	t.Logf("after r2's restart: replay refused %d, static neighbours %v", st.DIST["replay"], st.StaticNeighbors)
}

// TestDISTKeyRollover rolls the default lab's DIST keys over, the three
// steps of docs/operations.md, while h1 pings h3 through the router: after
// each step every element reads its files again (SIGHUP); no element
// refuses a frame for its key (unknown_key, auth, role_refused), no ping
// is lost, and at the end a frame signed with the old VCP key is refused
// as unknown_key.
func TestDISTKeyRollover(t *testing.T) {
	upDefaultLab(t, 10)
	old, err := dist.ReadVCPKeys(filepath.Join(demo.RunDir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		t.Fatal(err)
	}
	before := keyRefusals(t)
	ping := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h1", "ping", "-c", "700", "-i", "0.01", demo.H3)
		ping <- out
	}()
	hosts := []string{"lb1", "lb2", "r1", "r2", "r3", "vcp1", "vcp2"}
	for _, step := range []string{dist.RotateAdd, dist.RotatePromote, dist.RotateRetire} {
		if err := dist.RotateKeys(demo.RunDir, step); err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if err := syscall.Kill(labPID(t, demo.LabName, h), syscall.SIGHUP); err != nil {
				t.Fatalf("%s: %v", h, err)
			}
		}
		time.Sleep(2 * time.Second) // hellos and pushes both ways, sealed with the step's keys
	}
	after := keyRefusals(t)
	for k, n := range after {
		if n != before[k] {
			t.Errorf("%s: %d frames refused during the rollover", k, n-before[k])
		}
	}
	if out := <-ping; !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h1's pings to h3 during the rollover:\n%s", lastLine(out, "packet loss"))
	}
	now, err := dist.ReadVCPKeys(filepath.Join(demo.RunDir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil || len(now) != 1 || now[0].ID == old[0].ID {
		t.Fatalf("after the rollover the VCP's keys are %+v (%v); the old one was %d", now, err, old[0].ID)
	}
	conn := disttest.Listen(t, lab.Namespace(demo.LabName, "r1"), "eth0", dist.Ring(now[0]))
	retired, _ := dist.NewSender(0xbad0003, old[0])
	b, _ := retired.Seal(dist.GroupMAC, conn.MAC(), &dist.VCPAnnounce{State: dist.VCPActive, Priority: 255, HelloIntervalMs: 100, APIAddr: netip.MustParseAddr("10.0.0.11")})
	r2 := routerapi.Local("r2", "")
	st, err := r2.Status()
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "r2 to refuse a frame of the retired VCP key", func() bool {
		now, err := r2.Status()
		return err == nil && now.DIST["unknown_key"] == st.DIST["unknown_key"]+1
	})
	t.Logf("VCP key %d rolled over to %d; no frame refused, no ping lost", old[0].ID, now[0].ID)
}

// keyRefusals is, by element and reason, the DIST frames the default
// lab's elements refused for their keys.
func keyRefusals(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	add := func(who string, c map[string]uint64) {
		for _, r := range []string{"unknown_key", "auth", "role_refused"} {
			out[who+" "+r] += c[r]
		}
	}
	for _, l := range []string{"lb1", "lb2"} {
		st, err := demo.LBStatus(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.DIST {
			add(l, c)
		}
	}
	for _, r := range demo.Backends {
		st, err := routerapi.Local(r, "").Status()
		if err != nil {
			t.Fatal(err)
		}
		add(r, st.DIST)
	}
	for _, v := range []string{"vcp1", "vcp2"} {
		st, err := vcpapi.Local(v, "").Status()
		if err != nil {
			t.Fatal(err)
		}
		add(v, st.DIST)
	}
	return out
}
